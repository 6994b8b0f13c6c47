// The service's logger: pino's JSON lines on stdout, or pino-pretty's lines when stdout is a terminal.
import { hostname } from 'node:os';
import pino, { type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** pino's levels, quietest first: LOG_LEVEL takes one of them. */
export const LOG_LEVELS = ['silent', 'fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * How many bytes of lines are buffered before a write, and at most how long a line waits. Each write(2) goes
 * through libuv's thread pool and back, so fewer are cheaper; the buffer stays under sonic-boom's largest
 * write (16 KB), which it must, and the wait bounds what a killed process loses either way.
 */
const LINES_BUFFERED = 12 * 1024;
const LINES_FLUSHED_MS = 100;

export interface LoggerOptions {
  readonly level: LogLevel;
  /** Human-readable lines (a terminal); default: JSON lines. */
  readonly pretty?: boolean;
  /** Where the lines go: a stream (tests read them back), or stderr (2); default stdout. */
  readonly destination?: DestinationStream | 2;
}

/**
 * A request line reads `GET /v1/products 200 3.1 ms` in a terminal; other lines show their message.
 * pino-pretty's template: `{if key}…{end}` prints only when the line has that field.
 */
const PRETTY_LINE = '{if method}{method} {path} {status} {durationMs} ms {outcome} {subject}{end}{msg}';

const PRETTY_HIDDEN = 'pid,hostname,reqId,method,path,status,durationMs,outcome,subject,cost,tier,code,reason';

interface SafeError {
  type: string;
  message: string;
  code?: unknown;
  stack?: string;
  cause?: SafeError;
}

/**
 * An error as logged: its type, message, code and stack, and its causes alike, nothing else. pino's own
 * serializer copies every property, and a query error carries the query's parameters (Drizzle's `params`),
 * which hold the request's filter values.
 */
function safeError(error: unknown, depth = 0): SafeError {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error) };
  const { code, cause, query, params } = error as Error & { code?: unknown; query?: unknown; params?: unknown };
  let { message, stack } = error;
  if (typeof query === 'string' && params !== undefined) {
    // DrizzleQueryError's message and stack list the values: keep the statement, which has only placeholders.
    message = `Failed query: ${query}`;
    const frames = stack?.indexOf('\n    at ') ?? -1;
    stack = `${error.name}: ${message}${frames === -1 ? '' : stack!.slice(frames)}`;
  }
  return {
    type: error.constructor.name,
    message,
    ...(code === undefined ? {} : { code }),
    stack,
    ...(cause === undefined || depth >= 4 ? {} : { cause: safeError(cause, depth + 1) }),
  };
}

/** What writes a request's line: `fields` at info, as pino would write them. */
type RequestLineWriter = (fields: object) => void;

/** The request-line writers of the loggers made here (createLogger), each to its logger's own destination. */
const requestLineWriters = new WeakMap<Logger, RequestLineWriter>();

/**
 * A request's line at info (docs/reference/logs.md), as pino writes a line of a logger made here: its level,
 * time, pid and hostname, then `fields`, those undefined left out. Written with one JSON.stringify to the
 * logger's own destination, in the order of its other lines: pino writes an object's line key by key, a
 * string joined for each, which every request would pay for. A logger made elsewhere logs it with pino.
 */
export function logRequest(logger: Logger, fields: object): void {
  const write = requestLineWriters.get(logger);
  if (write === undefined) logger.info(fields);
  else if (logger.isLevelEnabled('info')) write(fields);
}

/** Where a logger made here writes: pino's own lines, and the request lines' JSON (without its newline). */
interface Sink {
  readonly destination: DestinationStream;
  readonly line: (json: string) => void;
}

/** A destination that takes text: each request line written as one string. */
function textSink(destination: DestinationStream): Sink {
  return { destination, line: (json) => destination.write(`${json}\n`) };
}

/**
 * stdout through sonic-boom in its buffer mode, which keeps each line's bytes as they were written and joins them
 * once for each write(2): in its text mode it joined each line to the text not yet written and measured that
 * again, a copy of up to LINES_BUFFERED bytes for every line. pino writes text, so its lines are turned into
 * bytes on their way.
 */
function bytesSink(boom: ReturnType<typeof pino.destination>): Sink {
  const write = (bytes: Buffer) => boom.write(bytes as unknown as string);
  return {
    destination: { write: (text: string) => write(Buffer.from(text)) },
    // The newline joined to the line as text: one Buffer and one entry of sonic-boom's list per line, not two.
    line: (json) => write(Buffer.from(`${json}\n`)),
  };
}

/**
 * The request-line writer of a sink: pino's level, time, pid and hostname first, then the fields, joined to
 * their JSON as text (spread into a new object to put them first, they would be copied once more).
 */
function requestLineWriter(sink: Sink): RequestLineWriter {
  const base = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`;
  return (fields) => {
    const json = JSON.stringify(fields);
    sink.line(`{"level":30,"time":${Date.now()}${base}${json.length > 2 ? `,${json.slice(1)}` : '}'}`);
  };
}

/** A pino logger on `sink`, its request lines written by requestLineWriter. */
function loggerOn(level: LogLevel, sink: Sink): Logger {
  const logger = pino({ level, serializers: { err: safeError } }, sink.destination);
  requestLineWriters.set(logger, requestLineWriter(sink));
  return logger;
}

export function createLogger(options: LoggerOptions): Logger {
  if (options.pretty) {
    const destination = options.destination === 2 ? 2 : (options.destination ?? 1);
    // A request's fields are on its one line already (PRETTY_LINE); an error's are shown below its line.
    // Colours unless NO_COLOR is set (pino-pretty's default).
    const stream = pretty({ sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: PRETTY_HIDDEN, messageFormat: PRETTY_LINE, destination });
    return loggerOn(options.level, textSink(stream));
  }
  if (options.destination === 2) return loggerOn(options.level, textSink(pino.destination({ dest: 2, sync: true })));
  if (options.destination !== undefined) return loggerOn(options.level, textSink(options.destination));
  // Asynchronous: a request never waits for a write(2). Lines go out 12 KB at a time, or every 100 ms, rather than
  // a write(2) each: one a request cost the server more than building its line. pino flushes what is buffered when
  // the process exits; a process killed outright loses at most 100 ms of lines.
  const stdout = pino.destination({
    dest: 1,
    sync: false,
    minLength: LINES_BUFFERED,
    periodicFlush: LINES_FLUSHED_MS,
    contentMode: 'buffer',
  });
  return loggerOn(options.level, bytesSink(stdout));
}

// The typed client of the service (`paginated-collections/client`): walks collections by their links, waits out
// 429s, retries 503s, throws problems as typed errors. Only `fetch`: it runs in Node, Deno, Bun and a browser.
import type { components, paths } from './openapi.ts';

/**
 * The paths of a service's document as openapi-typescript writes them: by default this service's own (./openapi.ts),
 * or a team's, generated from its running service (`npm run client:types -- --from URL --out FILE`).
 */
export type Paths = object;

/** The collections the service's document lists: every `/v1/{name}` path that answers GET. */
export type CollectionName<P extends Paths = paths> = {
  [K in keyof P]: K extends `/v1/${infer Name}` ? (P[K] extends { get: { parameters: unknown } } ? Name : never) : never;
}[keyof P];

type Operation<N extends string, P extends Paths> = P extends { [K in `/v1/${N}`]: { get: infer O } } ? O : never;

/** The query parameters a collection takes: its variants' parameters and its filters, as spelled on the wire. */
export type Query<N extends CollectionName<P>, P extends Paths = paths> = NonNullable<
  Operation<N, P> extends { parameters: { query?: infer Q } } ? Q : never
>;

/** A chunk of a collection, of any of its variants. */
export type Chunk<N extends CollectionName<P>, P extends Paths = paths> =
  Operation<N, P> extends { responses: { 200: { content: { 'application/json': infer C } } } } ? C : never;

/** An item of a collection. */
export type Item<N extends CollectionName<P>, P extends Paths = paths> =
  Chunk<N, P> extends infer C ? (C extends { [K in N]: (infer I)[] } ? I : never) : never;

export type Problem = components['schemas']['Problem'];
export type ErrorCode = Problem['code'];

/** An answer of the service in application/problem+json (RFC 9457), thrown as it came. */
export class ProblemError extends Error {
  override name = 'ProblemError';
  readonly code: ErrorCode;
  readonly status: number;
  readonly detail: string;
  /** The problem's `invalid_params`: each named part of the request that is wrong, and why. */
  readonly invalidParams: NonNullable<Problem['invalid_params']>;
  /** The whole problem as the service sent it. */
  readonly problem: Problem;
  constructor(problem: Problem) {
    super(`${problem.code}: ${problem.detail}`);
    this.problem = problem;
    this.code = problem.code;
    this.status = problem.status;
    this.detail = problem.detail;
    this.invalidParams = problem.invalid_params ?? [];
  }
}

export interface ClientOptions {
  /** The service's origin, e.g. "http://localhost:3000". */
  readonly baseUrl: string;
  /** An API key (from POST /v1/keys or the operator), sent as `Authorization: Bearer …`; without one (or a token) the client is counted by its address. */
  readonly apiKey?: string;
  /**
   * A JWT from the team's identity provider, sent as `Authorization: Bearer …`, when the service verifies tokens;
   * a function is asked before every request, so that a token can be renewed before it expires.
   */
  readonly token?: string | (() => string | Promise<string>);
  /** The longest single wait for a 429, in seconds (default 60): a longer one is thrown as the ProblemError. */
  readonly maxWaitSeconds?: number;
  /** How often one request is retried after a 429 (default 10). */
  readonly maxRetries?: number;
  /** How often one request is retried after a 503 with Retry-After (default 3). */
  readonly maxUnavailableRetries?: number;
  /**
   * Spread requests over what is left of the allowance (RateLimit, else X-RateLimit-Remaining and -Reset): each
   * waits the seconds until the allowance is back, times its cost, over the units remaining. Off by default.
   */
  readonly pace?: boolean;
  /**
   * The fetch to use (default: the global one). Only its call is used, so any runtime's fetch fits (Bun's
   * type adds members, such as `preconnect`, that a wrapper need not have).
   */
  readonly fetch?: FetchFunction;
}

/** What the client calls to send a request: the global fetch, or any function of its call signature. */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface ListOptions {
  /** 'next' (default): to the last chunk. 'poll': then the `poll` link, every `interval` ms, until `signal` aborts. */
  readonly follow?: 'next' | 'poll';
  /** Milliseconds between polls (default 5000). */
  readonly interval?: number;
  /** Ends the walk (and any wait) when aborted; the iteration then ends without an error. */
  readonly signal?: AbortSignal;
}

/** A walk of a collection: iterate it for items, or its chunks() for whole chunks. */
export interface Listing<N extends CollectionName<P>, P extends Paths = paths> extends AsyncIterable<Item<N, P>> {
  chunks(): AsyncIterable<Chunk<N, P>>;
}

export interface Client<P extends Paths = paths> {
  list<N extends CollectionName<P>>(collection: N, query?: Query<N, P>, options?: ListOptions): Listing<N, P>;
  /** GET one URL of the service (a path, or a link it gave) with the client's waits and retries; the parsed body. */
  get(url: string, signal?: AbortSignal): Promise<unknown>;
}

class Aborted extends Error {}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Aborted());
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Aborted());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Seconds of a Retry-After header: delta-seconds, or an HTTP date. */
function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000);
}

/** What the allowance looks like after a response: units remaining and seconds until it is all back. */
function allowanceOf(headers: Headers): { remaining: number; seconds: number } | undefined {
  const draft = /;r=(\d+);t=(\d+)/.exec(headers.get('ratelimit') ?? '');
  if (draft) return { remaining: Number(draft[1]), seconds: Number(draft[2]) };
  const remaining = headers.get('x-ratelimit-remaining');
  const reset = headers.get('x-ratelimit-reset');
  if (remaining === null || reset === null) return undefined;
  return { remaining: Number(remaining), seconds: Math.max(0, Number(reset) - Date.now() / 1000) };
}

async function problemOf(response: Response): Promise<Error> {
  const type = response.headers.get('content-type') ?? '';
  if (type.startsWith('application/problem+json')) return new ProblemError((await response.json()) as Problem);
  await response.body?.cancel();
  return new Error(`Unexpected response: ${response.status} ${response.statusText} from ${response.url}`);
}

/**
 * A client of the service. Typed by this service's own document unless given another's `paths`:
 * `createClient<paths>({ baseUrl })` with `paths` from a team's generated file.
 */
export function createClient<P extends Paths = paths>(options: ClientOptions): Client<P> {
  const base = options.baseUrl.replace(/\/+$/, '');
  const fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
  const maxWait = options.maxWaitSeconds ?? 60;
  const maxRetries = options.maxRetries ?? 10;
  const maxUnavailable = options.maxUnavailableRetries ?? 3;
  const fixed: Record<string, string> = { accept: 'application/json' };
  if (options.apiKey) fixed.authorization = `Bearer ${options.apiKey}`;
  const { token } = options;
  if (options.apiKey && token) throw new TypeError('createClient takes an apiKey or a token, not both');
  /** The headers of a request: a token function is asked each time, so that it can renew the token. */
  async function headersNow(): Promise<Record<string, string>> {
    if (token === undefined) return fixed;
    return { ...fixed, authorization: `Bearer ${typeof token === 'string' ? token : await token()}` };
  }
  // Pacing: when the next request may go, and the units the last one cost (the drop in Remaining).
  let notBefore = 0;
  let lastRemaining: number | undefined;

  function observe(response: Response): void {
    if (!options.pace) return;
    const allowance = allowanceOf(response.headers);
    if (allowance === undefined) return;
    const cost = lastRemaining !== undefined && lastRemaining > allowance.remaining ? lastRemaining - allowance.remaining : 1;
    lastRemaining = allowance.remaining;
    const seconds = allowance.remaining >= cost ? (allowance.seconds * cost) / allowance.remaining : allowance.seconds;
    notBefore = Date.now() + seconds * 1000;
  }

  async function get(url: string, signal?: AbortSignal): Promise<unknown> {
    const target = /^https?:/.test(url) ? url : `${base}${url}`;
    let limited = 0;
    let unavailable = 0;
    for (;;) {
      if (notBefore > Date.now()) await sleep(notBefore - Date.now(), signal);
      const response = await fetcher(target, { headers: await headersNow(), signal });
      observe(response);
      if (response.ok) return response.json();
      const error = await problemOf(response);
      const retryAfter = retryAfterSeconds(response.headers.get('retry-after'));
      let wait: number | undefined;
      if (error instanceof ProblemError && retryAfter !== undefined) {
        if (error.code === 'Request_limit_exceeded' && limited < maxRetries) {
          // Never past X-RateLimit-Reset, when this request fits again (unless the clocks disagree so much it has passed).
          const untilReset = Number(response.headers.get('x-ratelimit-reset')) - Date.now() / 1000;
          wait = untilReset > 0 ? Math.min(retryAfter, untilReset) : retryAfter;
          limited++;
        } else if (error.code === 'Concurrency_limit_exceeded' && limited < maxRetries) {
          wait = retryAfter;
          limited++;
        } else if (error.status === 503 && unavailable < maxUnavailable) {
          wait = retryAfter;
          unavailable++;
        }
      }
      if (wait === undefined || wait > maxWait) throw error;
      await sleep(wait * 1000, signal);
    }
  }

  function firstUrl(collection: string, query: Record<string, unknown> | undefined): string {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined) search.set(name, String(value));
    const text = search.toString();
    return `${base}/v1/${encodeURIComponent(collection)}${text ? `?${text}` : ''}`;
  }

  function list<N extends CollectionName<P>>(collection: N, query?: Query<N, P>, listOptions: ListOptions = {}): Listing<N, P> {
    const { follow = 'next', interval = 5000, signal } = listOptions;
    async function* chunks(): AsyncGenerator<Chunk<N, P>> {
      let url: string | undefined = firstUrl(collection, query as Record<string, unknown> | undefined);
      try {
        while (url !== undefined) {
          const chunk = await get(url, signal);
          yield chunk as Awaited<Chunk<N, P>>;
          const { next, poll } = (chunk as { _links: Record<string, { href: string } | undefined> })._links;
          if (next) {
            url = next.href;
          } else if (follow === 'poll' && poll) {
            await sleep(interval, signal);
            url = poll.href;
          } else {
            url = undefined;
          }
        }
      } catch (error) {
        if (!(error instanceof Aborted) && !signal?.aborted) throw error;
      }
    }
    return {
      chunks,
      async *[Symbol.asyncIterator]() {
        for await (const chunk of chunks()) yield* (chunk as unknown as Record<N, Item<N, P>[]>)[collection];
      },
    };
  }

  return { list, get };
}

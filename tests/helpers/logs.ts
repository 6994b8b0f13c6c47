// Reading a server's log back: its JSON lines, parsed; anything else it printed is left out.
export type LogLine = Record<string, unknown> & { level: number; time: number; msg?: string };

/** Every line of `output` that is a JSON object, parsed, in order. */
export function logLines(output: string): LogLine[] {
  const lines: LogLine[] = [];
  for (const text of output.split('\n')) {
    if (!text.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(text) as LogLine);
    } catch {
      // a line cut by the end of the output read so far
    }
  }
  return lines;
}

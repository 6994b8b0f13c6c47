// The part of autocannon's programmatic API the bench uses (the package ships no types).
declare module 'autocannon' {
  namespace autocannon {
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string;
      /** May rewrite the request from what earlier responses left in `context`; a falsy return restarts the list. */
      setupRequest?: (request: Request, context: Record<string, unknown>) => Request | undefined | null | false;
      onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string>) => void;
    }

    interface Options {
      url: string;
      connections?: number;
      duration?: number;
      pipelining?: number;
      timeout?: number;
      method?: string;
      headers?: Record<string, string>;
      requests?: Request[];
      excludeErrorStats?: boolean;
    }

    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total?: number;
      p50: number;
      p90: number;
      p99: number;
    }

    interface Result {
      /** Seconds the run lasted. */
      duration: number;
      latency: Histogram;
      requests: Histogram & { total: number; sent: number };
      errors: number;
      timeouts: number;
      non2xx: number;
      '2xx': number;
    }

    interface Instance extends PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(options: autocannon.Options): autocannon.Instance;
  export default autocannon;
}

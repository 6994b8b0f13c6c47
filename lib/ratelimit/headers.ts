// The rate-limit headers of every response that was counted (docs/reference/headers.md, "Rate-limit headers").
import type { Decision } from './limiter.ts';

/**
 * The headers of a rate-limited response (docs/reference/headers.md, "Rate-limit headers"; draft-ietf-httpapi-ratelimit-headers):
 * X-RateLimit-* and the IETF RateLimit-Policy / RateLimit, whose `t` is the seconds until Reset.
 */
export function rateLimitHeaders(
  decision: Decision,
  remaining: number = decision.remaining,
  reset: number = decision.reset,
): Record<string, string> {
  const untilReset = Math.max(0, reset - decision.now);
  const policy = JSON.stringify(decision.tier);
  return {
    'x-ratelimit-limit': String(decision.allowance),
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': String(reset),
    'ratelimit-policy': `${policy};q=${decision.allowance};w=${decision.windowSeconds}`,
    ratelimit: `${policy};r=${remaining};t=${untilReset}`,
  };
}

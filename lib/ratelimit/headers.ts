// The rate-limit headers of every response that was counted (docs/reference/headers.md, "Rate-limit headers").
import type { Decision } from './limiter.ts';

/**
 * The headers of a rate-limited response (docs/reference/headers.md, "Rate-limit headers"; draft-ietf-httpapi-ratelimit-headers):
 * X-RateLimit-* and the IETF RateLimit-Policy / RateLimit, whose `t` is the seconds until Reset.
 */
export function rateLimitHeaders(decision: Decision): Record<string, string> {
  const untilReset = Math.max(0, decision.reset - decision.now);
  const policy = JSON.stringify(decision.tier);
  return {
    'x-ratelimit-limit': String(decision.allowance),
    'x-ratelimit-remaining': String(decision.remaining),
    'x-ratelimit-reset': String(decision.reset),
    'ratelimit-policy': `${policy};q=${decision.allowance};w=${decision.windowSeconds}`,
    ratelimit: `${policy};r=${decision.remaining};t=${untilReset}`,
  };
}

// The rate-limit headers, without a database: what a decision is reported as.
import t from 'tap';
import { rateLimitHeaders } from '../../lib/ratelimit/headers.ts';
import type { Decision } from '../../lib/ratelimit/limiter.ts';

const decision = (fields: Partial<Decision>): Decision => ({
  outcome: 'ok',
  subject: 'ip:203.0.113.7',
  tier: 'anonymous',
  keyId: undefined,
  scope: undefined,
  allowance: 60,
  windowSeconds: 60,
  remaining: 59,
  reset: 1_800_000_060,
  retryAfter: 0,
  now: 1_800_000_000,
  lease: undefined,
  charged: 1,
  concurrency: 4,
  ...fields,
});

t.test('X-RateLimit-* and the IETF RateLimit-Policy / RateLimit of one decision', async (t) => {
  t.same(rateLimitHeaders(decision({})), {
    'x-ratelimit-limit': '60',
    'x-ratelimit-remaining': '59',
    'x-ratelimit-reset': '1800000060',
    'ratelimit-policy': '"anonymous";q=60;w=60',
    ratelimit: '"anonymous";r=59;t=60',
  });
  t.same(
    rateLimitHeaders(
      decision({ tier: 'pro', allowance: 6000, windowSeconds: 3600, remaining: 0, reset: 1_800_000_017, outcome: 'rate', retryAfter: 17 }),
    ),
    {
      'x-ratelimit-limit': '6000',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '1800000017',
      'ratelimit-policy': '"pro";q=6000;w=3600',
      ratelimit: '"pro";r=0;t=17',
    },
  );
});

t.test('t is the seconds until Reset, never negative; the policy name is a quoted string', async (t) => {
  t.equal(rateLimitHeaders(decision({ reset: 1_800_000_000 })).ratelimit, '"anonymous";r=59;t=0', 'reset now');
  t.equal(rateLimitHeaders(decision({ reset: 1_799_999_990 })).ratelimit, '"anonymous";r=59;t=0', 'a reset already past');
  t.equal(rateLimitHeaders(decision({ reset: 1_799_999_990 }))['x-ratelimit-reset'], '1799999990', 'Reset itself as it is');
  t.equal(
    rateLimitHeaders(decision({ tier: 'a "b" \\c' }))['ratelimit-policy'],
    '"a \\"b\\" \\\\c";q=60;w=60',
    'quotes and backslashes escaped',
  );
  t.equal(rateLimitHeaders(decision({ tier: 'registration' }))['ratelimit-policy'], '"registration";q=60;w=60');
});

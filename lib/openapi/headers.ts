// The response headers of the OpenAPI document, in one table: each described once, and the sets each kind of answer sends.
// A header the service starts sending is added here, and to the sets of the answers that carry it.

/** A header's OpenAPI Header Object: what it says, and its value's schema. */
interface HeaderDoc {
  readonly description: string;
  readonly schema: Record<string, unknown>;
}

const unixSecond = { type: 'integer', minimum: 0 } as const;

/** Every header the document names, by its component name (the header's own spelling). */
export const headerDocs = {
  Link: {
    description:
      'RFC 8288 links: the same links as `_links`, in the same order, then `</openapi.json>; rel="service-desc", </docs>; rel="service-doc"` (RFC 8631)',
    schema: { type: 'string' },
  },
  'X-RateLimit-Limit': {
    description: "The client's allowance: units per window of its tier",
    schema: { type: 'integer', minimum: 1 },
  },
  'X-RateLimit-Remaining': {
    description: 'Units left after this request; requests costing that much in all, sent one after another, are served',
    schema: { type: 'integer', minimum: 0 },
  },
  'X-RateLimit-Reset': {
    description:
      'The Unix second at which the whole allowance is back; on a 429 `Request_limit_exceeded`, the second at which this request first fits',
    schema: unixSecond,
  },
  'RateLimit-Policy': {
    description:
      'IETF draft-ietf-httpapi-ratelimit-headers: the tier, its allowance `q` and its window `w` in seconds, e.g. `"free";q=600;w=60`',
    schema: { type: 'string', pattern: '^"[^"]*";q=\\d+;w=\\d+$' },
  },
  RateLimit: {
    description:
      'IETF draft-ietf-httpapi-ratelimit-headers: the tier, the units remaining `r` and the seconds until Reset `t`, e.g. `"free";r=42;t=17`',
    schema: { type: 'string', pattern: '^"[^"]*";r=\\d+;t=\\d+$' },
  },
  'Retry-After': {
    description: 'Seconds to wait before trying again: never past X-RateLimit-Reset on a 429; 1 on a 503',
    schema: { type: 'integer', minimum: 0 },
  },
  Allow: {
    description: 'The methods the path takes',
    schema: { type: 'string' },
  },
} as const satisfies Record<string, HeaderDoc>;

export type HeaderName = keyof typeof headerDocs;

/** What every answer under /v1 that the rate limiter decided carries (docs/rate-limit.md, "Headers"). */
export const RATE_LIMIT_HEADERS = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit-Policy',
  'RateLimit',
] as const;

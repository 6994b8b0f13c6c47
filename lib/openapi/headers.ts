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
    description:
      'Seconds to wait before trying again: never past X-RateLimit-Reset on a 429; 1 on a 503 of the database; on a collection_unavailable, 1 while the catalog is read again and 5 while the collection stays unavailable',
    schema: { type: 'integer', minimum: 0 },
  },
  Allow: {
    description: 'The methods the path takes',
    schema: { type: 'string' },
  },
  ETag: {
    description:
      "A weak tag of the chunk's body, keyed with a server secret: send it back in If-None-Match, and an unchanged chunk is a 304 without the units of sending it",
    schema: { type: 'string', pattern: '^W/"[A-Za-z0-9_-]+"$' },
  },
  'Cache-Control': {
    description: '`private, no-cache`: a client may keep the chunk, but must ask (If-None-Match) before reusing it',
    schema: { type: 'string', const: 'private, no-cache' },
  },
  Vary: {
    description:
      'What the answer depends on besides the URL: `Accept-Encoding` for a chunk that may be compressed, `Origin` with CORS_ORIGINS set',
    schema: { type: 'string' },
  },
  'Content-Encoding': {
    description: '`br` or `gzip`, for a chunk of 1,400 bytes or more to a client whose Accept-Encoding takes it',
    schema: { type: 'string', enum: ['br', 'gzip'] },
  },
  'X-Request-Id': {
    description:
      "The request's id, to quote: the client's own X-Request-Id when it is 1 to 128 of `A-Z a-z 0-9 _ . : = + / -`, else a new UUID; problem bodies carry it as `requestId`",
    schema: { type: 'string', pattern: '^[\\w.:=+/-]{1,128}$' },
  },
  'Access-Control-Allow-Origin': {
    description: "CORS: `*`, or the page's origin when CORS_ORIGINS lists it (absent otherwise)",
    schema: { type: 'string' },
  },
  'Access-Control-Expose-Headers': {
    description: 'CORS: the headers a page may read: Link, the rate-limit headers, Retry-After, ETag and X-Request-Id',
    schema: { type: 'string' },
  },
  'WWW-Authenticate': {
    description: 'The challenge of a 401 (RFC 9110): `Bearer`, with the error when a key or token was sent',
    schema: { type: 'string', pattern: '^Bearer' },
  },
} as const satisfies Record<string, HeaderDoc>;

export type HeaderName = keyof typeof headerDocs;

/** What every answer carries: its request id (docs/reference/api.md, "Request ids"). */
export const EVERY_ANSWER_HEADERS = ['X-Request-Id'] as const;

/** What an answer carries to a page allowed to read it (docs/reference/api.md, "CORS"): sent or not by its Origin. */
export const CORS_HEADERS = ['Access-Control-Allow-Origin', 'Access-Control-Expose-Headers'] as const;

/** What a chunk carries for conditional requests (docs/reference/api.md, "Conditional requests"). */
export const CHUNK_HEADERS = ['ETag', 'Cache-Control'] as const;

/** What every answer under /v1 that the rate limiter decided carries (docs/reference/headers.md, "Rate-limit headers"). */
export const RATE_LIMIT_HEADERS = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit-Policy',
  'RateLimit',
] as const;

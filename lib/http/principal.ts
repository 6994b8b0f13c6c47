// Who a request's credentials name, as the access rules read it (docs/reference/api.md, "Access"): nobody, or an
// API key or a token, with the collections it may read and the claims that row rules compare.

export type Principal =
  | { readonly kind: 'anonymous' }
  | {
      readonly kind: 'key' | 'token';
      /** The collections it may read; undefined: every one. */
      readonly collections: readonly string[] | undefined;
      /** What row rules compare columns with: a key's claims, or a token's verified payload. */
      readonly claims: Readonly<Record<string, unknown>>;
    };

/** A client without credentials, or whose credentials were not asked about (no rate limiter). */
export const ANONYMOUS: Principal = Object.freeze({ kind: 'anonymous' });

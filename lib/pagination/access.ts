// Who reads a collection, and which of its rows (docs/reference/api.md, "Access"): a client's principal held
// against a collection's access, as the filters its row rules add to every statement of the request, or the
// 401 or 403 the request is refused with. The rules are predicates of the request's own statements, bound as
// parameters: no extra round trip, no transaction, no session setting.
import { createHash } from 'node:crypto';
import { ApiError } from '../http/errors.ts';
import type { Principal } from '../http/principal.ts';
import { remembered } from '../http/remembered.ts';
import { byFilterOrder, type Filter } from './filters.ts';
import type { Collection, RowRule } from './registry.ts';

/** The challenge of a 401 for want of credentials, as RFC 6750 (section 3) gives it to a request without any. */
const NO_CREDENTIALS = { 'www-authenticate': 'Bearer realm="api"' };

/** Whether only clients with credentials read the collection: anonymous reads are off, or it has row rules. */
export function needsCredentials(collection: Collection): boolean {
  return !collection.access.anonymous || collection.access.rows.length > 0;
}

/** The 401 of a request without credentials for a collection that needs them: priced 1, like a 400. */
export function credentialsNeeded(collection: Collection): ApiError {
  return new ApiError('unauthorized', `${collection.name} is read with an API key or a token: send Authorization: Bearer <key or token>`, {
    headers: NO_CREDENTIALS,
  });
}

/** The rows a client reads of a collection: the filters its row rules make, and what tells them apart. */
export interface RowScope {
  /** The row rules' filters, in canonical order (each marked with `rows`); none: every row. */
  readonly filters: readonly Filter[];
  /**
   * What the rows read depend on: the rules' values, for cursors, ETags and the kept readings; '' for a
   * collection without row rules, whose rows are the same for every client.
   */
  readonly key: string;
  /** A rule matches several values (an array claim): no index serves the order within one value (price.ts). */
  readonly scattered: boolean;
}

/** Every row: the scope of a collection without row rules. */
export const EVERY_ROW: RowScope = Object.freeze({ filters: [], key: '', scattered: false });

function insufficientScope(detail: string): ApiError {
  return new ApiError('insufficient_scope', detail);
}

/** The claim at `path` of `claims` (a dotted path reads nested objects), or undefined. */
export function claimAt(claims: Readonly<Record<string, unknown>>, path: readonly string[]): unknown {
  let value: unknown = claims;
  for (const part of path) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

const isScalar = (value: unknown): value is string | number =>
  typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));

/** The values a rule's claim names, normalised by its column's type; a 403 when the client has no usable claim. */
function claimValues(collection: Collection, rule: RowRule, claims: Readonly<Record<string, unknown>>): string[] {
  const path = rule.claim.join('.');
  const claim = claimAt(claims, rule.claim);
  const given = isScalar(claim) ? [claim] : Array.isArray(claim) && claim.length > 0 && claim.every(isScalar) ? claim : undefined;
  if (given === undefined) {
    throw insufficientScope(`${collection.name} is read only with the claim ${path}: a string, a number, or a list of them`);
  }
  try {
    return [...new Set(given.map((value) => rule.field.value.parse(path, String(value))))].sort();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    throw insufficientScope(`${collection.name} is read only with the claim ${path}, whose value cannot equal ${rule.field.name}'s`);
  }
}

/**
 * The rows of `collection` that `principal` reads, or the refusal: a 401 without credentials where they are
 * needed, a 403 `insufficient_scope` for a collection outside the credentials' collections or a row rule whose
 * claim they lack.
 */
export function rowScope(collection: Collection, principal: Principal): RowScope {
  if (principal.kind === 'anonymous') {
    if (needsCredentials(collection)) throw credentialsNeeded(collection);
    return EVERY_ROW;
  }
  if (principal.collections !== undefined && !principal.collections.includes(collection.name)) {
    throw insufficientScope(`This ${principal.kind === 'key' ? 'API key' : 'token'} may not read ${collection.name}`);
  }
  const { rows } = collection.access;
  if (rows.length === 0) return EVERY_ROW;
  const filters: Filter[] = [];
  let scattered = false;
  for (const rule of rows) {
    const values = claimValues(collection, rule, principal.claims);
    scattered ||= values.length > 1;
    filters.push({ field: rule.field.name, op: values.length > 1 ? 'in' : 'eq', values });
  }
  filters.sort(byFilterOrder);
  const key = JSON.stringify(filters.map((filter) => [filter.field, filter.values]));
  const digest = digestOf(key);
  return { filters: filters.map((filter) => ({ ...filter, rows: digest })), key, scattered };
}

/**
 * What cursors carry of a scope: a digest, so that a claim of many values does not lengthen every link; the
 * last 10,000 remembered, since a client asks again and again with the same claims.
 */
const digestOf = remembered(10_000, (key: string): string => createHash('sha256').update(key).digest('base64url').slice(0, 22));

/** Whether `principal` may read `collection` at all: what the index lists (docs/reference/api.md, "Collections"). */
export function mayRead(collection: Collection, principal: Principal): boolean {
  try {
    rowScope(collection, principal);
    return true;
  } catch (error) {
    if (error instanceof ApiError) return false;
    throw error;
  }
}

// Subjects spread over several limiter databases (LIMITER_DATABASE_URL): each subject is decided on one of
// them, chosen by rendezvous hashing, so its limit stays exact with no coordination between the databases
// (docs/how-to/limiter-databases.md, "Several limiter databases").
import { createHash, type Hash } from 'node:crypto';
import type { LimiterDatabase } from '../../db/client.ts';
import { housekeeper } from './housekeeping.ts';
import { type Decision, databaseLimiter, type Limiter } from './limiter.ts';

interface Shard {
  /** The database's hash state after its identity: a subject's score continues from a copy of it. */
  readonly seed: Hash;
  readonly limiter: Limiter;
}

/**
 * Which of `identities` (db/identity.ts) a routing key belongs to: rendezvous (highest random weight)
 * hashing. Each database scores the key by SHA-256 of its identity and the key, and the highest score wins.
 * The choice depends on the set of identities only, not on their order; a database added takes about
 * 1/n of the keys, from every other alike, and moves nothing else; one removed gives its keys to the others
 * and moves nothing else.
 */
export function shardOf(identities: readonly string[], routingKey: string): number {
  return pick(identities.map(seedOf), routingKey);
}

function seedOf(identity: string): Hash {
  return createHash('sha256').update(identity).update('\n');
}

function pick(seeds: readonly Hash[], routingKey: string): number {
  let best = 0;
  let bestScore = -1;
  for (let i = 0; i < seeds.length; i++) {
    // 48 bits of the digest: a JS number holds them exactly, and two equal scores are as good as never.
    const score = seeds[i]!.copy().update(routingKey).digest().readUIntBE(0, 6);
    if (score > bestScore) {
      best = i;
      bestScore = score;
    }
  }
  return best;
}

/**
 * What a request is routed by, known before its decision: the key's hash (SHA-256, from the Authorization
 * header), or the address subject (`ip:…`, `reg:…`) when there is no well-formed key. Not the key's id,
 * which only the decision finds.
 */
export function routingKeyOf(keyHash: Buffer | undefined, ipSubject: string): string {
  return keyHash !== undefined && keyHash.length > 0 ? keyHash.toString('hex') : ipSubject;
}

/**
 * The limiter over `databases`: with one, its limiter as it is. With several, a limiter per database, each
 * batching what is asked of it in one turn of the event loop into its own statements, and every decision
 * sent to the database its routing key belongs to; a lease is released where it was taken.
 *
 * A key that is unknown or revoked charges the request's address, and does so on the database of the key
 * it was sent with. Every database holds every key, so that one found it unknown too: the decision is made
 * again on the address's own database, which so counts every request of the address, and is the one
 * answered. The first decision's charge stays where it was made, on a row that answers nothing (the address
 * is decided on its own database only), until it expires: a second statement for an invalid key whose
 * database is not its address's, never a generous limit.
 */
export function shardedLimiter(
  databases: readonly LimiterDatabase[],
  leaseTtl: number,
  timeoutMs?: number,
  onStatement?: (decisions: number) => void,
): Limiter {
  const limiters = databases.map((database) => databaseLimiter(database.connection, leaseTtl, timeoutMs, onStatement));
  if (limiters.length === 1) return limiters[0]!;
  const shards: Shard[] = databases.map((database, i) => ({ seed: seedOf(database.identity), limiter: limiters[i]! }));
  const seeds = shards.map((shard) => shard.seed);
  /** Where each lease in flight was taken. */
  const taken = new WeakMap<object, Limiter>();
  const remember = (limiter: Limiter, decision: Decision): Decision => {
    if (decision.lease) taken.set(decision.lease, limiter);
    return decision;
  };
  return {
    async decide(input, signal) {
      const first = shards[pick(seeds, routingKeyOf(input.keyHash, input.ipSubject))]!.limiter;
      const decision = await first.decide(input, signal);
      if (input.keyHash === undefined || input.keyHash.length === 0 || decision.keyId !== undefined) return remember(first, decision);
      const home = shards[pick(seeds, input.ipSubject)]!.limiter;
      if (home === first) return remember(first, decision);
      // An address charged for an invalid key takes no lease; should one have been taken, it goes back.
      if (decision.lease) first.release(decision.subject, decision.lease).catch(() => {});
      return remember(home, await home.decide(input, signal));
    },
    release(subject, lease, refund) {
      const limiter = taken.get(lease) ?? shards[0]!.limiter;
      taken.delete(lease);
      return limiter.release(subject, lease, refund);
    },
  };
}

/** Housekeeping on every limiter database, each offered by this instance every `intervalMs` (0: never). */
export function housekeepers(databases: readonly LimiterDatabase[], intervalMs: number, clockOffset: () => number): () => void {
  const offers = databases.map((database) => housekeeper(database.sql, intervalMs, clockOffset));
  return function offer() {
    for (const each of offers) each();
  };
}

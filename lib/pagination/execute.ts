// A collection request's statements: its variant serves its plan, bounded by the request's budget of PostgreSQL time.
import type { Database, StatementBudget } from '../../db/client.ts';
import { withTimeout } from '../http/deadline.ts';
import type { Chunk } from './chunk.ts';
import { linkBuilder } from './links.ts';
import type { PreparedRead } from './prepare.ts';

export interface ExecuteDeps {
  /** Where collection queries run: the read replica when there is one. */
  readonly database: Database;
  readonly cursorSecret: string;
}

/**
 * The chunk of a prepared request, its links starting at `collectionUrl`. The server cancels a query past its
 * statement timeout; the deadline also bounds the wait for a pool connection and a connection that stopped
 * answering: a 503. `budget`: the admitted request's (docs/explanation/budgets.md, "Statement budgets"), which times
 * and bounds its statements; none without the rate limiter.
 */
export function execute(prepared: PreparedRead, deps: ExecuteDeps, collectionUrl: string, budget?: StatementBudget): Promise<Chunk> {
  const { variant, request, plan } = prepared.read;
  const { database, cursorSecret } = deps;
  const href = linkBuilder(collectionUrl, request.params);
  const chunk = variant.serve({ ...request, cursorSecret, database, budget, collectionUrl, href }, plan);
  return withTimeout(chunk, database.queryDeadlineMs);
}

// Replaces every row of a live table without blocking its readers: a copy is loaded beside it, then swapped in.
import type { ReservedSql, Sql } from 'postgres';

// Seed of the advisory lock key (with the table's name) that makes a second replacement of the same
// table wait for the first.
const SWAP_LOCK = 7_204_119_003;

// How long one attempt to take the swap's lock may wait, and for how long attempts go on. Readers that
// arrive while the lock is asked for queue behind it, so each attempt must be short.
const LOCK_ATTEMPT = '100ms';
const LOCK_GIVE_UP_MS = 10_000;

interface LiveTable {
  readonly schema: string;
  readonly name: string;
  readonly owner: string;
  readonly reloptions: string[] | null;
}

interface Grant {
  readonly grantee: string | null;
  readonly privilege: string;
  readonly grantable: boolean;
}

/**
 * Replaces the rows of `table` with what `load` writes into the copy it is given (a table name, quoted).
 * Readers of the live table are never blocked by the load, only by the swap at the end, which takes
 * milliseconds. The copy is made in a staging schema of its own, under the live table's own names (its
 * indexes, constraints and identity sequence too), so that moving it into the live table's schema leaves
 * exactly what the migrations created: same names, same definitions, same owner and grants, and an
 * identity sequence that goes on from the copy's last row. A failure leaves the live table as it was.
 *
 * Two transactions: the load commits before the swap begins, so the swap's commit, made while it holds
 * the live table's lock, waits for the WAL flush of a few catalog rows only, never for the tail of the
 * load's WAL (a commit waits for its flush before it releases its locks).
 */
export async function replaceTable(sql: Sql, table: string, load: (sql: Sql, copy: string) => Promise<void>): Promise<void> {
  // One connection throughout: the session's advisory lock makes a second replacement of the same table
  // (which would use the same staging schema) wait for this one.
  const connection = await sql.reserve();
  try {
    const [live] = await connection<LiveTable[]>`
      select n.nspname as schema, c.relname as name, pg_get_userbyid(c.relowner) as owner, c.reloptions
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.oid = ${table}::regclass`;
    if (!live) throw new Error(`Cannot replace ${table}: no such table`);
    const lock = `${live.schema}.${live.name}`;
    await connection`select pg_advisory_lock(hashtextextended(${lock}, ${SWAP_LOCK}))`;
    const staging = quote(`seed_staging_${live.name}`);
    try {
      await inTransaction(connection, () => loadCopy(connection, table, live, staging, load));
      await inTransaction(connection, () => swap(connection, live, staging));
    } finally {
      // Left only when the swap failed; the live table is untouched then.
      await connection.unsafe(`drop schema if exists ${staging} cascade`).catch(() => {});
      await connection`select pg_advisory_unlock(hashtextextended(${lock}, ${SWAP_LOCK}))`.catch(() => {});
    }
  } finally {
    connection.release();
  }
}

async function inTransaction(connection: ReservedSql, body: () => Promise<void>): Promise<void> {
  await connection`begin`;
  try {
    await body();
    await connection`commit`;
  } catch (error) {
    await connection`rollback`.catch(() => {});
    throw error;
  }
}

async function loadCopy(
  tx: ReservedSql,
  table: string,
  live: LiveTable,
  staging: string,
  load: (sql: Sql, copy: string) => Promise<void>,
): Promise<void> {
  await refuseWhatASwapWouldLose(tx, table);
  const copy = `${staging}.${quote(live.name)}`;
  // A staging schema left by a process that died between the two transactions holds nothing of value.
  await tx.unsafe(`drop schema if exists ${staging} cascade`);
  await tx.unsafe(`create schema ${staging}`);
  // Columns, defaults, identity (a new sequence, with the same options), check constraints, storage,
  // comments; the indexes come after the load, which is several times faster than keeping them up.
  await tx.unsafe(`create table ${copy} (like ${quote(live.schema)}.${quote(live.name)} including all excluding indexes)`);
  if (live.reloptions?.length) await tx.unsafe(`alter table ${copy} set (${live.reloptions.join(', ')})`);

  await load(tx, copy);

  await tx`set local maintenance_work_mem = '256MB'`;
  for (const { name, definition } of await indexConstraints(tx, table)) {
    await tx.unsafe(`alter table ${copy} add constraint ${quote(name)} ${definition}`);
  }
  for (const { name, definition } of await plainIndexes(tx, table)) {
    // pg_get_indexdef: CREATE [UNIQUE] INDEX name ON [ONLY] schema.table USING method (...) [...]
    const unique = definition.startsWith('CREATE UNIQUE ') ? 'unique ' : '';
    await tx.unsafe(`create ${unique}index ${quote(name)} on ${copy}${definition.slice(definition.indexOf(' USING '))}`);
  }
  for (const { name, definition } of await foreignKeys(tx, table)) {
    await tx.unsafe(`alter table ${copy} add constraint ${quote(name)} ${definition}`);
  }
  await tx.unsafe(`analyze ${copy}`);
  await copyGrants(tx, table, copy, live.owner);
}

/** Drops the live table and moves the copy, with its indexes, constraints and sequence, in its place. */
async function swap(tx: ReservedSql, live: LiveTable, staging: string): Promise<void> {
  const liveName = `${quote(live.schema)}.${quote(live.name)}`;
  await lockForSwap(tx, liveName);
  await refuseWhatASwapWouldLose(tx, liveName);
  await tx.unsafe(`drop table ${liveName}`);
  await tx.unsafe(`alter table ${staging}.${quote(live.name)} set schema ${quote(live.schema)}`);
  await tx.unsafe(`drop schema ${staging}`);
}

/** Triggers, row security policies and other tables' foreign keys would not survive a swap: refuse. */
async function refuseWhatASwapWouldLose(tx: Sql, table: string): Promise<void> {
  const [found] = await tx`
    select
      (select count(*) from pg_trigger where tgrelid = ${table}::regclass and not tgisinternal)::int as triggers,
      (select count(*) from pg_policy where polrelid = ${table}::regclass)::int as policies,
      (select count(*) from pg_constraint where confrelid = ${table}::regclass and conrelid <> confrelid)::int as references`;
  const lost = Object.entries(found ?? {}).filter(([, count]) => count > 0);
  if (lost.length > 0) {
    throw new Error(`Cannot replace ${table}: it has ${lost.map(([what, count]) => `${count} ${what}`).join(', ')} that a swap would lose`);
  }
}

/** An SQL identifier, quoted. */
function quote(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

interface Definition {
  readonly name: string;
  readonly definition: string;
}

/** Primary key, unique and exclusion constraints, as ALTER TABLE … ADD CONSTRAINT text. */
function indexConstraints(tx: Sql, table: string): Promise<Definition[]> {
  return tx<Definition[]>`
    select conname as name, pg_get_constraintdef(oid) as definition
    from pg_constraint where conrelid = ${table}::regclass and contype in ('p', 'u', 'x')
    order by contype, conname`;
}

function foreignKeys(tx: Sql, table: string): Promise<Definition[]> {
  return tx<Definition[]>`
    select conname as name, pg_get_constraintdef(oid) as definition
    from pg_constraint where conrelid = ${table}::regclass and contype = 'f' order by conname`;
}

/** The indexes that back no constraint, as CREATE INDEX statements. */
function plainIndexes(tx: Sql, table: string): Promise<Definition[]> {
  return tx<Definition[]>`
    select c.relname as name, pg_get_indexdef(i.indexrelid) as definition
    from pg_index i join pg_class c on c.oid = i.indexrelid
    where i.indrelid = ${table}::regclass
      and not exists (select 1 from pg_constraint k where k.conindid = i.indexrelid and k.conrelid = i.indrelid)
    order by c.relname`;
}

/** The live table's owner and grants, on the copy (CREATE TABLE … LIKE copies neither). */
async function copyGrants(tx: Sql, table: string, copy: string, owner: string): Promise<void> {
  const [me] = await tx<{ name: string }[]>`select current_user as name`;
  if (me?.name !== owner) await tx.unsafe(`alter table ${copy} owner to ${quote(owner)}`);
  const grants = await tx<Grant[]>`
    select case when a.grantee = 0 then null else pg_get_userbyid(a.grantee) end as grantee,
      a.privilege_type as privilege, a.is_grantable as grantable
    from pg_class c, aclexplode(c.relacl) a
    where c.oid = ${table}::regclass and a.grantee <> c.relowner
    order by a.grantee, a.privilege_type`;
  for (const grant of grants) {
    const to = grant.grantee === null ? 'public' : quote(grant.grantee);
    await tx.unsafe(`grant ${grant.privilege} on ${copy} to ${to}${grant.grantable ? ' with grant option' : ''}`);
  }
}

/**
 * The ACCESS EXCLUSIVE lock the swap needs, asked for in short attempts: while one waits (for a long
 * query on the table to end), readers that arrive queue behind it, so no attempt waits long.
 */
async function lockForSwap(tx: Sql, liveName: string): Promise<void> {
  const giveUp = performance.now() + LOCK_GIVE_UP_MS;
  for (;;) {
    await tx`savepoint swap_lock`;
    try {
      await tx.unsafe(`set local lock_timeout = '${LOCK_ATTEMPT}'`);
      await tx.unsafe(`lock table ${liveName} in access exclusive mode`);
      await tx`release savepoint swap_lock`;
      await tx.unsafe('set local lock_timeout to default');
      return;
    } catch (error) {
      await tx`rollback to savepoint swap_lock`;
      const lockNotAvailable = (error as { code?: string }).code === '55P03';
      if (!lockNotAvailable || performance.now() > giveUp) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

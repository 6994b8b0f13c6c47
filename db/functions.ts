// The SQL functions step: each file of db/functions holds one function's current definition, applied after
// the versioned migrations whenever its content changed (docs/reference/database.md, "Migrations").
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from 'postgres';
import { SERVICE_SCHEMA } from './service-schema.ts';

/** The service's function files: every `.sql` of db/functions, by name. */
const functionsFolder = fileURLToPath(new URL('./functions', import.meta.url));

/** A function file: its name (the file's, without `.sql`) and its SQL, a `CREATE OR REPLACE FUNCTION`. */
export interface FunctionFile {
  readonly name: string;
  readonly sql: string;
}

/** The `.sql` files of `folder`, in name order. */
export function readFunctionFiles(folder: string = functionsFolder): FunctionFile[] {
  return readdirSync(folder)
    .filter((file) => file.endsWith('.sql'))
    .sort()
    .map((file) => ({ name: path.basename(file, '.sql'), sql: readFileSync(path.join(folder, file), 'utf8') }));
}

/**
 * Applies the files whose content differs from the one last applied to this database, all in one transaction
 * (every one or none), and records their checksums in schema_functions of the service's schema, next to
 * drizzle's own journal. Returns the names applied. `lock` is an advisory lock key taken for the transaction, so that
 * two callers never apply at once; the migrations' own key is fine (its holder takes it again at no cost).
 */
export async function applyFunctions(sql: Sql, files: readonly FunctionFile[], lock: number): Promise<string[]> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${lock})`;
    const schema = tx(SERVICE_SCHEMA);
    await tx`create schema if not exists ${schema}`;
    await tx`create table if not exists ${schema}.schema_functions (
      name text primary key, checksum text not null, applied_at timestamptz not null default now())`;
    const rows = await tx<{ name: string; checksum: string }[]>`select name, checksum from ${schema}.schema_functions`;
    const applied = new Map(rows.map((row) => [row.name, row.checksum]));
    const changed: string[] = [];
    for (const file of files) {
      const checksum = createHash('sha256').update(file.sql).digest('hex');
      if (applied.get(file.name) === checksum) continue;
      // The simple query protocol: a file may hold several statements (a function and its comment).
      await tx.unsafe(file.sql);
      await tx`insert into ${schema}.schema_functions (name, checksum) values (${file.name}, ${checksum})
        on conflict (name) do update set checksum = excluded.checksum, applied_at = excluded.applied_at`;
      changed.push(file.name);
    }
    return changed;
  });
}

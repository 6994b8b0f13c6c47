// The database's schemas by name: what a tool checks the schemas it is asked to read against.
import type { Sql } from 'postgres';

/** Every schema of the database (pg_namespace, PostgreSQL's own included), by name. */
export async function schemaNames(sql: Sql): Promise<string[]> {
  const rows = await sql<{ name: string }[]>`select nspname as name from pg_namespace order by nspname`;
  return rows.map((row) => row.name);
}

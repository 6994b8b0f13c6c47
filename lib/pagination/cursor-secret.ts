// The cursor secret: CURSOR_SECRET, or one generated once and kept in the database for all instances.
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { Drizzle } from '../../db/client.ts';
import { settings } from '../../db/schema.ts';

/**
 * CURSOR_SECRET when set; else the database's, made by the first instance to start: `inherited` (an earlier
 * release's, kept elsewhere: lib/service/startup.ts) when it has one, else a random one.
 */
export async function loadCursorSecret(
  drizzle: Drizzle,
  configured: string | undefined,
  inherited: () => Promise<string | undefined> = async () => undefined,
): Promise<string> {
  if (configured) return configured;
  const stored = async () => (await drizzle.select({ value: settings.value }).from(settings).where(eq(settings.name, 'cursor_secret')))[0];
  let row = await stored();
  if (row === undefined) {
    const value = (await inherited()) ?? randomBytes(32).toString('base64url');
    // Whichever instance inserts first wins; every other one reads the same value.
    await drizzle.insert(settings).values({ name: 'cursor_secret', value }).onConflictDoNothing();
    row = await stored();
  }
  if (!row) throw new Error('The cursor secret could not be stored');
  return row.value;
}

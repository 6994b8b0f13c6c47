// The cursor secret: CURSOR_SECRET, or one generated once and kept in the database for all instances.
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { Drizzle } from '../../db/client.ts';
import { settings } from '../../db/schema.ts';

export async function loadCursorSecret(drizzle: Drizzle, configured: string | undefined): Promise<string> {
  if (configured) return configured;
  // Whichever instance inserts first wins; every other one reads the same value.
  await drizzle
    .insert(settings)
    .values({ name: 'cursor_secret', value: randomBytes(32).toString('base64url') })
    .onConflictDoNothing();
  const [row] = await drizzle.select({ value: settings.value }).from(settings).where(eq(settings.name, 'cursor_secret'));
  if (!row) throw new Error('The cursor secret could not be stored');
  return row.value;
}

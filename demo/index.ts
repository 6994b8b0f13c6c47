// The demo as the entries hand it to start-up (lib/service/startup.ts, Demo): its tables made in schema demo (or
// moved there from an earlier release's public), seeded where empty, and its collections file, served as any team's is. Served where
// COLLECTIONS=demo, and on the embedded default; nothing in lib/ imports it.
import postgres from 'postgres';
import { DEMO_FILE } from './collections.ts';
import { migrateDemo } from './migrate.ts';
import { defaultSizes, seedIfEmpty } from './seed.ts';

export const demo = {
  async prepare(url: string, log: (line: string) => void): Promise<void> {
    await migrateDemo(url);
    const seeded = await seedIfEmpty(url, defaultSizes, (sessionUrl) => postgres(sessionUrl, { max: 1, onnotice: () => {} }));
    if (seeded.length > 0) log(`Seeded demo data: ${seeded.join(', ')}`);
  },
  file: DEMO_FILE,
};

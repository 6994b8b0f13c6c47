// Keyset tests: the test app with an allowance the walks cannot use up (the rate limit is tested elsewhere).
import { testApp, type TestApp } from './app.ts';
import type { SeedSizes } from '../../db/seed.ts';

/** testApp, then every tier made large enough for thousands of requests; harmless without the limiter. */
export async function keysetApp(t: Parameters<typeof testApp>[0], options: { seed?: SeedSizes; env?: Record<string, string> } = {}): Promise<TestApp> {
  const app = await testApp(t, options);
  await app.db.sql`do $$ begin
    if to_regclass('rate_tiers') is not null then
      update rate_tiers set allowance = 1000000000, concurrency = 1000;
    end if;
  end $$`;
  return app;
}

/** A path of the test app from an absolute href of its links. */
export function pathOf(href: string): string {
  return href.replace(/^http:\/\/test\.local/, '');
}

// drizzle-kit configuration of the demo: its migrations are generated from demo/schema.ts into demo/migrations
// (`npm run db:generate:demo`), apart from the service's own (drizzle.config.ts).
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './demo/schema.ts',
  out: './demo/migrations',
});

// The baseline: a Hono hello-world on @hono/node-server, the ceiling any route of the service can reach.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const app = new Hono();
app.get('/', (c) => c.text('Hello Hono!'));

serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 4300), hostname: '127.0.0.1' });
// Nothing to drain or close: stop at once.
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));

// The HTTP application: routes, 404/405, and the one error handler. Built per database and config.
import { type Context, Hono } from 'hono';
import type { Sql } from 'postgres';
import type { Database } from '../../db/client.ts';
import { docsRoutes } from '../openapi/docs-page.ts';
import { openApiDocument } from '../openapi/document.ts';
import { estimateItems } from '../pagination/count.ts';
import { type Links, linkHeader, linksObject, SERVICE_LINKS } from '../pagination/links.ts';
import type { Registry } from '../pagination/registry.ts';
import { serveCollection } from '../pagination/serve.ts';
import { adminRoutes } from '../ratelimit/admin.ts';
import { keyStore } from '../ratelimit/key-store.ts';
import { issueKeyHandler } from '../ratelimit/keys.ts';
import { type LimiterOptions, rateLimiter } from '../ratelimit/middleware.ts';
import { requireAdminToken } from './bearer.ts';
import { limitBody } from './body.ts';
import { compression } from './compression.ts';
import { conditionalRequests } from './conditional.ts';
import type { Config } from './config.ts';
import { corsPolicy } from './cors.ts';
import { answeredInTime, withTimeout } from './deadline.ts';
import { ApiError, methodNotAllowed, onError } from './errors.ts';
import { baseUrl, socketAddress } from './forwarding.ts';
import { createLogger, type Logger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { observe } from './observe.ts';
import { type Refused, refusals } from './refused.ts';
import { requestIds } from './request-id.ts';
import { responseHeaders, takeResponseHeaders } from './response-headers.ts';

export interface AppDeps {
  readonly database: Database;
  readonly config: Config;
  readonly registry: Registry;
  readonly cursorSecret: string;
  /** One line per request, and errors (default: errors only, on stderr). */
  readonly logger?: Logger;
  /** Where errors go instead of the logger (tests collect them); `c` is absent outside a request. */
  readonly log?: (error: unknown, c?: Context) => void;
  /** True once a stop signal came: /readyz fails so that balancers stop sending (lib/http/shutdown.ts). */
  readonly draining?: () => boolean;
  /**
   * The rate limiter in front of /v1 and its options; absent or false: no limiter (pagination tests,
   * the bench's baseline). server.ts always turns it on.
   */
  readonly rateLimit?: LimiterOptions | false;
  /**
   * The socket's peer address, for the rate limit and for trusting forwarded headers: @hono/node-server's
   * connection info by default; the Deno and Bun entries pass their runtime's.
   */
  readonly remoteAddress?: (c: Context) => string | undefined;
}

/**
 * The app, and where the entries record the requests they answer before it (a bad Host, what Node's parser
 * refuses): with this app's logger and metrics (lib/http/refused.ts).
 */
export type App = Hono & { readonly refused: Refused };

export function buildApp(deps: AppDeps): App {
  const { database, config, registry } = deps;
  const app = new Hono();
  const logger = deps.logger ?? createLogger({ level: 'error', destination: 2 });
  // An error of a request is logged once, on the request's own line (lib/http/observe.ts).
  const log =
    deps.log ?? ((error: unknown, c?: Context) => (c === undefined ? logger.error({ err: error }, 'Error') : c.set('error', error)));
  const draining = deps.draining ?? (() => false);
  // Counted only where they can be read: /metrics is served only with an admin token.
  const pools: Record<string, Sql> = { primary: database.sql };
  if (database.reads !== database) pools.replica = database.reads.sql;
  const metrics = config.adminToken === undefined ? undefined : createMetrics(pools);
  const peer = deps.remoteAddress ?? socketAddress;
  // Collection queries run on the read replica when there is one (DATABASE_READ_URL).
  const collectionDeps = { ...deps, database: database.reads };

  // Outermost, so that it sees every answer as it leaves, the error handler's included.
  app.use(observe({ logger, metrics, draining }));
  // First of all: the headers every answer carries are written once (lib/http/response-headers.ts); every
  // answer carries its request id, and CORS preflights are answered here, before the rate limiter, so that
  // they touch no database and cost nothing.
  app.use(responseHeaders());
  app.use(requestIds());
  app.use(corsPolicy(config.corsOrigins));

  // The description of the service and its docs page: outside /v1, so never rate-limited, and made once here.
  const description = JSON.stringify(openApiDocument(registry, { serverUrl: config.publicUrl }));
  app.get('/openapi.json', (c) => c.body(description, 200, { 'content-type': 'application/json; charset=utf-8' }));
  app.route('/docs', docsRoutes(config.publicUrl));
  // Not a bare 404: where to start (like PostgREST's root), in the body and as RFC 8631 links.
  app.get('/', (c) => {
    const base = baseUrl(c.req.raw, config, socketAddress(c));
    const links: Links = { self: `${base}/`, api: `${base}/v1`, 'service-doc': `${base}/docs`, 'service-desc': `${base}/openapi.json` };
    c.header('link', linkHeader(links));
    return c.json({ _links: linksObject(links) });
  });

  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  // Ready when the database answers, asked on the limiter's own connection: it never queues behind the
  // client queries that fill the pool (a busy pool is not a failed instance), and it is the connection
  // every /v1 request needs first. A probe still unanswered at the connection's deadline renews it. With
  // several limiter databases, ready while any of them answers: one away fails its subjects at every
  // instance alike, and draining every instance would fail all the others too (docs/operations.md,
  // "Several limiter databases").
  app.get('/readyz', async (c) => {
    if (draining()) throw new ApiError('unavailable', 'The instance is shutting down');
    const probes = database.limiters.map(({ connection }) => {
      const sql = connection.sql;
      return withTimeout(answeredInTime(connection, sql, sql`select 1`), 2500);
    });
    await (probes.length === 1 ? probes[0] : Promise.any(probes).catch((error: AggregateError) => Promise.reject(error.errors[0])));
    return c.json({ status: 'ready' });
  });

  // Keys and tiers live where the limiter decides: the data database, or the limiter databases.
  const keys = keyStore(database.limiters);

  // Everything under /v1 is rate-limited, errors included (docs/rate-limit.md, "What is limited"): the limiter comes first.
  if (deps.rateLimit) {
    const limiter = rateLimiter(
      {
        limiters: database.limiters,
        config,
        registry,
        cursorSecret: deps.cursorSecret,
        estimate: (read) => estimateItems(database.reads, read.request.collection, read.request.filters),
        log,
        metrics,
      },
      { remoteAddress: peer, ...deps.rateLimit },
    );
    app.use('/v1/*', limiter); // Hono's "/v1/*" also matches "/v1" itself
  }
  // Inside the limiter, which so sees a 304 and gives its units back; compression outside the conditional
  // check, which spares it a body a 304 drops.
  app.use('/v1/*', compression());
  app.use('/v1/*', conditionalRequests());
  // POST /v1/keys issues a key. It shares the collections' route, `/v1/:collection`, rather than having one of
  // its own: a fixed path beside a parameter at the same place is what Hono's RegExpRouter refuses, and it
  // would leave every request to the slower TrieRouter (docs/benchmarks.md).
  const KEYS = 'keys';
  /** What a path under /v1 allows: POST for the keys, GET and HEAD for a collection. */
  const allowed = (c: Context) => (c.req.param('collection') === KEYS ? 'POST' : 'GET, HEAD');
  app.post(
    '/v1/:collection',
    async (c, next) => {
      if (c.req.param('collection') !== KEYS) methodNotAllowed(allowed(c))();
      await next();
    },
    limitBody(),
    issueKeyHandler(keys),
  );
  if (config.adminToken) app.route('/admin', adminRoutes(keys, config.adminToken));
  if (metrics !== undefined && config.adminToken) {
    const { registry } = metrics;
    app.get('/metrics', requireAdminToken(config.adminToken, '/metrics'), async (c) =>
      c.body(await registry.metrics(), 200, { 'content-type': registry.contentType }),
    );
    app.all('/metrics', methodNotAllowed('GET, HEAD'));
  }

  function index(c: Context): Response {
    const base = `${baseUrl(c.req.raw, config, peer(c))}/v1`;
    const links: Links = { self: base };
    for (const name of registry.keys()) links[name] = `${base}/${name}`;
    c.header('link', `${linkHeader(links)}, ${SERVICE_LINKS}`);
    return c.json({ _links: linksObject(links) });
  }
  app.get('/v1', index);
  app.get('/v1/', index); // a trailing slash is the same index; the limiter charges it the same single unit

  app.get('/v1/:collection', async (c) => {
    if (c.req.param('collection') === KEYS) methodNotAllowed(allowed(c))();
    const collection = registry.get(c.req.param('collection'));
    if (!collection) throw new ApiError('not_found', `No collection named ${c.req.param('collection')}`);
    // The query as the rate limiter read it for its cost, if it did (lib/pagination/serve.ts, `readQuery`), and
    // the headers every answer carries, written into the chunk's response as it is made, then taken; an error's
    // answer gets them as it leaves (lib/http/response-headers.ts).
    const response = await serveCollection(c.req.raw, collection, collectionDeps, {
      peer: peer(c),
      read: c.get('readQuery'),
      headers: c.get('responseHeaders'),
      counted: (rows) => c.set('counted', rows),
    });
    takeResponseHeaders(c);
    return response;
  });

  app.all('/', methodNotAllowed('GET, HEAD'));
  app.all('/openapi.json', methodNotAllowed('GET, HEAD'));
  app.all('/docs', methodNotAllowed('GET, HEAD'));
  app.all('/docs/:asset', methodNotAllowed('GET, HEAD'));
  app.all('/healthz', methodNotAllowed('GET, HEAD'));
  app.all('/readyz', methodNotAllowed('GET, HEAD'));
  app.all('/v1', methodNotAllowed('GET, HEAD'));
  app.all('/v1/', methodNotAllowed('GET, HEAD'));
  app.all('/v1/:collection', (c) => methodNotAllowed(allowed(c))());

  app.notFound(() => {
    throw new ApiError('not_found', 'No such path');
  });
  app.onError(onError(log));
  return Object.assign(app, { refused: refusals(logger, metrics) });
}

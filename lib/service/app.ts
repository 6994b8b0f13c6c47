// The HTTP application: routes, 404/405, and the one error handler. Built per database and config.
import { type Context, Hono } from 'hono';
import type { Sql } from 'postgres';
import type { Database } from '../../db/client.ts';
import { requireAdminToken } from '../http/bearer.ts';
import { limitBody } from '../http/body.ts';
import { Compressor } from '../http/compression.ts';
import { corsPolicy } from '../http/cors.ts';
import { answeredInTime, withTimeout } from '../http/deadline.ts';
import { ApiError, methodNotAllowed, onError } from '../http/errors.ts';
import { exchanges } from '../http/exchange.ts';
import { baseUrl, socketAddress } from '../http/forwarding.ts';
import { createLogger, type Logger } from '../http/logger.ts';
import { createMetrics } from '../http/metrics.ts';
import { type Refused, refusals } from '../http/refused.ts';
import { collectionPath, KEYS, ROUTES } from '../http/routes.ts';
import { docsRoutes } from '../openapi/docs-page.ts';
import { openApiDocument } from '../openapi/document.ts';
import { mayRead } from '../pagination/access.ts';
import { type Links, linkHeader, linksObject, SERVICE_LINKS } from '../pagination/links.ts';
import type { Registry } from '../pagination/registry.ts';
import { adminRoutes } from '../ratelimit/admin.ts';
import { Gate, type LimiterOptions } from '../ratelimit/gate.ts';
import { keyStore } from '../ratelimit/key-store.ts';
import { issueKeyHandler } from '../ratelimit/keys.ts';
import { tokenVerifier } from '../ratelimit/tokens.ts';
import { collectionRequests } from './collection-request.ts';
import type { Config } from './config.ts';
import { limitedRoutes } from './limited-routes.ts';
import { fixedCollections, type Generation, type ServedCollections } from './served-collections.ts';

export interface AppDeps {
  readonly database: Database;
  readonly config: Config;
  /**
   * What is served: a registry, for the app's whole life (tests, the bench), or the collections of a file read live
   * (lib/service/served-collections.ts), whose generation each request reads once at its start.
   */
  readonly registry: Registry | ServedCollections;
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

/** What an app makes of a generation once, when the first request meets it: the description, and every name of the file. */
interface Described {
  readonly generation: Generation;
  readonly description: string;
  /** The collections served and those unavailable: the names a key's collections may list (lib/ratelimit/admin.ts). */
  readonly names: ReadonlySet<string>;
}

export function buildApp(deps: AppDeps): App {
  const { database, config } = deps;
  const collections = deps.registry instanceof Map ? fixedCollections(deps.registry) : (deps.registry as ServedCollections);
  let described: Described | undefined;
  const describedOf = (generation: Generation): Described => {
    if (described?.generation !== generation) {
      const description = JSON.stringify(openApiDocument(generation.registry, { serverUrl: config.publicUrl }));
      described = { generation, description, names: new Set([...generation.registry.keys(), ...generation.unavailable.keys()]) };
    }
    return described;
  };
  // The first generation's, made now: start-up is where a description that cannot be made shows.
  describedOf(collections.current());
  const app = new Hono();
  const logger = deps.logger ?? createLogger({ level: 'error', destination: 2 });
  // An error of a request is logged once, on the request's own line (lib/http/exchange.ts).
  const log =
    deps.log ??
    ((error: unknown, c?: Context) => {
      const exchange = c?.get('exchange');
      if (exchange === undefined) logger.error({ err: error }, 'Error');
      else exchange.error = error;
    });
  const draining = deps.draining ?? (() => false);
  // Counted only where they can be read: /metrics is served only with an admin token.
  const pools: Record<string, Sql> = { primary: database.sql };
  if (database.reads !== database) pools.replica = database.reads.sql;
  const metrics =
    config.adminToken === undefined
      ? undefined
      : createMetrics(
          pools,
          () => {
            const { number, hash, unavailable } = collections.current();
            return { generation: number, hash, unavailable: unavailable.keys(), reloads: collections.reloads };
          },
          () => database.servers(),
        );
  const remoteAddress = deps.remoteAddress ?? socketAddress;
  /** The socket's peer, worked out once per request (lib/http/exchange.ts), on every runtime. */
  const peerOf = (c: Context) => c.get('exchange').peer;

  // Outermost, so that it sees every answer as it leaves, the error handler's included: the request's id, peer
  // and CORS headers, its CORS preflight (before the rate limiter, so it touches no database and costs
  // nothing), its log line and metrics.
  app.use(exchanges({ logger, metrics, draining, remoteAddress, cors: corsPolicy(config.corsOrigins) }));

  // The description of the service and its docs page: outside /v1, so never rate-limited; made once per generation.
  app.get(ROUTES.description, (c) =>
    c.body(describedOf(collections.current()).description, 200, { 'content-type': 'application/json; charset=utf-8' }),
  );
  app.route(ROUTES.docs, docsRoutes(config.publicUrl));
  // Not a bare 404: where to start (like PostgREST's root), in the body and as RFC 8631 links.
  app.get(ROUTES.root, (c) => {
    const base = baseUrl(c.req.raw, config, peerOf(c));
    const links: Links = {
      self: `${base}${ROUTES.root}`,
      api: `${base}${ROUTES.index}`,
      'service-doc': `${base}${ROUTES.docs}`,
      'service-desc': `${base}${ROUTES.description}`,
    };
    c.header('link', linkHeader(links));
    return c.json({ _links: linksObject(links) });
  });

  app.get(ROUTES.health, (c) => c.json({ status: 'ok' }));
  // Ready when the database answers, asked on the limiter's own connection: it never queues behind the
  // client queries that fill the pool (a busy pool is not a failed instance), and it is the connection
  // every /v1 request needs first. A probe still unanswered at the connection's deadline renews it. With
  // several limiter databases, ready while any of them answers: one away fails its subjects at every
  // instance alike, and draining every instance would fail all the others too (docs/how-to/limiter-databases.md,
  // "Several limiter databases").
  app.get(ROUTES.ready, async (c) => {
    if (draining()) throw new ApiError('unavailable', 'The instance is shutting down');
    const probes = database.limiters.map(({ connection }) => {
      const sql = connection.sql;
      return withTimeout(answeredInTime(connection, sql, sql`select 1`), 2500);
    });
    await (probes.length === 1 ? probes[0] : Promise.any(probes).catch((error: AggregateError) => Promise.reject(error.errors[0])));
    // Ready with collections unavailable: the others are served, and draining the instance would help none of them.
    const { number, hash, unavailable } = collections.current();
    return c.json({ status: 'ready', collections: { generation: number, hash, unavailable: [...unavailable.keys()] } });
  });

  // Keys and tiers live where the limiter decides: the data database, or the limiter databases.
  const keys = keyStore(database.limiters);

  // Everything under /v1 is rate-limited, errors included (docs/reference/limits.md, "What is limited"): a collection
  // request by its own stages (lib/service/collection-request.ts), everything else by the middleware in front.
  const gate = deps.rateLimit
    ? new Gate(
        {
          limiters: database.limiters,
          trustProxy: config.trustProxy,
          log,
          metrics,
          // Bearer tokens beside API keys, when JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL is set.
          tokens: config.tokens === undefined ? undefined : tokenVerifier(config.tokens),
        },
        deps.rateLimit,
      )
    : undefined;
  const collectionRequest = collectionRequests({
    collections,
    // Collection queries run on the read replica when there is one (DATABASE_READ_URL).
    reads: database.reads,
    config,
    cursorSecret: deps.cursorSecret,
    compressor: new Compressor(),
    gate,
    log,
  });
  // A collection request is admitted by its own stages: its route comes before the middleware that admits the
  // other paths under /v1, which it answers without reaching (Hono runs the handlers that match in the order
  // they were added), so that it runs no middleware but the outermost.
  app.get(ROUTES.collection, collectionRequest);
  if (gate !== undefined) app.use(`${ROUTES.index}/*`, limitedRoutes(gate)); // Hono's "/v1/*" also matches "/v1" itself
  // POST /v1/keys issues a key. It shares the collections' route, `/v1/:collection`, rather than having one of
  // its own: a fixed path beside a parameter at the same place is what Hono's RegExpRouter refuses, and it
  // would leave every request to the slower TrieRouter (docs/benchmarks.md).
  /** What a path under /v1 allows: POST for the keys, GET and HEAD for a collection. */
  const allowed = (c: Context) => (c.req.param('collection') === KEYS ? 'POST' : 'GET, HEAD');
  app.post(
    ROUTES.collection,
    async (c, next) => {
      if (c.req.param('collection') !== KEYS) methodNotAllowed(allowed(c))();
      await next();
    },
    limitBody(),
    issueKeyHandler(keys),
  );
  if (config.adminToken) {
    const collectionNames = () => describedOf(collections.current()).names;
    app.route(ROUTES.admin, adminRoutes(keys, config.adminToken, { collectionNames }));
  }
  if (metrics !== undefined && config.adminToken) {
    const { registry } = metrics;
    app.get(ROUTES.metrics, requireAdminToken(config.adminToken, ROUTES.metrics), async (c) =>
      c.body(await registry.metrics(), 200, { 'content-type': registry.contentType }),
    );
    app.all(ROUTES.metrics, methodNotAllowed('GET, HEAD'));
  }

  function index(c: Context): Response {
    const origin = baseUrl(c.req.raw, config, peerOf(c));
    const links: Links = { self: `${origin}${ROUTES.index}` };
    // Only what the client may read (its credentials were looked up by the rate limiter: without one, anonymous).
    const { principal } = c.get('exchange');
    for (const [name, collection] of collections.current().registry)
      if (mayRead(collection, principal)) links[name] = `${origin}${collectionPath(name)}`;
    c.header('link', `${linkHeader(links)}, ${SERVICE_LINKS}`);
    return c.json({ _links: linksObject(links) });
  }
  app.get(ROUTES.index, index);
  app.get(`${ROUTES.index}/`, index); // a trailing slash is the same index; the limiter charges it the same single unit

  app.all(ROUTES.root, methodNotAllowed('GET, HEAD'));
  app.all(ROUTES.description, methodNotAllowed('GET, HEAD'));
  app.all(ROUTES.docs, methodNotAllowed('GET, HEAD'));
  app.all(`${ROUTES.docs}/:asset`, methodNotAllowed('GET, HEAD'));
  app.all(ROUTES.health, methodNotAllowed('GET, HEAD'));
  app.all(ROUTES.ready, methodNotAllowed('GET, HEAD'));
  app.all(ROUTES.index, methodNotAllowed('GET, HEAD'));
  app.all(`${ROUTES.index}/`, methodNotAllowed('GET, HEAD'));
  app.all(ROUTES.collection, (c) => methodNotAllowed(allowed(c))());

  // Answered, not thrown: Hono calls the not-found handler outside the error handling of the middleware before it.
  const handleError = onError(log);
  app.notFound((c) => handleError(new ApiError('not_found', 'No such path'), c));
  app.onError(handleError);
  return Object.assign(app, { refused: refusals(logger, metrics) });
}

// The layers of the code, bottom to top (README.md, "Working on it"): db/, then lib/catalog (the reader of PostgreSQL's
// catalog), lib/collections (the collections file, checked against the catalog), lib/http (the HTTP toolkit),
// lib/pagination, lib/ratelimit, lib/openapi, and lib/service (the composition root) on top. A layer imports only layers
// below it, and lib/ratelimit not lib/pagination either. demo/ (the demo's tables, seed and collections) is served like
// a team's tables: it builds on db/ and lib/pagination's registry, nothing in db/ or lib/ imports it, and the entries
// (server.ts, server.deno.ts, server.bun.ts) hand it to start-up.
// `npm run lint:layers` (in `npm run lint`, so in `npm test`) checks them with dependency-cruiser.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment:
        'An import cycle has no bottom: none of its modules can be read, tested or moved without the others, and which one ' +
        'is evaluated first depends on who imports the cycle. Types several modules need go in a module of their own.',
      severity: 'error',
      from: { path: '^(lib|db|demo|bench|client)/' },
      to: { circular: true },
    },
    {
      name: 'db-below-lib',
      comment:
        'db/ (the schema, the clients, migrations and the seed) sits below lib/: scripts and the seed use it without the ' +
        'service. What both need lives in db/ (e.g. db/timestamps.ts).',
      severity: 'error',
      from: { path: '^db/' },
      to: { path: '^lib/' },
    },
    {
      name: 'catalog-is-the-bottom-of-lib',
      comment:
        "lib/catalog reads PostgreSQL's catalog into a typed model of relations, columns, types, keys and indexes; it is the " +
        'one reader, and knows nothing of files, HTTP or pagination: whatever builds on the catalog imports it, never the reverse.',
      severity: 'error',
      from: { path: '^lib/catalog/' },
      to: { path: '^lib/', pathNot: '^lib/catalog/' },
    },
    {
      name: 'collections-on-the-catalog-only',
      comment:
        'lib/collections reads the collections file, checks it against the catalog model and derives what it leaves unsaid; ' +
        'it builds on lib/catalog alone, so `init` and `check` run without the HTTP toolkit, pagination or the limiter.',
      severity: 'error',
      from: { path: '^lib/collections/' },
      to: { path: '^lib/', pathNot: '^lib/(catalog|collections)/' },
    },
    {
      name: 'http-is-the-bottom-of-lib',
      comment:
        'lib/http is an HTTP toolkit (errors, headers, compression, logging, shutdown) that the folders of lib/ above it build ' +
        'on; it knows nothing of the catalog, pagination, rate limits or the document. Wiring them together is lib/service.',
      severity: 'error',
      from: { path: '^lib/http/' },
      to: { path: '^lib/', pathNot: '^lib/http/' },
    },
    {
      name: 'pagination-below-ratelimit-openapi-service',
      comment:
        'lib/pagination serves chunks; the rate limit stands in front of it, the OpenAPI document describes it and lib/service ' +
        'mounts it, so it imports none of them.',
      severity: 'error',
      from: { path: '^lib/pagination/' },
      to: { path: '^lib/(ratelimit|openapi|service)/' },
    },
    {
      name: 'ratelimit-not-pagination',
      comment:
        'lib/ratelimit knows requests, keys and costs, not pagination: what a chunk costs is handed to it from above ' +
        '(lib/service), so a change to pagination never reaches the limiter.',
      severity: 'error',
      from: { path: '^lib/ratelimit/' },
      to: { path: '^lib/pagination/' },
    },
    {
      name: 'ratelimit-below-openapi-service',
      comment: 'lib/openapi describes the rate limit and lib/service mounts it: lib/ratelimit imports neither.',
      severity: 'error',
      from: { path: '^lib/ratelimit/' },
      to: { path: '^lib/(openapi|service)/' },
    },
    {
      name: 'openapi-below-service',
      comment:
        "lib/openapi builds the document from the layers below it (the registry, the operator API's schemas in lib/ratelimit, " +
        'the HTTP toolkit); lib/service serves the document, so lib/openapi never imports it.',
      severity: 'error',
      from: { path: '^lib/openapi/' },
      to: { path: '^lib/service/' },
    },
    {
      name: 'request-stages-composed-in-service',
      comment:
        "A collection request's stages (prepare, the gate's admit and settle, execute, respond) are composed in one " +
        'function, lib/service/collection-request.ts, that reads top to bottom; no stage reaches for another, and no ' +
        'middleware runs one beside it. Only lib/service imports the gate, execute and respond.',
      severity: 'error',
      from: { path: '^(lib|bench|client|demo|db)/', pathNot: '^lib/service/' },
      to: { path: '^lib/(pagination/(execute|respond)|ratelimit/gate)[.]ts$' },
    },
    {
      name: 'nothing-below-imports-the-demo',
      comment:
        "The demo is one set of collections among any a team serves: db/ keeps only the service's own schema and lib/ serves " +
        'whatever registry it is given, so neither imports demo/. The entries hand the demo to start-up when COLLECTIONS asks for it.',
      severity: 'error',
      from: { path: '^(db|lib)/' },
      to: { path: '^demo/' },
    },
    {
      name: 'demo-on-db-and-the-registry',
      comment:
        'demo/ declares its tables (Drizzle, schema demo), its migrations, its seed and its collections file; of lib/ it needs ' +
        "only the registry a file makes (lib/pagination) and the catalog's model its snapshot is, never the service, the " +
        'limiter or the HTTP layer.',
      severity: 'error',
      from: { path: '^demo/' },
      to: { path: '^lib/', pathNot: ['^lib/pagination/', '^lib/catalog/model[.]ts$'] },
    },
    {
      name: 'not-to-unresolvable',
      comment:
        'An import the cruiser cannot resolve (a .ts specifier it failed to follow, a typo) is missing from the graph, and ' +
        'every rule above would pass without seeing it.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // The project imports './x.ts' (tsconfig.json, allowImportingTsExtensions); the tsconfig's resolution follows them.
    tsConfig: { fileName: 'tsconfig.json' },
    // A type-only import is a dependency too: the importer does not compile without the module it names.
    tsPreCompilationDeps: true,
    // Packages' subpaths (hono/cors, @hono/node-server/conninfo) through their package.json "exports", as Node resolves them.
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'types', 'node', 'default'] },
    doNotFollow: { path: 'node_modules' },
  },
};

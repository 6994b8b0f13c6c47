// The service's own schema: where its tables and functions (the limiter, keys, tiers, the cursor secret, the
// migrations' journal) are to live, apart from the team's data (issue 40). One name, read by whatever must know
// it: the catalog reading of `npm run collections` (never the team's data), and the service's migrations.
export const SERVICE_SCHEMA = 'paginated_collections';

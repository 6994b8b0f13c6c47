-- Keys carry scopes and claims (db/schema.ts, api_keys): the collections a key may read (NULL: every collection) and
-- the claims the collections' row rules compare with. The keys that exist get NULL and '{}': they read every
-- collection that has no row rule, as a key from POST /v1/keys does. A constant default adds both columns without
-- rewriting the table.
ALTER TABLE "paginated_collections"."api_keys" ADD COLUMN "collections" text[];--> statement-breakpoint
ALTER TABLE "paginated_collections"."api_keys" ADD COLUMN "claims" jsonb DEFAULT '{}'::jsonb NOT NULL;

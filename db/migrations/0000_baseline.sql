-- The service's own schema and tables (db/schema.ts). IF NOT EXISTS: drizzle's migrator makes the schema first, to
-- keep its journal there (db/migrate.ts); a deployment of an earlier release has its tables moved here instead of
-- running this (db/migrate.ts, adoptEarlierRelease).
CREATE SCHEMA IF NOT EXISTS "paginated_collections";
--> statement-breakpoint
CREATE TABLE "paginated_collections"."api_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"key_hash" "bytea" NOT NULL,
	"prefix" text NOT NULL,
	"name" text,
	"tier" text NOT NULL,
	"created_at" timestamp(6) with time zone DEFAULT clock_timestamp() NOT NULL,
	"revoked_at" timestamp(6) with time zone
);
--> statement-breakpoint
CREATE TABLE "paginated_collections"."rate_tiers" (
	"name" text PRIMARY KEY NOT NULL,
	"allowance" integer NOT NULL,
	"window_seconds" integer NOT NULL,
	"concurrency" integer NOT NULL,
	CONSTRAINT "rate_tiers_values_check" CHECK ("paginated_collections"."rate_tiers"."allowance" >= 1 AND "paginated_collections"."rate_tiers"."window_seconds" >= 1 AND "paginated_collections"."rate_tiers"."concurrency" >= 1)
);
--> statement-breakpoint
CREATE TABLE "paginated_collections"."rate_windows" (
	"subject" text PRIMARY KEY NOT NULL,
	"last_start" bigint NOT NULL,
	"used" bigint NOT NULL,
	"expires" bigint[] NOT NULL,
	"units" integer[] NOT NULL,
	"lease_seq" bigint NOT NULL,
	"lease_tokens" bigint[] NOT NULL,
	"lease_expires" double precision[] NOT NULL,
	"quiet_at" double precision NOT NULL
);
--> statement-breakpoint
CREATE TABLE "paginated_collections"."settings" (
	"name" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "paginated_collections"."api_keys" ADD CONSTRAINT "api_keys_tier_rate_tiers_name_fk" FOREIGN KEY ("tier") REFERENCES "paginated_collections"."rate_tiers"("name") ON DELETE no action ON UPDATE cascade;--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_key_hash_idx" ON "paginated_collections"."api_keys" USING btree ("key_hash");
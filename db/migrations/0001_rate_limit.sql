CREATE TABLE "api_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"key_hash" "bytea" NOT NULL,
	"prefix" text NOT NULL,
	"name" text,
	"tier" text NOT NULL,
	"created_at" timestamp(6) with time zone DEFAULT clock_timestamp() NOT NULL,
	"revoked_at" timestamp(6) with time zone
);
--> statement-breakpoint
CREATE TABLE "rate_counters" (
	"subject" text NOT NULL,
	"bucket_start" bigint NOT NULL,
	"units" bigint NOT NULL,
	"expires_at" bigint NOT NULL,
	CONSTRAINT "rate_counters_subject_bucket_start_pk" PRIMARY KEY("subject","bucket_start")
);
--> statement-breakpoint
CREATE TABLE "rate_leases" (
	"subject" text NOT NULL,
	"id" bigint GENERATED ALWAYS AS IDENTITY (sequence name "rate_leases_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"expires_at" double precision NOT NULL,
	CONSTRAINT "rate_leases_subject_id_pk" PRIMARY KEY("subject","id")
);
--> statement-breakpoint
CREATE TABLE "rate_tiers" (
	"name" text PRIMARY KEY NOT NULL,
	"allowance" integer NOT NULL,
	"window_seconds" integer NOT NULL,
	"concurrency" integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_tier_rate_tiers_name_fk" FOREIGN KEY ("tier") REFERENCES "public"."rate_tiers"("name") ON DELETE no action ON UPDATE cascade;--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_key_hash_idx" ON "api_keys" USING btree ("key_hash");
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
CREATE TABLE "rate_slots" (
	"subject" text NOT NULL,
	"slot" integer NOT NULL,
	"token" bigint NOT NULL,
	"expires_at" double precision NOT NULL,
	CONSTRAINT "rate_slots_subject_slot_pk" PRIMARY KEY("subject","slot")
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
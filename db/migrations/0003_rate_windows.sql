CREATE TABLE "rate_windows" (
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
DROP TABLE "rate_counters" CASCADE;--> statement-breakpoint
DROP TABLE "rate_slots" CASCADE;
-- What db/schema.ts cannot express: the table settings of rate_windows and the default tiers. The SQL functions
-- behind every decision (rate_decide, rate_release, rate_refund, rate_housekeep) are in db/functions, applied
-- after the migrations (docs/reference/database.md, "Migrations"; docs/explanation/rate-limit.md, "How it runs in PostgreSQL").

-- Hot rows: each batch that touches a subject rewrites its row. With half of every page left free the
-- new version goes on the same page, and as no indexed column changes it is a HOT update: no index
-- entry, and the page prunes the old version by itself. Vacuum early: the table churns but stays small.
-- A busy subject's row stays uncompressed up to 4,000 bytes (PostgreSQL's default: 2,032): rate_decide writes
-- the whole row back at every statement, and past 2,032 bytes PostgreSQL would compress its largest array
-- again at every one of those writes. 4,000 rather than more: two versions of the row still fit in one 8 KB
-- page, so that the update stays HOT.
ALTER TABLE "paginated_collections"."rate_windows" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 200, toast_tuple_target = 4000);
--> statement-breakpoint
-- The tiers that exist from the start (docs/reference/limits.md, "Tiers"): allowances grow anonymous < free < pro.
INSERT INTO "paginated_collections"."rate_tiers" ("name", "allowance", "window_seconds", "concurrency") VALUES
  ('anonymous', 60, 60, 4),
  ('free', 600, 60, 8),
  ('pro', 6000, 60, 32),
  ('registration', 5, 3600, 2)
ON CONFLICT ("name") DO NOTHING;

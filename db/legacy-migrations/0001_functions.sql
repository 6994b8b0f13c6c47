-- Rate limit: what db/schema.ts cannot express (the table settings of rate_windows, the default tiers).
-- This migration also created the plpgsql functions behind every decision, rate_decide, rate_release and
-- rate_housekeep; their current definitions are in db/functions, applied after the migrations
-- (docs/reference/database.md, "Migrations"; docs/explanation/rate-limit.md, "How it runs in PostgreSQL").

-- Hot rows: each batch that touches a subject rewrites its row. With half of every page left free the
-- new version goes on the same page, and as no indexed column changes it is a HOT update: no index
-- entry, and the page prunes the old version by itself. Vacuum early: the table churns but stays small.
ALTER TABLE "rate_windows" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 200);
--> statement-breakpoint
-- The tiers that exist from the start (docs/reference/limits.md, "Tiers"): allowances grow anonymous < free < pro.
INSERT INTO "rate_tiers" ("name", "allowance", "window_seconds", "concurrency") VALUES
  ('anonymous', 60, 60, 4),
  ('free', 600, 60, 8),
  ('pro', 6000, 60, 32),
  ('registration', 5, 3600, 2)
ON CONFLICT ("name") DO NOTHING;

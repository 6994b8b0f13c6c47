-- Rate limit: what db/schema.ts cannot express (the table settings of rate_windows, the default tiers)
-- and the plpgsql functions behind every decision (docs/rate-limit.md, "In PostgreSQL").

-- Hot rows: each batch that touches a subject rewrites its row. With half of every page left free the
-- new version goes on the same page, and as no indexed column changes it is a HOT update: no index
-- entry, and the page prunes the old version by itself. Vacuum early: the table churns but stays small.
ALTER TABLE "rate_windows" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 200);
--> statement-breakpoint
-- The tiers that exist from the start (docs/rate-limit.md, "Tiers"): allowances grow anonymous < free < pro.
INSERT INTO "rate_tiers" ("name", "allowance", "window_seconds", "concurrency") VALUES
  ('anonymous', 60, 60, 4),
  ('free', 600, 60, 8),
  ('pro', 6000, 60, 32),
  ('registration', 5, 3600, 2)
ON CONFLICT ("name") DO NOTHING;
--> statement-breakpoint
-- A batch of rate-limit decisions, and the lease releases of requests that ended meanwhile, in one
-- statement (one round trip for every request of the batch). An instance sends one per turn of its event
-- loop: under load many requests share a statement, a commit and a wake-up of the backend.
--
-- Decision i is for the key whose SHA-256 (in hex) is p_key_hashes[i] (its subject is `key:<id>`, its tier the
-- key's), or, when that is NULL or names no live key, for p_ip_subjects[i] on tier p_ip_tiers[i]; an
-- unknown or revoked key is a 401 counted against the IP (docs/api.md). It costs p_costs[i] units, capped at
-- the tier's allowance, and takes a lease of p_lease_ttl seconds (0: no concurrency cap).
-- p_clock_offsets[i] moves the database clock for tests only; the service always passes 0.
--
-- Bucketed sliding window, exact for its rule: with bucket length b = max(1, floor(W / 60)) seconds, a
-- unit served at time u in the bucket starting at s = floor(u / b) * b counts until s + b + W (an integer
-- second, at least u + W), or until the expiry of an earlier bucket if that is later (only after a tier
-- change shortened the window). A request is admitted iff the units that still count plus its cost fit
-- the allowance; so no interval of W seconds ever holds more than the allowance of served units.
-- Declined requests charge nothing.
--
-- Locking: every subject's row is locked (FOR NO KEY UPDATE, released at commit) and handled in subject
-- order, so two batches never lock rows in opposite orders (no deadlock); `now` is read from the database
-- clock after the lock, for each decision. The rows come back in subject order; `idx` says whose.
CREATE FUNCTION rate_decide(
  p_key_hashes text[],
  p_ip_subjects text[],
  p_ip_tiers text[],
  p_costs integer[],
  p_clock_offsets double precision[],
  p_lease_ttl integer,
  p_release_subjects text[],
  p_release_slots integer[],
  p_release_tokens bigint[]
) RETURNS TABLE (
  idx integer,
  outcome text,
  subject text,
  tier text,
  key_id text,
  allowance integer,
  window_seconds integer,
  remaining bigint,
  reset bigint,
  retry_after bigint,
  now_second bigint,
  lease_slot integer,
  lease_token bigint
)
LANGUAGE plpgsql VOLATILE
-- Plan the statements below once per connection, not at every call: a custom plan for the batch query
-- would cost more than running it.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
  r record;
  -- The subject whose row is locked, and that row (v_found: it exists; v_dirty: it must be written).
  v_subject text;
  v_found boolean := false;
  v_dirty boolean := false;
  v_last_start bigint;
  v_used bigint;
  v_expires bigint[];
  v_units integer[];
  v_seq bigint;
  v_tokens bigint[];
  v_lease_expires double precision[];
  v_quiet double precision;
  -- One decision.
  v_cost integer;
  v_now double precision;
  v_bucket integer;
  v_start bigint;
  v_expiry bigint;
  v_n integer;
  v_first integer;
  v_freed bigint;
  v_fits integer;
  v_inflight integer;
  v_free integer;
BEGIN
  FOR r IN
    SELECT x.* FROM (
      SELECT 0 AS kind, NULL::integer AS idx, rel.subject, rel.slot, rel.token, NULL::text AS ip_tier,
             NULL::text AS tier, NULL::text AS key_id, NULL::integer AS allowance, NULL::integer AS window_seconds,
             NULL::integer AS concurrency, NULL::integer AS cost, NULL::double precision AS clock_offset,
             NULL::text AS outcome
        FROM unnest(p_release_subjects, p_release_slots, p_release_tokens) AS rel(subject, slot, token)
      UNION ALL
      SELECT 1, d.idx::integer, coalesce('key:' || k.id, d.ip_subject), NULL, NULL, d.ip_tier,
             t.name, k.id, t.allowance, t.window_seconds, t.concurrency, d.cost, d.clock_offset,
             CASE WHEN d.key_hash IS NOT NULL AND k.id IS NULL THEN 'invalid_key' ELSE 'ok' END
        FROM unnest(p_key_hashes, p_ip_subjects, p_ip_tiers, p_costs, p_clock_offsets) WITH ORDINALITY
               AS d(key_hash, ip_subject, ip_tier, cost, clock_offset, idx)
        -- LATERAL … LIMIT 1 keeps each lookup an index probe per decision; as a plain join, the planner
        -- (which cannot know the batch is small) would hash all of api_keys.
        LEFT JOIN LATERAL (SELECT k.id, k.tier FROM api_keys k
                             WHERE k.key_hash = decode(d.key_hash, 'hex') AND k.revoked_at IS NULL LIMIT 1) k ON true
        LEFT JOIN LATERAL (SELECT t.name, t.allowance, t.window_seconds, t.concurrency FROM rate_tiers t
                             WHERE t.name = coalesce(k.tier, d.ip_tier) LIMIT 1) t ON true
    ) x
    -- Hot keys: do not wait for the WAL flush; a crash can lose the last few milliseconds of charges
    -- and releases, nothing else (docs/rate-limit.md, "In PostgreSQL"). Set once, before any row is written.
    CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
    ORDER BY x.subject COLLATE "C", x.kind, x.idx
  LOOP
    IF v_subject IS DISTINCT FROM r.subject THEN
      IF v_dirty THEN
        UPDATE rate_windows w SET last_start = v_last_start, used = v_used, expires = v_expires, units = v_units,
          lease_seq = v_seq, lease_tokens = v_tokens, lease_expires = v_lease_expires, quiet_at = v_quiet
          WHERE w.subject = v_subject;
      END IF;
      v_subject := r.subject;
      v_dirty := false;
      SELECT w.last_start, w.used, w.expires, w.units, w.lease_seq, w.lease_tokens, w.lease_expires, w.quiet_at
        INTO v_last_start, v_used, v_expires, v_units, v_seq, v_tokens, v_lease_expires, v_quiet
        FROM rate_windows w WHERE w.subject = v_subject FOR NO KEY UPDATE;
      v_found := FOUND;
    END IF;

    IF r.kind = 0 THEN
      -- A release: the slot is freed only while this lease still holds it (an out-of-range slot reads NULL).
      IF v_found AND v_tokens[r.slot] = r.token THEN
        v_lease_expires[r.slot] := 0;
        v_dirty := true;
      END IF;
      CONTINUE;
    END IF;

    IF r.allowance IS NULL THEN
      RAISE EXCEPTION 'Rate tier % does not exist', r.ip_tier;
    END IF;
    IF NOT v_found THEN
      -- The subject's first request (or the first since housekeeping removed its row): create the row,
      -- then lock it. A concurrent batch that created it first makes the insert wait, then do nothing.
      INSERT INTO rate_windows AS w (subject, last_start, used, expires, units, lease_seq, lease_tokens, lease_expires, quiet_at)
        VALUES (v_subject, 0, 0, '{}', '{}', 0, '{}', '{}', 0) ON CONFLICT (subject) DO NOTHING;
      SELECT w.last_start, w.used, w.expires, w.units, w.lease_seq, w.lease_tokens, w.lease_expires, w.quiet_at
        INTO STRICT v_last_start, v_used, v_expires, v_units, v_seq, v_tokens, v_lease_expires, v_quiet
        FROM rate_windows w WHERE w.subject = v_subject FOR NO KEY UPDATE;
      v_found := true;
    END IF;

    -- The row this function returns for decision r.idx, completed on each path below.
    idx := r.idx; subject := v_subject; tier := r.tier; key_id := r.key_id;
    allowance := r.allowance; window_seconds := r.window_seconds;
    lease_slot := NULL; lease_token := NULL; retry_after := 0;
    -- A request never costs more than its tier's whole allowance, so it always fits eventually
    -- (docs/rate-limit.md, "Cost").
    v_cost := least(greatest(r.cost, 1), r.allowance);
    v_now := extract(epoch FROM clock_timestamp()) + r.clock_offset;
    now_second := floor(v_now)::bigint;
    v_bucket := greatest(1, r.window_seconds / 60);
    v_start := floor(v_now / v_bucket)::bigint * v_bucket;

    -- Buckets that stopped counting leave from the front (expiries ascend).
    v_n := coalesce(array_length(v_expires, 1), 0);
    v_first := 1;
    WHILE v_first <= v_n AND v_expires[v_first] <= v_now LOOP
      v_used := v_used - v_units[v_first];
      v_first := v_first + 1;
    END LOOP;
    IF v_first > 1 THEN
      v_expires := v_expires[v_first:];
      v_units := v_units[v_first:];
      v_n := v_n - v_first + 1;
      v_dirty := true;
    END IF;

    IF v_used + v_cost > r.allowance THEN
      -- Exceeded: Reset is the first second at which enough units have stopped counting for this cost to
      -- fit; Retry-After points exactly there.
      v_freed := 0;
      v_fits := 0; -- the bucket whose expiry frees enough
      WHILE v_used - v_freed + v_cost > r.allowance LOOP
        v_fits := v_fits + 1;
        v_freed := v_freed + v_units[v_fits];
      END LOOP;
      outcome := 'rate'; remaining := greatest(r.allowance - v_used, 0);
      reset := v_expires[v_fits]; retry_after := v_expires[v_fits] - now_second;
      RETURN NEXT;
      CONTINUE;
    END IF;

    IF p_lease_ttl > 0 AND r.outcome = 'ok' THEN
      v_inflight := 0;
      v_free := NULL;
      FOR i IN 1 .. coalesce(array_length(v_lease_expires, 1), 0) LOOP
        IF v_lease_expires[i] > v_now THEN
          v_inflight := v_inflight + 1;
        ELSIF v_free IS NULL THEN
          v_free := i;
        END IF;
      END LOOP;
      IF v_inflight >= r.concurrency THEN
        -- Over the cap: declined, nothing charged; Reset keeps its success meaning.
        outcome := 'concurrency'; remaining := r.allowance - v_used;
        reset := coalesce(v_expires[v_n], now_second); retry_after := 1;
        RETURN NEXT;
        CONTINUE;
      END IF;
      -- Reuse a free slot in place; a subject has as many slots as it ever had requests in flight at once.
      v_free := coalesce(v_free, coalesce(array_length(v_lease_expires, 1), 0) + 1);
      v_seq := v_seq + 1;
      v_tokens[v_free] := v_seq;
      v_lease_expires[v_free] := v_now + p_lease_ttl;
      v_quiet := greatest(v_quiet, v_now + p_lease_ttl);
      lease_slot := v_free; lease_token := v_seq;
    END IF;

    -- The charge: into the current bucket, or a new one at the end.
    v_expiry := greatest(v_start + v_bucket + r.window_seconds, v_expires[v_n]);
    IF v_n > 0 AND v_last_start = v_start THEN
      v_units[v_n] := v_units[v_n] + v_cost;
      v_expires[v_n] := v_expiry;
    ELSE
      v_units := v_units || v_cost;
      v_expires := v_expires || v_expiry;
      v_last_start := v_start;
    END IF;
    v_used := v_used + v_cost;
    v_quiet := greatest(v_quiet, v_expiry);
    v_dirty := true;
    -- Success: Reset is the second at which the whole allowance is back (the last counted unit expires).
    outcome := r.outcome; remaining := r.allowance - v_used; reset := v_expiry;
    RETURN NEXT;
  END LOOP;
  IF v_dirty THEN
    UPDATE rate_windows w SET last_start = v_last_start, used = v_used, expires = v_expires, units = v_units,
      lease_seq = v_seq, lease_tokens = v_tokens, lease_expires = v_lease_expires, quiet_at = v_quiet
      WHERE w.subject = v_subject;
  END IF;
END
$$;
--> statement-breakpoint
-- Housekeeping, run by whichever instance gets the try-lock: deletes the rows of subjects that have been
-- quiet (nothing counts, no live lease) for a minute, so an active client keeps its row and updates it
-- in place. Rows a batch holds are skipped (SKIP LOCKED): housekeeping never waits and never deadlocks.
-- The scan reads the whole table, which holds one row per subject seen in the last window and minute.
CREATE FUNCTION rate_housekeep(p_clock_offset double precision DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_now double precision;
  v_removed bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7204119003) THEN
    RETURN -1;
  END IF;
  v_now := extract(epoch FROM clock_timestamp()) + p_clock_offset;
  DELETE FROM rate_windows w WHERE w.subject IN (
    SELECT q.subject FROM rate_windows q WHERE q.quiet_at <= v_now - 60 FOR UPDATE SKIP LOCKED
  );
  GET DIAGNOSTICS v_removed = ROW_COUNT;
  RETURN v_removed;
END
$$;
--> statement-breakpoint
-- Ends leases when no decision is going to the database to carry them (rate_decide's p_release_*):
-- cheaper than rate_decide for that. Rows are locked in the same order as rate_decide locks them (subject,
-- then slot), so the two never deadlock. A slot is freed only while the lease still holds it.
CREATE FUNCTION rate_release(p_subjects text[], p_slots integer[], p_tokens bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  r record;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true); -- as in rate_decide
  FOR r IN
    SELECT x.subject, x.slot, x.token FROM unnest(p_subjects, p_slots, p_tokens) AS x(subject, slot, token)
    ORDER BY x.subject COLLATE "C", x.slot
  LOOP
    UPDATE rate_windows w SET lease_expires[r.slot] = 0
      WHERE w.subject = r.subject AND w.lease_tokens[r.slot] = r.token;
  END LOOP;
END
$$;

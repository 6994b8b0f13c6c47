-- Rate limit: table settings for hot rows, the default tiers, and the one-round-trip decision function.

-- Hot counters: a request updates `units` of its subject's current bucket. With half of every page
-- left free, that update is a HOT update (no indexed column changes, room on the same page), so it
-- writes no index entry and leaves little for vacuum. Vacuum early: the table churns but stays small.
ALTER TABLE "rate_counters" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 200);
--> statement-breakpoint
-- Leases are inserted and deleted, never updated: fillfactor does not matter; vacuum early as well.
ALTER TABLE "rate_leases" SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 200);
--> statement-breakpoint
ALTER TABLE "rate_tiers" ADD CONSTRAINT "rate_tiers_values_check"
  CHECK ("allowance" >= 1 AND "window_seconds" >= 1 AND "concurrency" >= 1);
--> statement-breakpoint
-- The tiers that exist from the start (API.md): allowances grow anonymous < free < pro.
INSERT INTO "rate_tiers" ("name", "allowance", "window_seconds", "concurrency") VALUES
  ('anonymous', 60, 60, 4),
  ('free', 600, 60, 8),
  ('pro', 6000, 60, 32),
  ('registration', 5, 3600, 2)
ON CONFLICT ("name") DO NOTHING;
--> statement-breakpoint
-- One rate-limit decision, in one statement (one round trip):
--   1. the key (by the SHA-256 of its text) and its tier, or the IP subject and its tier;
--   2. under a per-subject advisory lock, with `now` from the database clock taken after the lock:
--      the units of the subject's buckets that still count, and whether this request's cost fits;
--   3. the concurrency lease, when a cap applies;
--   4. the charge: an upsert of the current bucket.
-- Bucketed sliding window, exact for its rule: with bucket length b = max(1, floor(W / 60)) seconds,
-- a unit served at time u in the bucket starting at s = floor(u / b) * b counts until exactly
-- s + b + W (an integer second), which is at least u + W. A request is admitted iff the units that
-- still count plus its cost fit the allowance; so no interval of W seconds ever holds more than the
-- allowance of served units. Declined requests write nothing.
-- p_clock_offset moves the database clock for tests only; the service always passes 0.
CREATE OR REPLACE FUNCTION rate_decide(
  p_key_hash bytea,
  p_ip_subject text,
  p_ip_tier text,
  p_cost integer,
  p_lease_ttl integer,
  p_clock_offset double precision DEFAULT 0
) RETURNS TABLE (
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
  lease_id bigint
)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  v_outcome text := 'ok';
  v_subject text;
  v_tier text;
  v_key_id text;
  v_allowance integer;
  v_window integer;
  v_concurrency integer;
  v_cost integer;
  v_now double precision;
  v_bucket integer;
  v_start bigint;
  v_used bigint;
  v_inflight bigint;
  v_reset bigint;
  v_lease bigint;
BEGIN
  IF p_key_hash IS NOT NULL THEN
    SELECT k.id, k.tier INTO v_key_id, v_tier
      FROM api_keys k WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL;
    IF FOUND THEN
      v_subject := 'key:' || v_key_id;
    ELSE
      -- An unknown or revoked key is a 401, counted against the IP (API.md).
      v_outcome := 'invalid_key';
      v_key_id := NULL;
    END IF;
  END IF;
  IF v_subject IS NULL THEN
    v_subject := p_ip_subject;
    v_tier := p_ip_tier;
  END IF;
  SELECT t.allowance, t.window_seconds, t.concurrency INTO v_allowance, v_window, v_concurrency
    FROM rate_tiers t WHERE t.name = v_tier;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'Rate tier % does not exist', v_tier;
  END IF;
  -- A request never costs more than its tier's whole allowance (API.md), so it always fits eventually.
  v_cost := least(greatest(p_cost, 1), v_allowance);

  -- Hot keys: do not wait for the WAL flush while other requests of the subject queue on the lock.
  -- A crash can lose the last few milliseconds of charges; nothing else (NOTES.md, "Hot rows").
  PERFORM set_config('synchronous_commit', 'off', true);
  -- Serialise the decisions of one subject across all instances; released at commit, after the
  -- charge is visible to the next holder. A hash collision only serialises two subjects more.
  PERFORM pg_advisory_xact_lock(hashtextextended(v_subject, 0));
  v_now := extract(epoch FROM clock_timestamp()) + p_clock_offset;
  v_bucket := greatest(1, v_window / 60);
  v_start := floor(v_now / v_bucket)::bigint * v_bucket;

  SELECT coalesce(sum(c.units), 0) INTO v_used
    FROM rate_counters c WHERE c.subject = v_subject AND c.expires_at > v_now;

  IF v_used + v_cost > v_allowance THEN
    -- Exceeded: Reset is the first second at which enough units have stopped counting for this
    -- cost to fit; Retry-After points exactly there.
    SELECT min(x.expires_at) INTO v_reset FROM (
      SELECT c.expires_at, sum(c.units) OVER (ORDER BY c.expires_at) AS freed
        FROM rate_counters c WHERE c.subject = v_subject AND c.expires_at > v_now
    ) x WHERE v_used - x.freed + v_cost <= v_allowance;
    RETURN QUERY SELECT 'rate'::text, v_subject, v_tier, v_key_id, v_allowance, v_window,
      greatest(v_allowance - v_used, 0), v_reset, v_reset - floor(v_now)::bigint,
      floor(v_now)::bigint, NULL::bigint;
    RETURN;
  END IF;

  IF p_lease_ttl > 0 AND v_outcome = 'ok' THEN
    SELECT count(*) INTO v_inflight
      FROM rate_leases l WHERE l.subject = v_subject AND l.expires_at > v_now;
    IF v_inflight >= v_concurrency THEN
      -- Over the cap: declined, nothing charged; Reset keeps its success meaning.
      SELECT coalesce(max(c.expires_at), floor(v_now)::bigint) INTO v_reset
        FROM rate_counters c WHERE c.subject = v_subject AND c.expires_at > v_now;
      RETURN QUERY SELECT 'concurrency'::text, v_subject, v_tier, v_key_id, v_allowance, v_window,
        v_allowance - v_used, v_reset, 1::bigint, floor(v_now)::bigint, NULL::bigint;
      RETURN;
    END IF;
    INSERT INTO rate_leases AS l (subject, expires_at) VALUES (v_subject, v_now + p_lease_ttl)
      RETURNING l.id INTO v_lease;
  END IF;

  INSERT INTO rate_counters AS c (subject, bucket_start, units, expires_at)
    VALUES (v_subject, v_start, v_cost, v_start + v_bucket + v_window)
    ON CONFLICT ON CONSTRAINT rate_counters_subject_bucket_start_pk
    DO UPDATE SET units = c.units + excluded.units, expires_at = greatest(c.expires_at, excluded.expires_at);
  -- Success: Reset is the second at which the whole allowance is back (the last counted unit expires).
  SELECT max(c.expires_at) INTO v_reset
    FROM rate_counters c WHERE c.subject = v_subject AND c.expires_at > v_now;
  RETURN QUERY SELECT v_outcome, v_subject, v_tier, v_key_id, v_allowance, v_window,
    v_allowance - v_used - v_cost, v_reset, 0::bigint, floor(v_now)::bigint, v_lease;
END
$$;
--> statement-breakpoint
-- Housekeeping, run now and then by whichever instance gets the lock (no separate process): drops
-- counters that no longer count and leases that have expired. Returns the rows removed, or -1 when
-- another instance is already at it.
CREATE OR REPLACE FUNCTION rate_housekeep(p_clock_offset double precision DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_now double precision;
  v_counters bigint;
  v_leases bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7204119003) THEN
    RETURN -1;
  END IF;
  v_now := extract(epoch FROM clock_timestamp()) + p_clock_offset;
  DELETE FROM rate_counters c WHERE c.expires_at <= v_now;
  GET DIAGNOSTICS v_counters = ROW_COUNT;
  DELETE FROM rate_leases l WHERE l.expires_at <= v_now;
  GET DIAGNOSTICS v_leases = ROW_COUNT;
  RETURN v_counters + v_leases;
END
$$;

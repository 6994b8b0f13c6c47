-- Rate limit: table settings for hot rows, the default tiers, and the functions behind every decision.

-- Hot counters: a request updates `units` of its subject's current bucket. With half of every page
-- left free, that update is a HOT update (no indexed column changes, room on the same page), so it
-- writes no index entry and leaves little for vacuum. Vacuum early: the table churns but stays small.
ALTER TABLE "rate_counters" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 200);
--> statement-breakpoint
-- Concurrency leases as slots (rate_slots, see db/schema.ts): taking and releasing a lease update a
-- row in place instead of inserting and deleting one per request. rate_decide returns the slot and its
-- token; rate_release_many frees the slot only if it still holds that lease.

-- Updated on every request, like the counters: room for HOT updates; vacuumed early.
ALTER TABLE "rate_slots" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 200);
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
--   1. the key (by the SHA-256 of its text) and its tier in one join, or the IP subject and its tier;
--   2. under a per-subject advisory lock, with `now` from the database clock taken after the lock:
--      the units of the subject's buckets that still count, and whether this request's cost fits;
--   3. the concurrency lease (a slot of rate_slots), when a cap applies;
--   4. the charge: an upsert of the current bucket.
-- Bucketed sliding window, exact for its rule: with bucket length b = max(1, floor(W / 60)) seconds,
-- a unit served at time u in the bucket starting at s = floor(u / b) * b counts until exactly
-- s + b + W (an integer second), which is at least u + W. A request is admitted iff the units that
-- still count plus its cost fit the allowance; so no interval of W seconds ever holds more than the
-- allowance of served units. Declined requests write nothing. The result row is returned through OUT
-- parameters: each statement inside plpgsql costs CPU on the hot path.
-- p_clock_offset moves the database clock for tests only; the service always passes 0.
CREATE FUNCTION rate_decide(
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
  lease_slot integer,
  lease_token bigint
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
  v_latest bigint;
  v_inflight bigint;
  v_reset bigint;
  v_free integer;
  v_last_slot integer;
  v_slot integer;
  v_token bigint;
BEGIN
  IF p_key_hash IS NOT NULL THEN
    SELECT k.id, k.tier, t.allowance, t.window_seconds, t.concurrency
      INTO v_key_id, v_tier, v_allowance, v_window, v_concurrency
      FROM api_keys k JOIN rate_tiers t ON t.name = k.tier
      WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL;
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
    SELECT t.allowance, t.window_seconds, t.concurrency INTO v_allowance, v_window, v_concurrency
      FROM rate_tiers t WHERE t.name = v_tier;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'Rate tier % does not exist', v_tier;
    END IF;
  END IF;
  -- A request never costs more than its tier's whole allowance (API.md), so it always fits eventually.
  v_cost := least(greatest(p_cost, 1), v_allowance);

  -- Hot keys: do not wait for the WAL flush while other requests of the subject queue on the lock.
  -- A crash can lose the last few milliseconds of charges; nothing else (NOTES.md, "Hot rows").
  -- Serialise the decisions of one subject across all instances; released at commit, after the
  -- charge is visible to the next holder. A hash collision only serialises two subjects more.
  PERFORM set_config('synchronous_commit', 'off', true), pg_advisory_xact_lock(hashtextextended(v_subject, 0));
  v_now := extract(epoch FROM clock_timestamp()) + p_clock_offset;
  v_bucket := greatest(1, v_window / 60);
  v_start := floor(v_now / v_bucket)::bigint * v_bucket;
  -- The row this function returns (OUT parameters), completed on each path below.
  subject := v_subject; tier := v_tier; key_id := v_key_id; allowance := v_allowance;
  window_seconds := v_window; now_second := floor(v_now)::bigint;

  SELECT coalesce(sum(c.units), 0), max(c.expires_at) INTO v_used, v_latest
    FROM rate_counters c WHERE c.subject = v_subject AND c.expires_at > v_now;

  IF v_used + v_cost > v_allowance THEN
    -- Exceeded: Reset is the first second at which enough units have stopped counting for this
    -- cost to fit; Retry-After points exactly there.
    SELECT min(x.expires_at) INTO v_reset FROM (
      SELECT c.expires_at, sum(c.units) OVER (ORDER BY c.expires_at) AS freed
        FROM rate_counters c WHERE c.subject = v_subject AND c.expires_at > v_now
    ) x WHERE v_used - x.freed + v_cost <= v_allowance;
    outcome := 'rate'; remaining := greatest(v_allowance - v_used, 0);
    reset := v_reset; retry_after := v_reset - floor(v_now)::bigint;
    RETURN NEXT;
    RETURN;
  END IF;

  IF p_lease_ttl > 0 AND v_outcome = 'ok' THEN
    SELECT count(*) FILTER (WHERE s.expires_at > v_now), min(s.slot) FILTER (WHERE s.expires_at <= v_now),
           coalesce(max(s.slot), 0)
      INTO v_inflight, v_free, v_last_slot
      FROM rate_slots s WHERE s.subject = v_subject;
    IF v_inflight >= v_concurrency THEN
      -- Over the cap: declined, nothing charged; Reset keeps its success meaning.
      outcome := 'concurrency'; remaining := v_allowance - v_used;
      reset := coalesce(v_latest, floor(v_now)::bigint); retry_after := 1;
      RETURN NEXT;
      RETURN;
    END IF;
    -- Reuse a free slot in place; only a subject's first requests (or the first after housekeeping
    -- removed its free slots) insert one. Only this function inserts slots, under the subject's lock.
    IF v_free IS NOT NULL THEN
      UPDATE rate_slots s SET token = s.token + 1, expires_at = v_now + p_lease_ttl
        WHERE s.subject = v_subject AND s.slot = v_free
        RETURNING s.slot, s.token INTO v_slot, v_token;
    END IF;
    IF v_slot IS NULL THEN -- no free slot, or housekeeping removed it meanwhile
      INSERT INTO rate_slots AS s (subject, slot, token, expires_at)
        VALUES (v_subject, v_last_slot + 1, 1, v_now + p_lease_ttl)
        ON CONFLICT ON CONSTRAINT rate_slots_subject_slot_pk
        DO UPDATE SET token = s.token + 1, expires_at = excluded.expires_at
        RETURNING s.slot, s.token INTO v_slot, v_token;
    END IF;
  END IF;

  INSERT INTO rate_counters AS c (subject, bucket_start, units, expires_at)
    VALUES (v_subject, v_start, v_cost, v_start + v_bucket + v_window)
    ON CONFLICT ON CONSTRAINT rate_counters_subject_bucket_start_pk
    DO UPDATE SET units = c.units + excluded.units, expires_at = greatest(c.expires_at, excluded.expires_at);
  -- Success: Reset is the second at which the whole allowance is back (the last counted unit expires).
  v_reset := greatest(v_latest, v_start + v_bucket + v_window);
  outcome := v_outcome; remaining := v_allowance - v_used - v_cost; reset := v_reset; retry_after := 0;
  lease_slot := v_slot; lease_token := v_token;
  RETURN NEXT;
END
$$;
--> statement-breakpoint
-- Ends many concurrency leases in one statement: an instance sends the leases of all its requests that
-- ended while its previous release was in flight (group release), so under load a request costs about
-- one round trip for its decision and a fraction of one for its release. Rows are updated one by one
-- in (subject, slot) order, so two instances' releases never lock rows in opposite orders (no deadlock).
-- It does not wait for the WAL flush: a release lost in a crash only leaves a lease that stops counting
-- at its expiry, and a synchronous commit here would cost a disk flush per request. A lease is ended
-- only while its token still holds the slot, so a late release never frees a slot taken again.
CREATE FUNCTION rate_release_many(p_subjects text[], p_slots integer[], p_tokens bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_lease record;
  v_now double precision := extract(epoch FROM clock_timestamp());
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  FOR v_lease IN
    SELECT r.subject, r.slot, r.token FROM unnest(p_subjects, p_slots, p_tokens) AS r(subject, slot, token)
    ORDER BY r.subject, r.slot
  LOOP
    UPDATE rate_slots s SET expires_at = v_now
      WHERE s.subject = v_lease.subject AND s.slot = v_lease.slot AND s.token = v_lease.token;
  END LOOP;
END
$$;
--> statement-breakpoint
-- Housekeeping, run by whichever instance gets the try-lock: deletes counters that no longer count,
-- and keeps a client's free slots for a minute after they were last used, so an active client
-- reuses its slots in place instead of inserting them again after every housekeeping run.
CREATE FUNCTION rate_housekeep(p_clock_offset double precision DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_now double precision;
  v_counters bigint;
  v_slots bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7204119003) THEN
    RETURN -1;
  END IF;
  v_now := extract(epoch FROM clock_timestamp()) + p_clock_offset;
  DELETE FROM rate_counters c WHERE c.expires_at <= v_now;
  GET DIAGNOSTICS v_counters = ROW_COUNT;
  DELETE FROM rate_slots s WHERE s.expires_at <= v_now - 60;
  GET DIAGNOSTICS v_slots = ROW_COUNT;
  RETURN v_counters + v_slots;
END
$$;

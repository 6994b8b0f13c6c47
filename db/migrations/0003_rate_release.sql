-- Ends a concurrency lease. Like a decision, it does not wait for the WAL flush: a release lost in a
-- crash only leaves a lease that stops counting at its expiry, and a synchronous commit here would
-- cost a disk flush per request.
CREATE OR REPLACE FUNCTION rate_release(p_subject text, p_lease_id bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  DELETE FROM rate_leases l WHERE l.subject = p_subject AND l.id = p_lease_id;
END
$$;
--> statement-breakpoint
-- rate_decide, revised: the units that count and the latest expiry in one scan (one scan fewer per
-- decision). The rule and the guarantee are those of 0002.
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
  v_latest bigint;
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

  SELECT coalesce(sum(c.units), 0), max(c.expires_at) INTO v_used, v_latest
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
      RETURN QUERY SELECT 'concurrency'::text, v_subject, v_tier, v_key_id, v_allowance, v_window,
        v_allowance - v_used, coalesce(v_latest, floor(v_now)::bigint), 1::bigint, floor(v_now)::bigint, NULL::bigint;
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
  v_reset := greatest(v_latest, v_start + v_bucket + v_window);
  RETURN QUERY SELECT v_outcome, v_subject, v_tier, v_key_id, v_allowance, v_window,
    v_allowance - v_used - v_cost, v_reset, 0::bigint, floor(v_now)::bigint, v_lease;
END
$$;

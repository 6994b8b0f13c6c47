-- A batch of rate-limit decisions, and the lease releases of requests that ended meanwhile, in one
-- statement (one round trip for every request of the batch). An instance sends one per turn of its event
-- loop: under load many requests share a statement, a commit and a wake-up of the backend.
--
-- Decision i is for the key whose SHA-256 (in hex) is p_key_hashes[i] (its subject is `key:<id>`, its tier the
-- key's), or, when that is NULL or names no live key, for p_ip_subjects[i] on tier p_ip_tiers[i]; an
-- unknown or revoked key is a 401 counted against the IP (docs/reference/api.md). It costs p_costs[i] units and
-- takes a lease of p_lease_ttl seconds (0: no concurrency cap). A cost above the tier's whole allowance could never
-- be paid within a window: such a request is refused as such (outcome `cost`, nothing charged, no lease), except
-- that an invalid key's is capped at the allowance and charged to its address. A tier p_ip_tiers[i] that does not
-- exist (a token's tier claim may name any) is refused as such too: outcome `unknown_tier`, nothing charged, no
-- lease, the tier's figures 0. A live key's row carries its collections (a JSON array, or NULL: every collection)
-- and its claims, from the one lookup that finds the key, whatever the outcome (docs/reference/api.md, "Keys:
-- scopes and claims").
-- p_clock_offsets[i] moves the database clock for tests only; the service always passes 0. Release j may
-- give back p_release_refunds[j] units (a 304's, docs/reference/costs.md, "Conditional requests") to the
-- bucket that expires at p_release_refund_expiries[j]: the `reset` of its decision, which returns `charged`;
-- a negative refund is a debt, kept over later windows of p_release_windows[j] seconds, at most
-- p_release_allowances[j] units a window (rate_refund). Each row returns the tier's `concurrency`, by which
-- the instance shares what the client has left among its requests in flight (statement budgets).
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
--
-- A batch of one subject (one busy client) takes a fast path that reads its entries from the arrays as they
-- are; both paths make the same decisions (tests/ratelimit/one-subject.test.ts). A subject's leases in flight
-- are counted once per batch (tests/ratelimit/lease-count.test.ts), and the slots at the end of its arrays
-- whose lease was released, or expired a minute ago, are dropped when its row is written
-- (tests/ratelimit/row-storage.test.ts; docs/explanation/rate-limit.md, "How it runs in PostgreSQL").
--
-- This file holds the current definition, applied by db/functions.ts whenever it changes. Its history is in
-- git and in the headers of the migrations that once carried it (0001, 0002, 0003, 0004, 0006, 0007).
--
-- The function is dropped first: CREATE OR REPLACE cannot change the columns it returns (key_collections and
-- key_claims were added). Both statements run in the functions step's one transaction, so a decision made
-- meanwhile by a running instance finds the old definition until the new one commits; postgres.js prepares its
-- statement again when the columns changed.
DROP FUNCTION IF EXISTS paginated_collections.rate_decide(text[], text[], text[], integer[], double precision[], integer,
  text[], integer[], bigint[], integer[], bigint[], integer[], integer[]);
CREATE FUNCTION paginated_collections.rate_decide(
  p_key_hashes text[],
  p_ip_subjects text[],
  p_ip_tiers text[],
  p_costs integer[],
  p_clock_offsets double precision[],
  p_lease_ttl integer,
  p_release_subjects text[],
  p_release_slots integer[],
  p_release_tokens bigint[],
  p_release_refunds integer[] DEFAULT NULL,
  p_release_refund_expiries bigint[] DEFAULT NULL,
  p_release_allowances integer[] DEFAULT NULL,
  p_release_windows integer[] DEFAULT NULL
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
  lease_token bigint,
  charged integer,
  concurrency integer,
  key_collections jsonb,
  key_claims jsonb
)
LANGUAGE plpgsql VOLATILE
-- Plan the statements below once per connection, not at every call: a custom plan for the batch query
-- would cost more than running it.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
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
  -- The subject's leases as last counted: when (NULL: not yet since its row was read), how many were in
  -- flight, the earliest expiry among them, and the free slots (a stack, the lowest on top).
  v_counted_at double precision;
  v_live_until double precision;
  v_free_slots integer[];
  -- How many lease slots the row keeps when it is written.
  v_keep integer;
  -- Slots whose lease expired before this (Unix seconds) may be dropped from the end of the arrays.
  v_stale_before double precision;
  -- Every entry has been read: the last subject's row is written, and the loop ends.
  v_done boolean := false;
  v_free_top integer;
  -- The entry at hand: a release (e_kind 0) or a decision (1), as the query below or the fast path gives it.
  v_rows refcursor;
  v_fast boolean := false;
  v_key_tier text;
  v_releases integer;
  v_entries integer;
  v_entry integer := 0;
  e_kind integer;
  e_idx integer;
  e_subject text;
  e_slot integer;
  e_token bigint;
  e_ip_tier text;
  e_tier text;
  e_key_id text;
  e_allowance integer;
  e_window_seconds integer;
  e_concurrency integer;
  e_cost integer;
  e_clock_offset double precision;
  e_outcome text;
  e_key_collections jsonb;
  e_key_claims jsonb;
  e_refund integer;
  e_refund_expiry bigint;
  e_refund_allowance integer;
  e_refund_window integer;
  v_refunded integer;
BEGIN
  -- One subject: every decision for the same key hash, IP subject and tier, every release of that subject
  -- (a busy client). The key and the tier are looked up once and the entries read from the arrays as they
  -- are, with no query to join and sort them.
  IF array_remove(p_key_hashes, p_key_hashes[1]) = '{}' AND array_remove(p_ip_subjects, p_ip_subjects[1]) = '{}'
     AND array_remove(p_ip_tiers, p_ip_tiers[1]) = '{}' THEN
    IF p_key_hashes[1] IS NOT NULL THEN
      SELECT k.id, k.tier, to_jsonb(k.collections), k.claims INTO e_key_id, v_key_tier, e_key_collections, e_key_claims
        FROM paginated_collections.api_keys k
        WHERE k.key_hash = decode(p_key_hashes[1], 'hex') AND k.revoked_at IS NULL LIMIT 1;
    END IF;
    e_subject := coalesce('key:' || e_key_id, p_ip_subjects[1]);
    v_fast := array_remove(p_release_subjects, e_subject) = '{}';
  END IF;
  IF v_fast THEN
    e_ip_tier := p_ip_tiers[1];
    e_outcome := CASE WHEN p_key_hashes[1] IS NOT NULL AND e_key_id IS NULL THEN 'invalid_key' ELSE 'ok' END;
    SELECT t.name, t.allowance, t.window_seconds, t.concurrency INTO e_tier, e_allowance, e_window_seconds, e_concurrency
      FROM paginated_collections.rate_tiers t WHERE t.name = coalesce(v_key_tier, e_ip_tier);
    -- As below, for the general case.
    PERFORM set_config('synchronous_commit',
      coalesce(nullif(current_setting('paginated_collections.limiter_synchronous_commit', true), ''), 'off'), true);
    v_releases := coalesce(cardinality(p_release_slots), 0);
    v_entries := v_releases + coalesce(cardinality(p_costs), 0);
  ELSE
    OPEN v_rows FOR
    SELECT x.* FROM (
      SELECT 0 AS kind, NULL::integer AS idx, rel.subject, rel.slot, rel.token, rel.refund, rel.refund_expiry,
             rel.refund_allowance, rel.refund_window, NULL::text AS ip_tier,
             NULL::text AS tier, NULL::text AS key_id, NULL::integer AS allowance, NULL::integer AS window_seconds,
             NULL::integer AS concurrency, NULL::integer AS cost, NULL::double precision AS clock_offset,
             NULL::text AS outcome, NULL::jsonb AS key_collections, NULL::jsonb AS key_claims
        FROM unnest(p_release_subjects, p_release_slots, p_release_tokens, p_release_refunds, p_release_refund_expiries,
                    p_release_allowances, p_release_windows)
               AS rel(subject, slot, token, refund, refund_expiry, refund_allowance, refund_window)
      UNION ALL
      SELECT 1, d.idx::integer, coalesce('key:' || k.id, d.ip_subject), NULL, NULL, NULL, NULL, NULL, NULL, d.ip_tier,
             t.name, k.id, t.allowance, t.window_seconds, t.concurrency, d.cost, d.clock_offset,
             CASE WHEN d.key_hash IS NOT NULL AND k.id IS NULL THEN 'invalid_key' ELSE 'ok' END,
             to_jsonb(k.collections), k.claims
        FROM unnest(p_key_hashes, p_ip_subjects, p_ip_tiers, p_costs, p_clock_offsets) WITH ORDINALITY
               AS d(key_hash, ip_subject, ip_tier, cost, clock_offset, idx)
        -- LATERAL … LIMIT 1 keeps each lookup an index probe per decision; as a plain join, the planner
        -- (which cannot know the batch is small) would hash all of api_keys.
        LEFT JOIN LATERAL (SELECT k.id, k.tier, k.collections, k.claims FROM paginated_collections.api_keys k
                             WHERE k.key_hash = decode(d.key_hash, 'hex') AND k.revoked_at IS NULL LIMIT 1) k ON true
        LEFT JOIN LATERAL (SELECT t.name, t.allowance, t.window_seconds, t.concurrency FROM paginated_collections.rate_tiers t
                             WHERE t.name = coalesce(k.tier, d.ip_tier) LIMIT 1) t ON true
    ) x
    -- Hot keys: do not wait for the WAL flush; a crash or a failover can lose the last few hundred milliseconds of
    -- charges and releases, nothing else (docs/explanation/rate-limit.md, "Asynchronous commit"). Set once, before
    -- any row is written. A limiter that must lose none (LIMITER_SYNCHRONOUS_COMMIT) sets
    -- paginated_collections.limiter_synchronous_commit for the statement's transaction, as an argument's side effect.
    CROSS JOIN (SELECT set_config('synchronous_commit',
      coalesce(nullif(current_setting('paginated_collections.limiter_synchronous_commit', true), ''), 'off'), true)) AS async_commit
    ORDER BY x.subject COLLATE "C", x.kind, x.idx;
  END IF;
  -- One entry at a time: the releases, then the decisions, subject by subject.
  LOOP
    IF v_fast THEN
      v_entry := v_entry + 1;
      IF v_entry > v_entries THEN
        v_done := true;
      ELSIF v_entry <= v_releases THEN
        e_kind := 0; e_slot := p_release_slots[v_entry]; e_token := p_release_tokens[v_entry];
        e_refund := p_release_refunds[v_entry]; e_refund_expiry := p_release_refund_expiries[v_entry];
        e_refund_allowance := p_release_allowances[v_entry]; e_refund_window := p_release_windows[v_entry];
      ELSE
        e_kind := 1; e_idx := v_entry - v_releases; e_cost := p_costs[e_idx]; e_clock_offset := p_clock_offsets[e_idx];
      END IF;
    ELSE
      FETCH v_rows INTO e_kind, e_idx, e_subject, e_slot, e_token, e_refund, e_refund_expiry, e_refund_allowance, e_refund_window, e_ip_tier, e_tier, e_key_id, e_allowance, e_window_seconds,
        e_concurrency, e_cost, e_clock_offset, e_outcome, e_key_collections, e_key_claims;
      v_done := NOT FOUND;
    END IF;
    IF v_done OR v_subject IS DISTINCT FROM e_subject THEN
      IF v_dirty THEN
        -- The subject's slots at the end of its arrays whose lease was released (0) or expired a minute ago
        -- are dropped: its row keeps the slots up to its last lease held or just expired. The clock is its
        -- last decision's (a test's clock offset included), or the database's when it had releases only.
        v_stale_before := coalesce(v_now, extract(epoch FROM clock_timestamp())) - 60;
        v_keep := coalesce(array_length(v_lease_expires, 1), 0);
        WHILE v_keep > 0 AND v_lease_expires[v_keep] < v_stale_before LOOP v_keep := v_keep - 1; END LOOP;
        UPDATE paginated_collections.rate_windows w SET last_start = v_last_start, used = v_used, expires = v_expires, units = v_units,
          lease_seq = v_seq, lease_tokens = v_tokens[1:v_keep], lease_expires = v_lease_expires[1:v_keep], quiet_at = v_quiet
          WHERE w.subject = v_subject;
      END IF;
      EXIT WHEN v_done;
      v_subject := e_subject;
      v_now := NULL;
      v_dirty := false;
      -- Counted at the subject's first decision: its releases come before its decisions, on both paths.
      v_counted_at := NULL;
      SELECT w.last_start, w.used, w.expires, w.units, w.lease_seq, w.lease_tokens, w.lease_expires, w.quiet_at
        INTO v_last_start, v_used, v_expires, v_units, v_seq, v_tokens, v_lease_expires, v_quiet
        FROM paginated_collections.rate_windows w WHERE w.subject = v_subject FOR NO KEY UPDATE;
      v_found := FOUND;
    END IF;

    IF e_kind = 0 THEN
      -- A release: the slot is freed only while this lease still holds it (an out-of-range slot reads NULL).
      IF v_found AND v_tokens[e_slot] = e_token THEN
        -- A refund (a 304's units, or a settlement: negative charges more, a debt) goes back with the first release of its lease only: a release sent again
        -- finds the lease released already (0), so the units never go back twice. A debt's buckets count, so the
        -- row is not quiet before the last of them expires.
        IF e_refund <> 0 AND v_lease_expires[e_slot] <> 0 THEN
          SELECT f.expires, f.units, f.refunded INTO v_expires, v_units, v_refunded
            FROM paginated_collections.rate_refund(v_expires, v_units, e_refund_expiry, e_refund, v_used, e_refund_allowance, e_refund_window) f;
          v_used := v_used - v_refunded;
          v_quiet := greatest(v_quiet, v_expires[array_length(v_expires, 1)]);
        END IF;
        v_lease_expires[e_slot] := 0;
        v_dirty := true;
      END IF;
      CONTINUE;
    END IF;

    IF e_allowance IS NULL THEN
      -- No such tier (a key's always exists: api_keys.tier references it): refused as such, nothing charged, no
      -- lease, no row made for the subject; the tier's figures are 0.
      idx := e_idx; outcome := 'unknown_tier'; subject := v_subject; tier := e_ip_tier; key_id := e_key_id;
      key_collections := e_key_collections; key_claims := e_key_claims;
      allowance := 0; window_seconds := 0; concurrency := 0; remaining := 0; reset := 0; retry_after := 0; charged := 0;
      lease_slot := NULL; lease_token := NULL;
      now_second := floor(extract(epoch FROM clock_timestamp()) + e_clock_offset)::bigint;
      RETURN NEXT;
      CONTINUE;
    END IF;
    IF NOT v_found THEN
      -- The subject's first request (or the first since housekeeping removed its row): create the row,
      -- then lock it. A concurrent batch that created it first makes the insert wait, then do nothing.
      INSERT INTO paginated_collections.rate_windows AS w (subject, last_start, used, expires, units, lease_seq, lease_tokens, lease_expires, quiet_at)
        VALUES (v_subject, 0, 0, '{}', '{}', 0, '{}', '{}', 0) ON CONFLICT (subject) DO NOTHING;
      SELECT w.last_start, w.used, w.expires, w.units, w.lease_seq, w.lease_tokens, w.lease_expires, w.quiet_at
        INTO STRICT v_last_start, v_used, v_expires, v_units, v_seq, v_tokens, v_lease_expires, v_quiet
        FROM paginated_collections.rate_windows w WHERE w.subject = v_subject FOR NO KEY UPDATE;
      v_found := true;
    END IF;

    -- The row this function returns for decision e_idx, completed on each path below.
    idx := e_idx; subject := v_subject; tier := e_tier; key_id := e_key_id;
    key_collections := e_key_collections; key_claims := e_key_claims;
    allowance := e_allowance; window_seconds := e_window_seconds; concurrency := e_concurrency;
    lease_slot := NULL; lease_token := NULL; retry_after := 0; charged := 0;
    -- What is charged never exceeds the tier's whole allowance, so a request always fits eventually: a valid
    -- one that costs more is refused below; an invalid key's is capped (docs/reference/costs.md, "The rule").
    v_cost := least(greatest(e_cost, 1), e_allowance);
    v_now := extract(epoch FROM clock_timestamp()) + e_clock_offset;
    now_second := floor(v_now)::bigint;
    v_bucket := greatest(1, e_window_seconds / 60);
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

    IF e_cost > e_allowance AND e_outcome = 'ok' THEN
      -- More than a whole window's allowance: it would never fit, so it is refused as such, whatever is left;
      -- nothing charged. Reset keeps its success meaning.
      outcome := 'cost'; remaining := greatest(e_allowance - v_used, 0);
      reset := coalesce(v_expires[v_n], now_second);
      RETURN NEXT;
      CONTINUE;
    END IF;

    IF v_used + v_cost > e_allowance THEN
      -- Exceeded: Reset is the first second at which enough units have stopped counting for this cost to
      -- fit; Retry-After points exactly there.
      v_freed := 0;
      v_fits := 0; -- the bucket whose expiry frees enough
      WHILE v_used - v_freed + v_cost > e_allowance LOOP
        v_fits := v_fits + 1;
        v_freed := v_freed + v_units[v_fits];
      END LOOP;
      outcome := 'rate'; remaining := greatest(e_allowance - v_used, 0);
      reset := v_expires[v_fits]; retry_after := v_expires[v_fits] - now_second;
      RETURN NEXT;
      CONTINUE;
    END IF;

    IF p_lease_ttl > 0 AND e_outcome = 'ok' THEN
      -- The leases in flight are counted once per subject and batch, not at every decision: again only when
      -- the clock has reached the earliest expiry counted (or went back: a test's clock offset). In between,
      -- each decision keeps the count and the free slots exact.
      IF v_counted_at IS NULL OR v_now < v_counted_at OR v_now >= v_live_until THEN
        v_counted_at := v_now;
        v_inflight := 0;
        v_live_until := 'infinity';
        v_free_slots := '{}';
        v_free_top := 0;
        FOR i IN REVERSE coalesce(array_length(v_lease_expires, 1), 0) .. 1 LOOP
          IF v_lease_expires[i] > v_now THEN
            v_inflight := v_inflight + 1;
            v_live_until := least(v_live_until, v_lease_expires[i]);
          ELSE
            v_free_top := v_free_top + 1;
            v_free_slots[v_free_top] := i;
          END IF;
        END LOOP;
      END IF;
      IF v_inflight >= e_concurrency THEN
        -- Over the cap: declined, nothing charged; Reset keeps its success meaning.
        outcome := 'concurrency'; remaining := e_allowance - v_used;
        reset := coalesce(v_expires[v_n], now_second); retry_after := 1;
        RETURN NEXT;
        CONTINUE;
      END IF;
      -- Reuse a free slot in place; a subject has as many slots as it ever had requests in flight at once.
      IF v_free_top > 0 THEN
        v_free := v_free_slots[v_free_top];
        v_free_top := v_free_top - 1;
      ELSE
        v_free := coalesce(array_length(v_lease_expires, 1), 0) + 1;
      END IF;
      v_seq := v_seq + 1;
      v_tokens[v_free] := v_seq;
      v_lease_expires[v_free] := v_now + p_lease_ttl;
      v_inflight := v_inflight + 1;
      v_live_until := least(v_live_until, v_now + p_lease_ttl);
      v_quiet := greatest(v_quiet, v_now + p_lease_ttl);
      lease_slot := v_free; lease_token := v_seq;
    END IF;

    -- The charge: into the current bucket, or a new one at the end.
    v_expiry := greatest(v_start + v_bucket + e_window_seconds, v_expires[v_n]);
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
    -- Success: Reset is the second at which the whole allowance is back (the last counted unit expires),
    -- which is also the expiry of the bucket charged: a refund of these units names it.
    outcome := e_outcome; remaining := e_allowance - v_used; reset := v_expiry; charged := v_cost;
    RETURN NEXT;
  END LOOP;
END
$$;

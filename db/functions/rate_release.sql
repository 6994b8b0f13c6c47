-- Ends leases when no decision is going to the database to carry them (rate_decide's p_release_*):
-- cheaper than rate_decide for that. Rows are locked in the same order as rate_decide locks them (subject,
-- then slot), so the two never deadlock. A slot is freed only while the lease still holds it; a settlement (a
-- 304's units, p_refunds, with their bucket's expiry, p_refund_expiries; negative for units charged after,
-- kept as a debt over later windows of p_windows seconds, at most p_allowances a window: rate_refund) goes
-- with the first release of a live lease only, as in rate_decide.
CREATE OR REPLACE FUNCTION paginated_collections.rate_release(p_subjects text[], p_slots integer[], p_tokens bigint[],
                             p_refunds integer[] DEFAULT NULL, p_refund_expiries bigint[] DEFAULT NULL,
                             p_allowances integer[] DEFAULT NULL, p_windows integer[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  r record;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true); -- as in rate_decide
  FOR r IN
    SELECT x.subject, x.slot, x.token, x.refund, x.refund_expiry, x.allowance, x.window_seconds
      FROM unnest(p_subjects, p_slots, p_tokens, p_refunds, p_refund_expiries, p_allowances, p_windows)
             AS x(subject, slot, token, refund, refund_expiry, allowance, window_seconds)
    ORDER BY x.subject COLLATE "C", x.slot
  LOOP
    IF r.refund <> 0 THEN
      -- As in rate_decide: with the first release of a live lease only. A debt's buckets count, so the row
      -- is not quiet before the last of them expires (housekeeping).
      UPDATE paginated_collections.rate_windows w SET lease_expires[r.slot] = 0,
          (expires, units, used, quiet_at) = (SELECT f.expires, f.units, w.used - f.refunded,
                                                     greatest(w.quiet_at, f.expires[array_length(f.expires, 1)])
                                                FROM paginated_collections.rate_refund(w.expires, w.units, r.refund_expiry, r.refund, w.used, r.allowance, r.window_seconds) f)
        WHERE w.subject = r.subject AND w.lease_tokens[r.slot] = r.token AND w.lease_expires[r.slot] <> 0;
    ELSE
      UPDATE paginated_collections.rate_windows w SET lease_expires[r.slot] = 0
        WHERE w.subject = r.subject AND w.lease_tokens[r.slot] = r.token;
    END IF;
  END LOOP;
END
$$;

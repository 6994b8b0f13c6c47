-- Housekeeping, run by whichever instance gets the try-lock: deletes the rows of subjects that have been
-- quiet (nothing counts, no live lease) for a minute, so an active client keeps its row and updates it
-- in place. Rows a batch holds are skipped (SKIP LOCKED): housekeeping never waits and never deadlocks.
-- The scan reads the whole table, which holds one row per subject seen in the last window and minute.
CREATE OR REPLACE FUNCTION paginated_collections.rate_housekeep(p_clock_offset double precision DEFAULT 0)
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
  DELETE FROM paginated_collections.rate_windows w WHERE w.subject IN (
    SELECT q.subject FROM paginated_collections.rate_windows q WHERE q.quiet_at <= v_now - 60 FOR UPDATE SKIP LOCKED
  );
  GET DIAGNOSTICS v_removed = ROW_COUNT;
  RETURN v_removed;
END
$$;

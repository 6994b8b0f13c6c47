-- Housekeeping keeps a client's free slots for a minute after they were last used, so an active client
-- reuses its slots in place instead of inserting them again after every housekeeping run.
CREATE OR REPLACE FUNCTION rate_housekeep(p_clock_offset double precision DEFAULT 0)
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

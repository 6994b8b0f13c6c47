-- Ends many concurrency leases in one statement: an instance sends the leases of all its requests that
-- ended while its previous release was in flight (group release), so under load a request costs about
-- one round trip for its decision and a fraction of one for its release. Rows are updated one by one
-- in (subject, slot) order, so two instances' releases never lock rows in opposite orders (no deadlock).
CREATE OR REPLACE FUNCTION rate_release_many(p_subjects text[], p_slots integer[], p_tokens bigint[])
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

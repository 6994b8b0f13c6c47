-- The settlement of a request's charge when its lease is released, one home for rate_decide and
-- rate_release (docs/rate-limit.md, "Conditional requests", "Counts"): a positive p_amount (a 304's
-- sending units, a count that read fewer rows than estimated) takes up to p_amount units out of the buckets
-- that expire at p_expiry (after a tier change two buckets may share an expiry), none if no bucket does; a
-- negative one (a count that read more) adds its units to the first such bucket. So a settlement never
-- moves units to a bucket that expires earlier or later than their own charge. `refunded` is negative for
-- units added.
CREATE OR REPLACE FUNCTION rate_refund(p_expires bigint[], p_units integer[], p_expiry bigint, p_amount integer,
                            OUT units integer[], OUT refunded integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_back integer;
BEGIN
  units := p_units;
  refunded := 0;
  IF p_amount < 0 THEN
    FOR i IN 1 .. coalesce(array_length(p_expires, 1), 0) LOOP
      IF p_expires[i] = p_expiry THEN
        units[i] := units[i] - p_amount;
        refunded := p_amount;
        RETURN;
      END IF;
    END LOOP;
    RETURN;
  END IF;
  FOR i IN 1 .. coalesce(array_length(p_expires, 1), 0) LOOP
    EXIT WHEN refunded >= p_amount;
    IF p_expires[i] = p_expiry THEN
      v_back := least(p_amount - refunded, units[i]);
      units[i] := units[i] - v_back;
      refunded := refunded + v_back;
    END IF;
  END LOOP;
END
$$;

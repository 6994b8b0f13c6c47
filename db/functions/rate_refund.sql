-- The refund of a 304's units, one home for rate_decide and rate_release (docs/rate-limit.md, "Conditional
-- requests are free"): takes up to p_amount units out of the buckets that expire at p_expiry (after a tier
-- change two buckets may share an expiry), none if no bucket does. So a refund never frees units earlier or
-- later than their own charge would have expired.
CREATE OR REPLACE FUNCTION rate_refund(p_expires bigint[], p_units integer[], p_expiry bigint, p_amount integer,
                            OUT units integer[], OUT refunded integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_back integer;
BEGIN
  units := p_units;
  refunded := 0;
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

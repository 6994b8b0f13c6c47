-- The settlement of a request's charge when its lease is released, one home for rate_decide and
-- rate_release (docs/reference/costs.md, "Conditional requests", "Counts", "Settlement"): a positive p_amount (a 304's
-- sending units) takes up to p_amount units out of the buckets that expire at p_expiry (after a tier change
-- two buckets may share an expiry), none if no bucket does. A negative one (units charged after the fact: a
-- count that read more rows than priced, statements that ran longer than their price) is a debt, kept until
-- paid: what still fits the allowance (p_allowance less the p_used units that count) goes into the bucket
-- that expires at p_expiry, and the rest into buckets that expire one window (p_window seconds) later, then
-- two, each holding at most a whole allowance, so that the client is declined until the window that pays
-- the last of it, however many windows that takes. Without p_allowance (an instance from before debts) all
-- of it goes into p_expiry's bucket, as before. So a settlement never moves units to a bucket that expires
-- earlier than their own charge. `refunded` is negative for units added; `expires` and `units` stay sorted
-- by expiry.
CREATE OR REPLACE FUNCTION paginated_collections.rate_refund(p_expires bigint[], p_units integer[], p_expiry bigint, p_amount integer,
                            p_used bigint, p_allowance integer, p_window integer,
                            OUT expires bigint[], OUT units integer[], OUT refunded integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_back integer;
  v_left integer;
  v_take integer;
  v_at bigint;
  v_pos integer;
  v_n integer;
BEGIN
  expires := p_expires;
  units := p_units;
  refunded := 0;
  v_n := coalesce(array_length(p_expires, 1), 0);
  IF p_amount < 0 THEN
    v_left := -p_amount;
    v_at := p_expiry;
    -- The decision's own bucket takes what fits the allowance; each later window at most a whole allowance.
    v_take := CASE WHEN p_allowance IS NULL OR p_window IS NULL OR p_window <= 0 THEN v_left
                   ELSE least(v_left, greatest(p_allowance - p_used, 0)) END;
    LOOP
      IF v_take > 0 THEN
        v_pos := 1;
        WHILE v_pos <= v_n AND expires[v_pos] < v_at LOOP v_pos := v_pos + 1; END LOOP;
        IF v_pos <= v_n AND expires[v_pos] = v_at THEN
          units[v_pos] := units[v_pos] + v_take;
        ELSE
          expires := expires[1:v_pos - 1] || v_at || expires[v_pos:v_n];
          units := units[1:v_pos - 1] || v_take || units[v_pos:v_n];
          v_n := v_n + 1;
        END IF;
        v_left := v_left - v_take;
        refunded := refunded - v_take;
      END IF;
      EXIT WHEN v_left <= 0;
      v_at := v_at + p_window;
      v_take := least(v_left, p_allowance);
    END LOOP;
    RETURN;
  END IF;
  FOR i IN 1 .. v_n LOOP
    EXIT WHEN refunded >= p_amount;
    IF p_expires[i] = p_expiry THEN
      v_back := least(p_amount - refunded, units[i]);
      units[i] := units[i] - v_back;
      refunded := refunded + v_back;
    END IF;
  END LOOP;
END
$$;

-- A busy subject's row stays uncompressed up to 4,000 bytes (PostgreSQL's default: 2,032). rate_decide
-- writes the whole row back at every statement; past 2,032 bytes PostgreSQL compresses its largest array
-- (lease_tokens, then lease_expires) again at every one of those writes. A subject reaches that size at
-- about 100 lease slots (as many as it ever had requests in flight at once), and every statement then paid
-- for that compression. 4,000 rather than more:
-- two versions of the row still fit in one 8 KB page, so that the update stays HOT (fillfactor 50,
-- 0001_functions.sql); past that a row is compressed as before (docs/explanation/rate-limit.md, "How it runs in PostgreSQL").
ALTER TABLE "rate_windows" SET (toast_tuple_target = 4000);

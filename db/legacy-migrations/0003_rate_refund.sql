-- A 304 costs nothing (docs/reference/costs.md, "Conditional requests"): its units go back in the lease
-- release its request ends with, in the statement the limiter sends anyway, so a refund costs no round trip.
-- A release may now carry a refund: the units its decision charged (rate_decide returns them, `charged`)
-- and the expiry of the bucket they went into (the decision's `reset`). They are taken out of that bucket
-- only, and only while it still counts, so a refund never frees units earlier or later than their own
-- charge would have expired; and only with the first release of the lease, so never twice.
--
-- The functions take the refunds as two more arrays, with defaults, so an instance that does not send them
-- still calls them as before (a rolling upgrade). A new argument is a new signature: the old functions are
-- dropped here. rate_refund and the new rate_decide and rate_release, which this migration created, live in
-- db/functions, applied right after the migrations (docs/reference/database.md, "Migrations"); the change itself is
-- in the git history of this file. IF EXISTS: a database made since that layout never had the old ones.
DROP FUNCTION IF EXISTS rate_decide(text[], text[], text[], integer[], double precision[], integer, text[], integer[], bigint[]);
--> statement-breakpoint
DROP FUNCTION IF EXISTS rate_release(text[], integer[], bigint[]);

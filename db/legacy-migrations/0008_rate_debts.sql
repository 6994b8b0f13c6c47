-- Debts kept until paid, costs above the allowance refused, statement budgets (docs/explanation/budgets.md, "Debts",
-- "Statement budgets"). A release's settlement may now be a debt spread over later windows, for which
-- rate_decide and rate_release take each release's allowance and window (two more arrays, with defaults, so an
-- instance from before them still calls them); rate_refund takes the units that count and those two; and
-- rate_decide returns the tier's concurrency. New arguments and a new result are new signatures: the old
-- functions are dropped here (a call with the old arguments would otherwise match two of them). The new ones
-- live in db/functions, applied right after the migrations (docs/reference/database.md, "Migrations"); the change
-- itself is in the git history of those files. IF EXISTS: a database made since that layout never had the old ones.
DROP FUNCTION IF EXISTS rate_decide(text[], text[], text[], integer[], double precision[], integer, text[], integer[], bigint[], integer[], bigint[]);
--> statement-breakpoint
DROP FUNCTION IF EXISTS rate_release(text[], integer[], bigint[], integer[], bigint[]);
--> statement-breakpoint
DROP FUNCTION IF EXISTS rate_refund(bigint[], integer[], bigint, integer);

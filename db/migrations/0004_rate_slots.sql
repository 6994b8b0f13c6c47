CREATE TABLE "rate_slots" (
	"subject" text NOT NULL,
	"slot" integer NOT NULL,
	"token" bigint NOT NULL,
	"expires_at" double precision NOT NULL,
	CONSTRAINT "rate_slots_subject_slot_pk" PRIMARY KEY("subject","slot")
);

-- Each get_result entry belongs to the actor whose call stashed it (the
-- typed key "<kind>:<id>", package actor); anyone else reads it as unknown.
-- Rows written before this migration have no owner and are read by nobody
-- (they expire with their TTL).
ALTER TABLE results ADD COLUMN owner TEXT NOT NULL DEFAULT '';
-- An issued token narrowed at creation (connecta token create --connectors):
-- a JSON array of connector ids; NULL reaches what the access rules give.
ALTER TABLE access_tokens ADD COLUMN connectors TEXT;

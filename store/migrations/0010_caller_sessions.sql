-- A console session of an admitted caller who is not an operator (a person
-- signed in for /me: their own connections, nothing else). Sessions from
-- before this migration are operators' (the console admitted no one else).
ALTER TABLE operator_sessions ADD COLUMN caller_only INTEGER NOT NULL DEFAULT 0;

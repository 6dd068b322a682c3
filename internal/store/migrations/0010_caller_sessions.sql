-- A console session of an admitted caller who is not an operator (a person
-- signed in for /me: their own connections, nothing else). Sessions from
-- before this migration are operators' (the console admitted no one else).
ALTER TABLE operator_sessions ADD COLUMN caller_only INTEGER NOT NULL DEFAULT 0;
-- The claims of the sign-in's access token (JSON: email, groups, …; no
-- token), so /me applies the access rules to the same claims /mcp does.
ALTER TABLE operator_sessions ADD COLUMN claims TEXT NOT NULL DEFAULT '';

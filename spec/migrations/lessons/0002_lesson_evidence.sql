-- Version 0.2: the evidence of the tier-2 heuristic scan.
-- Why the tier-2 scan suggested a candidate: one row per finding, so a rescan of the same
-- lines records (and counts) nothing twice.
CREATE TABLE IF NOT EXISTS lesson_evidence (
  id INTEGER PRIMARY KEY,
  lesson_id INTEGER NOT NULL REFERENCES lessons(id) ON DELETE CASCADE,
  heuristic TEXT NOT NULL CHECK (heuristic IN ('correction', 'retry-succeeded', 'repeated-failure')),
  session TEXT NOT NULL,
  line INTEGER NOT NULL,
  calls TEXT NOT NULL CHECK (json_valid(calls)),
  said TEXT,
  seen_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (lesson_id, heuristic, session, line)
);

-- The lessons database as version 0.1 of the server made it: lessons with full-text search,
-- the compiled manifest, the settings and the scan state.
CREATE TABLE IF NOT EXISTS lessons (
  id INTEGER PRIMARY KEY,
  slug TEXT NOT NULL UNIQUE,
  type TEXT NOT NULL DEFAULT 'hint' CHECK (type IN ('hint', 'guard', 'protocol', 'directive')),
  status TEXT NOT NULL DEFAULT 'candidate' CHECK (status IN ('candidate', 'active', 'archived')),
  tool_names TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tool_names) AND json_type(tool_names) = 'array'),
  command_patterns TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(command_patterns) AND json_type(command_patterns) = 'array'),
  path_patterns TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(path_patterns) AND json_type(path_patterns) = 'array'),
  trigger TEXT NOT NULL,
  problem TEXT NOT NULL,
  solution TEXT NOT NULL,
  tags TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags) AND json_type(tags) = 'array'),
  scope TEXT,
  source TEXT NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'mcp', 'scan')),
  occurrences INTEGER NOT NULL DEFAULT 1,
  archived_reason TEXT,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS lessons_status ON lessons(status, type, slug);
CREATE VIRTUAL TABLE IF NOT EXISTS lessons_fts USING fts5(
  slug, trigger, problem, solution, tags, content = 'lessons', content_rowid = 'id'
);
CREATE TRIGGER IF NOT EXISTS lessons_ai AFTER INSERT ON lessons BEGIN
  INSERT INTO lessons_fts (rowid, slug, trigger, problem, solution, tags)
  VALUES (new.id, new.slug, new.trigger, new.problem, new.solution, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS lessons_ad AFTER DELETE ON lessons BEGIN
  INSERT INTO lessons_fts (lessons_fts, rowid, slug, trigger, problem, solution, tags)
  VALUES ('delete', old.id, old.slug, old.trigger, old.problem, old.solution, old.tags);
END;
CREATE TRIGGER IF NOT EXISTS lessons_au AFTER UPDATE ON lessons BEGIN
  INSERT INTO lessons_fts (lessons_fts, rowid, slug, trigger, problem, solution, tags)
  VALUES ('delete', old.id, old.slug, old.trigger, old.problem, old.solution, old.tags);
  INSERT INTO lessons_fts (rowid, slug, trigger, problem, solution, tags)
  VALUES (new.id, new.slug, new.trigger, new.problem, new.solution, new.tags);
END;
-- The compiled manifest the interceptor reads: the active lessons as of the last build.
CREATE TABLE IF NOT EXISTS lesson_manifest (
  slug TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  tool_names TEXT NOT NULL,
  command_patterns TEXT NOT NULL,
  path_patterns TEXT NOT NULL,
  scope TEXT,
  tags TEXT NOT NULL,
  message TEXT NOT NULL
);
-- The configuration, `key` dotted as in lessons_config_set, `value` as JSON text. It lives
-- in the database (not a config.json beside it) so that the interceptor's SQL can read it.
CREATE TABLE IF NOT EXISTS settings (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL CHECK (json_valid(value))
);
-- How far each session JSONL file has been scanned, so that scans are incremental.
CREATE TABLE IF NOT EXISTS scan_state (
  path TEXT PRIMARY KEY,
  offset INTEGER NOT NULL,
  scanned_at TEXT NOT NULL
);

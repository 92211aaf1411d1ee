CREATE TABLE IF NOT EXISTS knowledge_entries (
  id TEXT PRIMARY KEY,
  content TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('pm', 'dev', 'qa', 'all')),
  tags TEXT CHECK (tags IS NULL OR json_valid(tags)),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_entries_list ON knowledge_entries(created_at DESC, id);
CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts USING fts5(
  content, tags, content = 'knowledge_entries', content_rowid = 'rowid'
);
CREATE TRIGGER IF NOT EXISTS knowledge_entries_ai AFTER INSERT ON knowledge_entries BEGIN
  INSERT INTO knowledge_fts (rowid, content, tags) VALUES (new.rowid, new.content, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS knowledge_entries_ad AFTER DELETE ON knowledge_entries BEGIN
  INSERT INTO knowledge_fts (knowledge_fts, rowid, content, tags)
  VALUES ('delete', old.rowid, old.content, old.tags);
END;
CREATE TRIGGER IF NOT EXISTS knowledge_entries_au AFTER UPDATE ON knowledge_entries BEGIN
  INSERT INTO knowledge_fts (knowledge_fts, rowid, content, tags)
  VALUES ('delete', old.rowid, old.content, old.tags);
  INSERT INTO knowledge_fts (rowid, content, tags) VALUES (new.rowid, new.content, new.tags);
END;

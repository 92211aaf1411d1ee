CREATE TABLE knowledge_entries (
  id VARCHAR(64) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
  content LONGTEXT NOT NULL,
  role VARCHAR(8) COLLATE utf8mb4_bin NOT NULL CHECK (role IN ('pm', 'dev', 'qa', 'all')),
  tags LONGTEXT CHECK (tags IS NULL OR JSON_VALID(tags)),
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  KEY knowledge_entries_list (created_at DESC, id),
  FULLTEXT KEY knowledge_entries_search (content, tags)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE knowledge_entries (
  id text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  content text NOT NULL,
  role text NOT NULL CHECK (role IN ('pm', 'dev', 'qa', 'all')),
  tags text[],
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  search tsvector NOT NULL DEFAULT ''
);
CREATE INDEX knowledge_entries_list ON knowledge_entries (created_at DESC, id);
CREATE INDEX knowledge_entries_search ON knowledge_entries USING gin (search);
CREATE INDEX knowledge_entries_tags ON knowledge_entries USING gin (tags);
-- The search vector covers content and tags; array_to_string is not immutable, so a
-- trigger keeps it rather than a generated column.
CREATE FUNCTION knowledge_entries_search() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.search := to_tsvector('english', NEW.content || ' ' || coalesce(array_to_string(NEW.tags, ' '), ''));
  RETURN NEW;
END
$$;
CREATE TRIGGER knowledge_entries_search BEFORE INSERT OR UPDATE OF content, tags
  ON knowledge_entries FOR EACH ROW EXECUTE FUNCTION knowledge_entries_search();

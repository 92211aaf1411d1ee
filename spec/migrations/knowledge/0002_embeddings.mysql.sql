-- MariaDB keeps this server's knowledge searchable by keyword only: the model column says so
-- for every entry (NULL), and the vectors stay with the engines that hold them (SQLite and
-- PostgreSQL). A server started here with a provider is refused, saying why.
ALTER TABLE knowledge_entries ADD COLUMN embedding_model VARCHAR(255) NULL;

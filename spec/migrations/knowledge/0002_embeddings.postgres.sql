-- Search by meaning, with pgvector: each entry's vector (NULL until one is made), the model
-- that made it (`:embeddings.knowledge.model`), and an HNSW index for cosine distance.
CREATE EXTENSION IF NOT EXISTS vector;
ALTER TABLE knowledge_entries ADD COLUMN embedding vector(256), ADD COLUMN embedding_model text;
CREATE INDEX knowledge_entries_embedding ON knowledge_entries USING hnsw (embedding vector_cosine_ops);

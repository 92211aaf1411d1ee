-- Search by meaning: each entry's vector (NULL until one is made) and the model that made it
-- (`:embeddings.knowledge.model`), so that vectors of another model are never compared.
-- F32_BLOB(256) declares 256 float32 values; sqlite-vec's distance functions read them.
ALTER TABLE knowledge_entries ADD COLUMN embedding F32_BLOB(256);
ALTER TABLE knowledge_entries ADD COLUMN embedding_model TEXT;

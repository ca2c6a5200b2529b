"""Semantic search over extracted text (in progress: embeddings and chunking)."""

"""Search engines the retriever kinds are made of: Okapi BM25 on a sparse matrix (``bm25/``), dense search in FAISS, fusion of
ranked lists, identifier matching, parent documents, the default tokenizer, and the plumbing of remote services."""

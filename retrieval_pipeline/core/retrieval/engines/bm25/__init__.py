"""Okapi BM25 with rank_bm25's scores: the index built from a corpus (``okapi_index``), the retriever that searches
and saves it (``okapi_bm25``), and the compiled kernel of large indexes (``bm25_kernels``, Numba, loaded on first use)."""

"""Claims into proofs: the pytest files that run in the sandbox, the provers that write them and the library index they resolve names through."""

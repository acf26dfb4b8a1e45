"""Files that run inside the sandbox (read with :mod:`importlib.resources`, never imported by the pipeline)."""

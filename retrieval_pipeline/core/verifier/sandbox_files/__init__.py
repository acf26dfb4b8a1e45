"""Source files that run inside the sandbox, read as text with :mod:`importlib.resources` when a proof is written."""

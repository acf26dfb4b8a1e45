"""Scripts of the pairs stage that run INSIDE the sandbox, kept as real files and read with :mod:`importlib.resources`.

Each reads its settings from a JSON file written beside it in the sandbox's working directory; none imports
the project (the sandbox's interpreter is the library's, not the project's).
"""

from __future__ import annotations

from importlib import resources


def source(name: str) -> str:
    """The text of one script of this package (``resolve_imports.py``)."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")

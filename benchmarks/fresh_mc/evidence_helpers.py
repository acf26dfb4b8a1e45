"""Helpers the evidence snippets of ``truth.yaml`` import (``check_truth.py`` puts this folder on the path).

Everything printed is normalised so that it is the same from run to run: object addresses, pydantic's
documentation links and runs of whitespace are folded.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")


def norm(text: str) -> str:
    """One line: whitespace runs folded, ``0x7f..`` addresses and pydantic's versioned doc links made stable."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x_", text)
    text = re.sub(r"https://errors\.pydantic\.dev/[^/\s]+/", "https://errors.pydantic.dev/_/", text)
    return " ".join(text.split())


def run(label: str, fn, *args, **kwargs):
    """Call ``fn`` (awaited when it returns a coroutine) and print ``label: no error -> repr`` or ``label: raised Type: message``."""
    try:
        result = fn(*args, **kwargs)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
    except Exception as exc:  # the evidence is the exception itself
        print(f"{label}: raised {type(exc).__module__}.{type(exc).__name__}: {norm(str(exc))}")
        return None
    print(f"{label}: no error -> {norm(repr(result))}")
    return result


def attr_doc(cls: type, name: str) -> str:
    """The docstring written under attribute ``name`` in the source of ``cls`` or a base class (pydantic keeps none)."""
    for klass in cls.__mro__:
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        match = re.search(rf"^\s+{re.escape(name)}\s*:[^\n]*\n\s+(?:\"\"\"|''')(.*?)(?:\"\"\"|''')", source, re.S | re.M)
        if match:
            return norm(match.group(1))
    return "<no attribute docstring>"


def doc(obj, words: int = 40) -> str:
    """The first ``words`` words of an object's docstring, normalised."""
    return " ".join(norm(inspect.getdoc(obj) or "<no docstring>").split()[:words])


def has(module: str, *names: str) -> None:
    """Print, for each name, whether ``module`` has it."""
    mod = importlib.import_module(module)
    print(module, {name: hasattr(mod, name) for name in names})


def defined_anywhere(*names: str) -> None:
    """Print, for each name, whether any module of google.adk defines a class or function of that name."""
    import google.adk

    root = Path(google.adk.__file__).parent
    texts = [path.read_text(encoding="utf-8", errors="replace") for path in sorted(root.rglob("*.py"))]
    found = {name: any(re.search(rf"^\s*(?:class|def|async def)\s+{re.escape(name)}\b", text, re.M) for text in texts) for name in names}
    print("defined in google.adk:", found)

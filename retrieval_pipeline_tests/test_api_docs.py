"""``docs/api.md``: each ``python`` block runs (in order, one namespace) and prints the ``text`` block after it."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

BLOCK = re.compile(r"```(python|text)\n(.*?)```", re.DOTALL)


def _normalised(text: str) -> list[str]:
    """Lines with runs of whitespace made one space (the page shows trec_eval's tabs as they render)."""
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def test_api_page_examples_print_what_the_page_shows(project_root: Path) -> None:
    page = (project_root / "docs" / "api.md").read_text(encoding="utf-8")
    blocks = BLOCK.findall(page)
    pairs = [(code, shown) for (kind, code), (next_kind, shown) in zip(blocks, blocks[1:]) if kind == "python" and next_kind == "text"]
    assert len(pairs) == 2 == sum(kind == "python" for kind, _ in blocks)
    namespace: dict[str, object] = {"__name__": "docs_api"}
    for code, shown in pairs:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "docs/api.md", "exec"), namespace)
        assert _normalised(printed.getvalue()) == _normalised(shown)

"""Read a YAML file with errors that name the file, the line and the column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from retrieval_pipeline.core.errors import InputError

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when PyYAML has it


def read_yaml(path: Path, what: str) -> Any:
    """Parse ``path``; unreadable files and syntax errors raise :class:`InputError` naming the file.

    Args:
        path: The YAML file.
        what: What the file is, for the message ("suite file", "ranked targets", ...).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what}: {exc}", path=str(path)) from exc
    try:
        return yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as exc:
        raise InputError(f"YAML syntax error{_position(exc)}: {exc}", path=str(path)) from exc


def _position(exc: yaml.YAMLError) -> str:
    """The 1-based line and column of a YAML error, or '' when PyYAML gives none."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is None:
        return ""
    return f" at line {mark.line + 1}, column {mark.column + 1}"

"""JSON answers: an answer's text parsed and validated against a pydantic schema, and the re-ask after a bad one."""

from __future__ import annotations

import json
import re
from typing import Any

import pydantic

Schema = type[pydantic.BaseModel]

_OPEN_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n?")


def strip_fences(text: str) -> str:
    """Return ``text`` without a surrounding Markdown code fence (```json ... ```)."""
    body = text.strip()
    if not body.startswith("```"):
        return body
    body = _OPEN_FENCE.sub("", body, count=1)
    if body.rstrip().endswith("```"):
        body = body.rstrip()[:-3]
    return body.strip()


def parse_json_answer(text: str, schema: Schema) -> tuple[dict[str, Any] | None, str | None]:
    """Parse and validate an answer; return ``(value, None)`` or ``(None, reason)``."""
    try:
        data = json.loads(strip_fences(text))
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at char {exc.pos})"
    try:
        model = schema.model_validate(data)
    except pydantic.ValidationError as exc:
        return None, f"schema violation ({_validation_summary(exc)})"
    return model.model_dump(mode="json"), None


def _validation_summary(exc: pydantic.ValidationError, limit: int = 5) -> str:
    """Return the first few validation errors as ``loc: message`` pairs."""
    parts = [f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:limit]]
    return "; ".join(parts)


def still_valid(value: dict[str, Any], schema: Schema) -> bool:
    """Whether a cached value still validates against ``schema``."""
    try:
        schema.model_validate(value)
    except pydantic.ValidationError:
        return False
    return True


def correction(reason: str) -> str:
    """Return the user message that re-asks after a bad answer."""
    return (
        f"Your previous answer was rejected: {reason[:300]}. "
        "Reply again with only one JSON object that follows the requested format; no prose, no code fences."
    )

"""Dataclass rows to and from pandas frames (dict fields travel as JSON text so Parquet stays flat)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields
from typing import Any, TypeVar

import numpy as np
import pandas as pd

T = TypeVar("T")


def to_frame(rows: Iterable[Any], cls: type, json_fields: Sequence[str] = ()) -> pd.DataFrame:
    """A frame with one column per dataclass field; ``json_fields`` are stored as JSON strings."""
    records = []
    for row in rows:
        rec = asdict(row)
        for name in json_fields:
            rec[name] = json.dumps(rec[name], sort_keys=True, default=str)
        records.append(rec)
    return pd.DataFrame(records, columns=[f.name for f in fields(cls)])


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, float) and np.isnan(value):
        return None
    return value


def from_frame(frame: pd.DataFrame, cls: type[T], json_fields: Sequence[str] = ()) -> list[T]:
    """Inverse of :func:`to_frame` (list columns come back as lists, NaN as None)."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    out = []
    for rec in frame[names].to_dict("records"):
        rec = {k: _plain(v) for k, v in rec.items()}
        for name in json_fields:
            rec[name] = json.loads(rec[name]) if rec[name] is not None else None
        out.append(cls(**rec))
    return out

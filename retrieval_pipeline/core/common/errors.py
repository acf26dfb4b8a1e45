"""Errors that name the file and the case, so bad input is fixed in one look."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input that stops a stage: names the file and, where known, the case."""

    def __init__(self, message: str, *, path: str | None = None, case_id: str | None = None):
        self.path = path
        self.case_id = case_id
        where = ", ".join(p for p in (f"file {path}" if path else "", f"case {case_id!r}" if case_id else "") if p)
        super().__init__(f"{where}: {message}" if where else message)

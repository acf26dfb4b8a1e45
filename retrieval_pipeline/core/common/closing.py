"""``with obj: ...`` for objects that hold a connection: the block's end calls ``close()``."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_T = TypeVar("_T", bound="Closing")


class Closing:
    """Mixin: entering returns the object itself; leaving calls its ``close()``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

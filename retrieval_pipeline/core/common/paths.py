"""Paths that data names stay inside an allowed root; files that data names are read with bounds.

Rules:

* :func:`resolve_inside`: a path named by data (a suite's ``fixed_file``, a dataset name in an output
  path) is taken relative to ``root`` and must *resolve* inside it: ``..`` segments, absolute paths and
  symlinks are followed first and then checked, so a symlink inside the root that points out of it is
  refused like ``../../etc/passwd`` is. A refusal is :class:`PathRefused`; nothing is read.
* :func:`check_name`: names that become one folder (datasets) are ``[A-Za-z0-9_.-]+``, start with a
  letter, digit or ``_``, hold no ``..`` and are at most :data:`MAX_NAME_LENGTH` characters.
* :func:`child_path`: an output path ``root/part/part/...`` where every part is one plain path component.
* :data:`PROJECT_ROOT` and :data:`CACHE_ROOT`: the checkout, and its ``data/cache`` (computed here only).
* :func:`read_bounded`: reads a *regular* file of at most ``max_bytes`` (a FIFO, a device such as
  ``/dev/zero`` or an oversized file is refused before anything is read); with ``follow_symlinks=False``
  the last component must not be a symlink (a path checked at load time cannot be swapped for one later).

The dataset registry is trusted configuration and is not held to a root (see ``core/registry.py``).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from retrieval_pipeline.core.common.errors import InputError

#: The checkout this package runs from: ``data/config``, ``data/out`` and ``data/cache`` are under it.
PROJECT_ROOT = Path(__file__).resolve().parents[3]
#: The caches' default folder (models, ONNX graphs, embeddings, fine-tunes, corpora); each has its own sub-folder.
CACHE_ROOT = PROJECT_ROOT / "data" / "cache"
#: Longest dataset name accepted.
MAX_NAME_LENGTH = 100
#: Most characters of a hostile path (or name) repeated in a message.
_SHOWN = 120
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class PathRefused(InputError):
    """A path named by data resolves outside its allowed root, or is a file that may not be read.

    ``reason`` is the message without the file prefix, for callers that name the file themselves.
    """

    def __init__(self, reason: str, *, path: str | None = None) -> None:
        self.reason = reason
        super().__init__(reason, path=path)


def shown(text: object) -> str:
    """``repr`` of ``text``, cut to a length fit for a one-line message."""
    value = str(text)
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


def resolve_inside(root: str | Path, named: str | Path, what: str) -> Path:
    """Resolve ``named`` against ``root``; refuse it unless the result (symlinks followed) is inside ``root``.

    Args:
        root: The allowed root (resolved itself, so a root reached through a symlink is fine).
        named: The path as data wrote it: relative to ``root``, or absolute.
        what: What the path is, for the message (``"fixed_file"``, ``"index folder"``, ...).

    Returns:
        The resolved absolute path, inside ``root`` (it need not exist).

    Raises:
        PathRefused: Empty, NUL byte, unresolvable (symlink loop), or outside ``root``.
    """
    text = str(named)
    if not text.strip() or "\0" in text:
        raise PathRefused(f"{what} {shown(text)} is not a usable path")
    real_root = Path(root).resolve()
    try:
        resolved = (real_root / text).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise PathRefused(f"{what} {shown(text)} cannot be resolved ({type(exc).__name__}): refused, not read") from exc
    if resolved == real_root or resolved.is_relative_to(real_root):
        return resolved
    raise PathRefused(_outside(real_root, text, resolved, what))


def _outside(root: Path, text: str, resolved: Path, what: str) -> str:
    """The refusal message: says whether a symlink, an absolute path or ``..`` led out of ``root``."""
    lexical = Path(os.path.normpath(root / text))
    if lexical.is_relative_to(root):
        how = f"goes through a symlink to {shown(resolved)}"
    elif Path(text).is_absolute():
        how = "is an absolute path"
    else:
        how = f"resolves to {shown(resolved)}"
    return f"{what} {shown(text)} {how}, outside the allowed root {root}: refused, not read"


def check_name(name: object, what: str = "dataset name") -> str:
    """Return ``name`` when it is a safe single folder name; else raise :class:`InputError` saying why."""
    if not isinstance(name, str):
        raise InputError(f"{what} {shown(name)} must be a string, got {type(name).__name__}")
    if len(name) > MAX_NAME_LENGTH:
        raise InputError(f"{what} {shown(name)} is longer than {MAX_NAME_LENGTH} characters")
    if not _NAME.fullmatch(name) or ".." in name:
        raise InputError(
            f"{what} {shown(name)} is not allowed: use letters, digits and _ . - (starting with a letter, digit or _), and no '..'"
        )
    return name


def child_path(root: str | Path, *parts: str, what: str) -> Path:
    """``root/part/...`` resolved, each part one plain component, the result inside ``root``.

    Raises:
        PathRefused: A part is empty, ``.``/``..``, holds a separator or NUL, or the path leaves ``root``.
    """
    for part in parts:
        if part in ("", ".", "..") or any(c in part for c in ("/", "\\", "\0")):
            raise PathRefused(f"{what}: {shown(part)} is not a single folder or file name: refused")
    return resolve_inside(root, Path(*parts), what)


def read_bounded(path: str | Path, what: str, max_bytes: int, *, follow_symlinks: bool = True, limit_hint: str = "") -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; the limit is checked before reading.

    Args:
        path: The file.
        what: What it is, for messages.
        max_bytes: The size limit.
        follow_symlinks: False: the last component must not be a symlink.
        limit_hint: Appended to the too-large message (where the limit is set).

    Raises:
        PathRefused: Not a regular file, larger than ``max_bytes``, or a symlink when ``follow_symlinks`` is False.
        OSError: Missing or unreadable.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise PathRefused(f"{what} is a symlink: refused, not read", path=str(path)) from exc
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"{what} is not a regular file: refused, not read", path=str(path))
        if info.st_size > max_bytes:
            raise PathRefused(_too_large(what, info.st_size, max_bytes, limit_hint), path=str(path))
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # the file grew while being read
        raise PathRefused(_too_large(what, len(data), max_bytes, limit_hint), path=str(path))
    return data


def _too_large(what: str, size: int, limit: int, hint: str) -> str:
    return f"{what} is {size:,} bytes, over the limit of {limit:,} bytes{hint}: refused, not read"


def read_text_bounded(path: str | Path, what: str, max_bytes: int, *, follow_symlinks: bool = True) -> str:
    """:func:`read_bounded` decoded as UTF-8 (a decoding error is ``UnicodeDecodeError``)."""
    return read_bounded(path, what, max_bytes, follow_symlinks=follow_symlinks).decode("utf-8")

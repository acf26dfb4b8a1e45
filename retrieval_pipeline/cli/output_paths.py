"""Output paths the command lines write: checked before the work, written atomically, refused in one line.

A bad output path (a missing folder, a folder in place of the file, a device, ``/proc/self/mem``, a folder
without write permission) is an :class:`OutputPathError`: each command line prints it as one ``error:``
line on stderr and exits with code 2, never a traceback, and checks it before computing anything.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from retrieval_pipeline.core.common.atomic import atomic_write_text

#: Kernel interfaces that look like regular files (``/proc/self/mem``): never an output.
_KERNEL_FILES = (Path("/proc"), Path("/sys"))


class OutputPathError(ValueError):
    """An output path that cannot be written; the message names the option, the path and why."""


def check_output_file(path: Path, what: str) -> Path:
    """``path`` when a file can be written there; else :class:`OutputPathError` naming ``what`` and the cause.

    The folder must exist already (a typo in it is not silently created); an existing target must be a
    regular file; the folder must be writable (the file is replaced through a temp file beside it).
    """
    parent = path.parent if str(path.parent) else Path(".")
    resolved = Path(os.path.realpath(path))
    if any(resolved == root or root in resolved.parents for root in _KERNEL_FILES):
        raise OutputPathError(f"{what} {path}: {resolved} is a kernel interface, not a file to write output to")
    if not parent.is_dir():
        why = "does not exist" if not parent.exists() else "is not a folder"
        raise OutputPathError(f"{what} {path}: its folder {parent} {why}")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputPathError(f"{what} {path}: {exc.strerror or exc}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise OutputPathError(f"{what} {path} is {kind}: give a file path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{what} {path}: the folder {parent} is not writable")
    return path


def check_output_folder(path: Path, what: str) -> Path:
    """``path`` as a writable folder (created with its parents); else :class:`OutputPathError`."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{what} {path}: cannot create it ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputPathError(f"{what} {path}: the folder is not writable")
    return path


def write_output_text(path: Path, text: str, what: str) -> Path:
    """Write ``text`` to ``path`` atomically; any OS error is an :class:`OutputPathError` naming ``what``."""
    check_output_file(path, what)
    try:
        return atomic_write_text(path, text)
    except OSError as exc:
        raise OutputPathError(f"{what} {path}: cannot write it ({exc.strerror or exc})") from None

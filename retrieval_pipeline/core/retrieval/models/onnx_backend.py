"""The ``onnx_int8`` encoder backend: a sentence-transformers model exported once to ONNX, int8-quantised, run by onnxruntime.

**Why not sentence-transformers' own ``backend="onnx"``.** It needs ``optimum.onnxruntime``, which now
ships in ``optimum-onnx``; every ``optimum-onnx`` release pins ``transformers<4.58`` while
sentence-transformers 6 needs ``transformers>=5`` (``pip install sentence-transformers[onnx]``
downgrades both), and the only ``optimum`` that still carries ``optimum.onnxruntime`` itself (1.17.1)
fails to import under transformers 5. So the model is exported here (:mod:`.onnx_export`), with torch's own exporter and
onnxruntime's quantiser, and run with onnxruntime, the model's own tokenizer and the model's pooling.

**Export** (:func:`~.onnx_export.export_qint8`, run once per model, :mod:`.onnx_export`): the model traced with its
pooling, int8-quantised per channel, checked against the float graph; its tokenizer saved beside the graph. Three
recipes (:data:`RECIPE_OPTIONS`), each with its own backend name and cache subfolder.

**Cache** (:func:`ensure_exported`): ``<cache_dir>/<16 hex of the weights' SHA-256>-<8 hex of the
configuration's>/`` holds ``model_qint8.onnx``, ``tokenizer.json`` and ``export.json`` (how the graph
was made: pooling, inputs, dimension, the model's ``max_seq_length``, the recipe and the library
versions). Each file is written atomically (:func:`~retrieval_pipeline.core.common.atomic.atomic_write`),
``export.json`` last, so a folder whose ``export.json`` names the current :data:`RECIPE` is complete;
an export holds a lock file in the folder, so two processes never export one model twice. The default
cache folder is ``<project>/data/cache/onnx`` (``RETRIEVAL_PIPELINE_ONNX_CACHE`` overrides it).

**Running** (:class:`OnnxSentenceModel`): texts are tokenized (truncated to ``max_seq_length`` tokens,
special tokens included, exactly as sentence-transformers does: the token ids are equal), sorted by
length so that a batch pads little, padded per batch, run, and the vectors L2-normalised.

Importing this module imports neither torch nor onnxruntime: export imports torch, running imports
onnxruntime and tokenizers, each on first use.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from retrieval_pipeline.core.common import stop
from retrieval_pipeline.core.common.atomic import atomic_write, atomic_write_text, file_lock
from retrieval_pipeline.core.common.paths import CACHE_ROOT
from retrieval_pipeline.core.retrieval.models.onnx_export import export_qint8

#: The encoder backends a dense retriever can choose.
Backend = Literal["torch", "onnx_int8", "onnx_int8_ffn_fp32", "onnx_int8_outliers_fp32"]
BACKENDS: tuple[str, ...] = ("torch", "onnx_int8", "onnx_int8_ffn_fp32", "onnx_int8_outliers_fp32")
#: The quantised graph, the tokenizer and the export record inside a model's cache folder.
ONNX_FILE = "model_qint8.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "export.json"
LOCK_FILE = ".export.lock"
#: How the graph is made; a cache folder whose ``export.json`` names another recipe is exported again.
#: The vectors of a new recipe may differ: give it a new backend name too, so that ``model_id`` changes.
RECIPE = "torchscript-opset17-eager+quantize_dynamic-qint8-per-channel/v1"
#: The second recipe (backend ``onnx_int8_ffn_fp32``): only MatMuls with a constant weight quantised, and the
#: feed-forward output MatMuls (:data:`~.onnx_export.FFN_OUTPUT_MATMUL`) left in fp32. all-mpnet-base-v2's outlier activations
#: at those MatMuls' inputs took its cosine to torch to .885 under :data:`RECIPE`; this one gives .994 (issue 38).
RECIPE_FFN_FP32 = "torchscript-opset17-eager+quantize_dynamic-qint8-per-channel-constB-ffn-output-fp32/v1"
#: Where the second recipe's graphs are cached, under the cache folder (its files have the same names).
FFN_FP32_SUBFOLDER = "ffn_output_fp32"
#: The third recipe (backend ``onnx_int8_outliers_fp32``, :mod:`~retrieval_pipeline.core.retrieval.models.onnx_outliers`):
#: only the outlier input channels of the feed-forward output MatMuls (found on calibration texts) run in fp32, every
#: other MatMul is quantised; the embeddings stay fp32. all-mpnet-base-v2: cosine .994 at the first recipe's speed.
RECIPE_OUTLIERS_FP32 = "torchscript-opset17-eager+ffn-outlier-channels-fp32-x6+quantize_dynamic-qint8-per-channel-matmul/v1"
#: Where the third recipe's graphs are cached, under the cache folder.
OUTLIERS_FP32_SUBFOLDER = "ffn_outlier_channels_fp32"
#: The keyword arguments of :func:`export_qint8` that make each recipe's graph.
RECIPE_OPTIONS: dict[str, dict[str, bool]] = {
    RECIPE: {},
    RECIPE_FFN_FP32: {"ffn_output_fp32": True},
    RECIPE_OUTLIERS_FP32: {"outlier_channels_fp32": True},
}
#: Overrides the default cache folder.
CACHE_ENV = "RETRIEVAL_PIPELINE_ONNX_CACHE"
#: onnxruntime's intra-op threads when an encoder names none (unset: onnxruntime's default, one per physical
#: core). Processes that share the cores, such as parallel test workers, set it to their share: two processes
#: with two spinning threads each on two cores spent about 1.5x the CPU time of one thread each on the same texts.
THREADS_ENV = "RETRIEVAL_PIPELINE_THREADS"

#: ``export(model_folder, onnx_path, tokenizer_path) -> manifest``: what :func:`ensure_exported` calls.
Exporter = Callable[[Path, Path, Path], dict[str, Any]]


def default_cache_dir() -> Path:
    """``$RETRIEVAL_PIPELINE_ONNX_CACHE`` when set, else ``<project>/data/cache/onnx``."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    return Path(configured).expanduser() if configured else CACHE_ROOT / "onnx"


def default_threads() -> int | None:
    """``$RETRIEVAL_PIPELINE_THREADS`` as a positive int when set, else ``None`` (onnxruntime decides).

    Raises:
        ValueError: It is set to anything but a positive whole number.
    """
    configured = os.environ.get(THREADS_ENV, "").strip()
    if not configured:
        return None
    if not configured.isdigit() or int(configured) < 1:
        raise ValueError(f"{THREADS_ENV} must be a positive whole number of threads, got {configured!r}")
    return int(configured)


def cache_folder(cache_dir: str | Path, weights_sha256: str, config_sha256: str) -> Path:
    """The cache folder of one model: ``<cache_dir>/<16 hex of weights>-<8 hex of config>``."""
    return Path(cache_dir) / f"{weights_sha256[:16]}-{config_sha256[:8]}"


# -- the cache --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportedModel:
    """A complete cache folder.

    Attributes:
        folder: The cache folder.
        manifest: The content of its ``export.json``.
    """

    folder: Path
    manifest: dict[str, Any]

    @property
    def onnx_path(self) -> Path:
        """The quantised graph."""
        return self.folder / ONNX_FILE

    @property
    def tokenizer_path(self) -> Path:
        """The saved tokenizer."""
        return self.folder / TOKENIZER_FILE


def read_exported(folder: Path, recipe: str = RECIPE) -> ExportedModel | None:
    """The cache folder when it is complete and made by ``recipe`` (default the current :data:`RECIPE`), else ``None``."""
    manifest_path = folder / MANIFEST_FILE
    if not (manifest_path.is_file() and (folder / ONNX_FILE).is_file() and (folder / TOKENIZER_FILE).is_file()):
        return None
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return ExportedModel(folder, manifest) if manifest.get("recipe") == recipe else None


def ensure_exported(
    model_folder: str | Path,
    weights_sha256: str,
    config_sha256: str,
    cache_dir: str | Path | None = None,
    exporter: Exporter | None = None,
    recipe: str = RECIPE,
) -> ExportedModel:
    """The model's quantised graph from the cache, exported first when it is not there.

    Args:
        model_folder: The sentence-transformers model folder.
        weights_sha256: SHA-256 of its weights (names the cache folder).
        config_sha256: SHA-256 of its configuration files (names the cache folder).
        cache_dir: Where cache folders live (default: :func:`default_cache_dir`).
        exporter: What makes the files (default: :func:`export_qint8`); tests pass a fake.
        recipe: The recipe the exporter follows, recorded in ``export.json`` and required of a cached folder.

    Returns:
        The complete cache folder.
    """
    folder = cache_folder(cache_dir if cache_dir is not None else default_cache_dir(), weights_sha256, config_sha256)
    found = read_exported(folder, recipe)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / LOCK_FILE):
        found = read_exported(folder, recipe)  # another process may have exported it while this one waited
        if found is not None:
            return found
        export = exporter or export_qint8
        with tempfile.TemporaryDirectory(prefix="onnx-export-", dir=folder) as scratch:
            onnx_temp, tokenizer_temp = Path(scratch) / ONNX_FILE, Path(scratch) / TOKENIZER_FILE
            manifest = export(Path(model_folder), onnx_temp, tokenizer_temp)
            manifest = {
                **manifest,
                "recipe": recipe,
                "source_folder": str(model_folder),
                "weights_sha256": weights_sha256,
                "config_sha256": config_sha256,
            }
            atomic_write(folder / ONNX_FILE, lambda temp: os.replace(onnx_temp, temp))
            atomic_write(folder / TOKENIZER_FILE, lambda temp: os.replace(tokenizer_temp, temp))
        atomic_write_text(folder / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True))
    found = read_exported(folder, recipe)
    if found is None:  # pragma: no cover - the files were just written
        raise RuntimeError(f"{folder}: the ONNX export left an incomplete cache folder")
    return found


# -- running ---------------------------------------------------------------------------------------


class OnnxSentenceModel:
    """An exported model run by onnxruntime on CPU (see the module docstring).

    Args:
        exported: The cache folder.
        max_seq_length: Truncate inputs to this many tokens (default: the model's own setting).
        threads: onnxruntime intra-op threads (default: :func:`default_threads`, else onnxruntime's, one per
            physical core).

    Attributes:
        max_seq_length: The truncation length in use.
        pooling: The pooling the graph does.
    """

    def __init__(self, exported: ExportedModel, max_seq_length: int | None = None, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.exported = exported
        manifest = exported.manifest
        self.max_seq_length = int(max_seq_length or manifest["max_seq_length"])
        self.pooling = str(manifest["pooling"])
        self._dim = int(manifest["dim"])
        self._inputs = list(manifest["inputs"])
        self._pad_id = int(manifest.get("pad_token_id", 0))
        self.tokenizer = Tokenizer.from_file(str(exported.tokenizer_path))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_seq_length)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        threads = threads if threads is not None else default_threads()
        if threads is not None:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(exported.onnx_path), options, providers=["CPUExecutionProvider"])

    def get_embedding_dimension(self) -> int:
        """The length of every vector."""
        return self._dim

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed ``texts``: an ``(n, dim)`` float32 array of unit rows, in input order.

        Args:
            texts: The texts.
            batch_size: Texts per run of the graph.
        """
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch([str(t) for t in texts])
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        for start in range(0, len(order), batch_size):
            stop.check()  # a signal to the runner stops the embedding between batches
            rows = order[start : start + batch_size]
            out[rows] = self.session.run(None, self._feed([encodings[i] for i in rows]))[0]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _feed(self, encodings: Sequence[Any]) -> dict[str, np.ndarray]:
        """The graph's inputs for one batch, padded on the right to its longest text."""
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = 1
            types[row, :n] = encoding.type_ids
        tensors = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return {name: tensors[name] for name in self._inputs}

    def __repr__(self) -> str:
        return f"OnnxSentenceModel({self.exported.onnx_path}, max_seq_length={self.max_seq_length})"

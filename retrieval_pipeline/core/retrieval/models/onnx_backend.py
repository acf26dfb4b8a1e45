"""The ``onnx_int8`` encoder backend: a sentence-transformers model exported once to ONNX, int8-quantised, run by onnxruntime.

**Why not sentence-transformers' own ``backend="onnx"``.** It needs ``optimum.onnxruntime``, which now
ships in ``optimum-onnx``; every ``optimum-onnx`` release pins ``transformers<4.58`` while
sentence-transformers 6 needs ``transformers>=5`` (``pip install sentence-transformers[onnx]``
downgrades both), and the only ``optimum`` that still carries ``optimum.onnxruntime`` itself (1.17.1)
fails to import under transformers 5. So the model is exported here, with torch's own exporter and
onnxruntime's quantiser, and run with onnxruntime, the model's own tokenizer and the model's pooling.

**Export** (:func:`export_qint8`, run once per model): the model is loaded with sentence-transformers
(eager attention, which traces to a plain graph), wrapped so that the graph takes the tokenizer's
tensors (``input_ids``, ``attention_mask`` and, for BERT-like models, ``token_type_ids``, with dynamic
batch and sequence axes) and returns the pooled sentence vector (the model's own pooling: mean over
the unmasked tokens, the ``[CLS]`` token or the max), traced with ``torch.onnx.export`` (TorchScript
exporter, opset :data:`OPSET`), then dynamically quantised with
``onnxruntime.quantization.quantize_dynamic``: int8 weights per output channel, activations quantised
per batch at run time. Per-channel weights matter: per-tensor int8 gave a cosine of 0.95 to the torch
vectors on NQ passages, per-channel 0.994. The quantised graph is then run beside the float one on the export's sample
(:func:`quantised_agreement`): below a cosine of :data:`MIN_EXPORT_COSINE` the export is refused, naming
backend ``torch`` (all-mpnet-base-v2's int8 graph gives about 0.05 on this project's AVX2 machine).
Two more recipes serve models with outlier activations (:data:`RECIPE_OPTIONS`): :data:`RECIPE_FFN_FP32` keeps the
feed-forward output MatMuls in fp32, :data:`RECIPE_OUTLIERS_FP32` only their outlier input channels
(:mod:`~retrieval_pipeline.core.retrieval.models.onnx_outliers`); each has its own backend name and cache subfolder. The tokenizer transformers uses (its fast backend) is saved
beside the graph, so running needs neither torch nor transformers.

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

import contextlib
import json
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np

from retrieval_pipeline.core.common import stop
from retrieval_pipeline.core.common.atomic import atomic_write, atomic_write_text, file_lock
from retrieval_pipeline.core.common.paths import CACHE_ROOT
from retrieval_pipeline.core.retrieval.models.onnx_outliers import (
    CALIBRATION_TEXTS,
    OUTLIER_FACTOR,
    ffn_input_maxima,
    fp32_parts,
    split_outlier_channels,
)

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
#: feed-forward output MatMuls (:data:`FFN_OUTPUT_MATMUL`) left in fp32. all-mpnet-base-v2's outlier activations
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
#: The traced graph's feed-forward output MatMuls (``.../encoder/layer.N/output/dense/MatMul``; BERT's attention
#: output, ``layer.N/attention/output/dense``, does not match).
FFN_OUTPUT_MATMUL = re.compile(r"layer\.\d+/output/dense/MatMul$")
#: The ONNX opset of the export.
OPSET = 17
#: The export is refused when a quantised vector of its sample has a smaller cosine to the float graph's.
#: all-MiniLM-L6-v2 gives about 0.99; all-mpnet-base-v2 about 0.05 on an AVX2 CPU without VNNI, where
#: onnxruntime's u8s8 integer kernels can saturate.
MIN_EXPORT_COSINE = 0.95
#: Overrides the default cache folder.
CACHE_ENV = "RETRIEVAL_PIPELINE_ONNX_CACHE"
#: onnxruntime's intra-op threads when an encoder names none (unset: onnxruntime's default, one per physical
#: core). Processes that share the cores, such as parallel test workers, set it to their share: two processes
#: with two spinning threads each on two cores spent about 1.5x the CPU time of one thread each on the same texts.
THREADS_ENV = "RETRIEVAL_PIPELINE_THREADS"
#: sentence-transformers modules the export reproduces; anything else (a Dense layer, a router) is refused.
SUPPORTED_MODULES = frozenset({"Transformer", "Pooling", "Normalize"})
#: Pooling modes the export reproduces.
SUPPORTED_POOLING = frozenset({"mean", "cls", "max"})
#: The graph's possible inputs, in the order the wrapper takes them.
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

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


# -- what a folder can be exported ------------------------------------------------------------------


def check_onnx_compatible(folder: str | Path) -> str:
    """Refuse a model folder the export cannot reproduce; read JSON files only (no torch).

    A folder without ``modules.json`` is a plain Hugging Face model, which sentence-transformers runs
    with mean pooling.

    Args:
        folder: The model folder.

    Returns:
        The pooling mode (``mean``, ``cls`` or ``max``).

    Raises:
        ValueError: A module other than Transformer, Pooling and Normalize, or another pooling mode.
    """
    folder = Path(folder)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return "mean"
    modules = json.loads(modules_file.read_text(encoding="utf-8"))
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    unsupported = [k for k in kinds if k not in SUPPORTED_MODULES]
    if unsupported or not kinds or kinds[0] != "Transformer":
        raise ValueError(
            f"{folder}: backend onnx_int8 runs Transformer + Pooling (+ Normalize) models; modules.json lists {kinds} "
            "(use backend: torch for this model)"
        )
    pooling = "mean"
    for module in modules:
        if str(module.get("type", "")).endswith("Pooling"):
            pooling = _pooling_mode(folder / str(module.get("path", "")))
    if pooling not in SUPPORTED_POOLING:
        raise ValueError(f"{folder}: backend onnx_int8 supports {sorted(SUPPORTED_POOLING)} pooling, the model uses {pooling!r}")
    return pooling


def _pooling_mode(module_folder: Path) -> str:
    """The pooling mode written in a Pooling module's ``config.json`` (either configuration style)."""
    path = module_folder / "config.json"
    if not path.is_file():
        return "mean"
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("pooling_mode"):
        return str(config["pooling_mode"])
    flags = {
        "cls": "pooling_mode_cls_token",
        "mean": "pooling_mode_mean_tokens",
        "max": "pooling_mode_max_tokens",
        "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
        "weightedmean": "pooling_mode_weightedmean_tokens",
        "lasttoken": "pooling_mode_lasttoken",
    }
    chosen = [mode for mode, key in flags.items() if config.get(key)]
    return "+".join(chosen) if chosen else "mean"


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


# -- export ----------------------------------------------------------------------------------------


def export_qint8(
    model_folder: Path, onnx_path: Path, tokenizer_path: Path, *, ffn_output_fp32: bool = False, outlier_channels_fp32: bool = False
) -> dict[str, Any]:
    """Export a sentence-transformers model to an int8-quantised ONNX graph (see the module docstring).

    Args:
        model_folder: The model folder (loaded offline, on CPU).
        onnx_path: Where the quantised graph is written.
        tokenizer_path: Where the tokenizer is saved (``tokenizers`` JSON).
        ffn_output_fp32: :data:`RECIPE_FFN_FP32`: quantise only MatMuls with a constant weight and leave the
            feed-forward output MatMuls in fp32 (a graph without them is refused).
        outlier_channels_fp32: :data:`RECIPE_OUTLIERS_FP32`: only the outlier input channels of the feed-forward output
            MatMuls in fp32 (:mod:`~retrieval_pipeline.core.retrieval.models.onnx_outliers`), MatMuls only quantised.

    Returns:
        The manifest: ``pooling``, ``inputs``, ``dim``, ``max_seq_length`` (the model's own),
        ``opset``, ``quantization`` and ``versions``.

    Raises:
        ValueError: The model is not Transformer + Pooling (+ Normalize), or its pooling is not supported, or both
            recipes' options are given.
    """
    if ffn_output_fp32 and outlier_channels_fp32:
        raise ValueError("ffn_output_fp32 and outlier_channels_fp32 are two recipes: choose one")
    pooling = check_onnx_compatible(model_folder)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_folder), device="cpu", model_kwargs={"attn_implementation": "eager"})
    transformer = model[0]
    tokenizer = transformer.tokenizer
    inputs = [name for name in INPUT_NAMES if name in tokenizer.model_input_names]
    if "input_ids" not in inputs or "attention_mask" not in inputs:
        raise ValueError(
            f"{model_folder}: the tokenizer gives {tokenizer.model_input_names}; the export needs input_ids and attention_mask"
        )
    dim = model.get_embedding_dimension() if hasattr(model, "get_embedding_dimension") else model.get_sentence_embedding_dimension()
    wrapper = _pooled_encoder(transformer.auto_model, pooling, inputs).eval()
    sample = model.preprocess(["a short text", "a somewhat longer text, so that the first one is padded"])
    args = tuple(sample[name] for name in inputs)
    with tempfile.TemporaryDirectory(prefix="onnx-float-") as scratch:
        float_path = Path(scratch) / "model.onnx"
        with torch.no_grad(), _quiet():
            torch.onnx.export(
                wrapper,
                args,
                str(float_path),
                input_names=inputs,
                output_names=["sentence_embedding"],
                dynamic_axes={**{name: {0: "batch", 1: "sequence"} for name in inputs}, "sentence_embedding": {0: "batch"}},
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
            extra: dict[str, Any] = {"DefaultTensorType": onnx.TensorProto.FLOAT}
            kept_fp32: list[str] = []
            quantised_graph, op_types, outliers = float_path, None, {}
            if outlier_channels_fp32:
                quantised_graph, kept_fp32, outliers = _split_outliers(
                    float_path,
                    [
                        {name: sample[name].numpy() for name in inputs}
                        for sample in (model.preprocess([text]) for text in CALIBRATION_TEXTS)
                    ],
                )
                op_types = ["MatMul"]
            if ffn_output_fp32:
                kept_fp32 = ffn_output_matmuls(onnx.load(str(float_path), load_external_data=False))
                if not kept_fp32:
                    raise ValueError(f"{model_folder}: the traced graph has no feed-forward output MatMul (layer.N/output/dense)")
                extra["MatMulConstBOnly"] = True
            quantize_dynamic(
                str(quantised_graph),
                str(onnx_path),
                weight_type=QuantType.QInt8,
                per_channel=True,
                nodes_to_exclude=kept_fp32,
                op_types_to_quantize=op_types,
                extra_options=extra,
            )
        agreement = quantised_agreement(float_path, onnx_path, {name: sample[name].numpy() for name in inputs})
    if agreement < MIN_EXPORT_COSINE:
        raise ValueError(
            f"{model_folder}: the int8 graph's vectors have a cosine of {agreement:.3f} to the float graph's on the export's sample "
            f"(at least {MIN_EXPORT_COSINE} needed): this recipe does not reproduce the model on this CPU; use backend: torch"
        )
    backend_tokenizer = tokenizer.backend_tokenizer
    backend_tokenizer.no_truncation()
    backend_tokenizer.no_padding()
    backend_tokenizer.save(str(tokenizer_path))
    return {
        "pooling": pooling,
        "inputs": inputs,
        "dim": int(dim),
        "max_seq_length": int(model.max_seq_length),
        "pad_token_id": int(tokenizer.pad_token_id or 0),
        "opset": OPSET,
        "quantization": {
            "method": "quantize_dynamic",
            "weight_type": "QInt8",
            "per_channel": True,
            **({"matmul_const_b_only": True, "fp32_nodes": kept_fp32} if ffn_output_fp32 else {}),
            **(
                {
                    "op_types": op_types,
                    "fp32_nodes": kept_fp32,
                    "outlier_factor": OUTLIER_FACTOR,
                    "calibration_texts": len(CALIBRATION_TEXTS),
                    "outlier_channels": outliers,
                }
                if outlier_channels_fp32
                else {}
            ),
        },
        "float_cosine_min": round(agreement, 6),
        "versions": _versions(),
    }


def _split_outliers(float_path: Path, feeds: Sequence[dict[str, np.ndarray]]) -> tuple[Path, list[str], dict[str, list[int]]]:
    """The third recipe's float graph, written beside ``float_path``: the feed-forward output MatMuls' outlier channels
    (their maxima over ``feeds``) split off (:func:`~retrieval_pipeline.core.retrieval.models.onnx_outliers.split_outlier_channels`).

    Returns:
        The rewritten graph's path, the names of its fp32 MatMuls, and the outlier channels of each MatMul rewritten.

    Raises:
        ValueError: The graph has no feed-forward output MatMul, or none has an outlier channel.
    """
    import onnx

    model = onnx.load(str(float_path))
    matmuls = ffn_output_matmuls(model)
    if not matmuls:
        raise ValueError(f"{float_path}: the traced graph has no feed-forward output MatMul (layer.N/output/dense)")
    outliers = split_outlier_channels(model, ffn_input_maxima(float_path, matmuls, feeds))
    if not outliers:
        raise ValueError(f"{float_path}: no feed-forward output MatMul has an outlier channel; use backend onnx_int8")
    split_path = float_path.with_name("model_outliers_split.onnx")
    onnx.save(model, str(split_path))
    return split_path, fp32_parts(list(outliers)), outliers


def ffn_output_matmuls(graph: Any) -> list[str]:
    """The names of an ONNX graph's feed-forward output MatMuls (:data:`FFN_OUTPUT_MATMUL`), in graph order."""
    return [node.name for node in graph.graph.node if node.op_type == "MatMul" and FFN_OUTPUT_MATMUL.search(node.name)]


def quantised_agreement(float_path: Path, quantised_path: Path, feed: dict[str, np.ndarray]) -> float:
    """The smallest cosine between the float and the quantised graph's outputs on ``feed`` (onnxruntime, CPU)."""
    import onnxruntime as ort

    outputs = []
    for path in (float_path, quantised_path):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        vectors = np.asarray(session.run(None, feed)[0], dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        outputs.append(np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0))
    return float(np.sum(outputs[0] * outputs[1], axis=1).min())


def _pooled_encoder(transformer: Any, pooling: str, inputs: Sequence[str]) -> Any:
    """The transformer followed by the model's pooling, as a ``torch.nn.Module``: tokenizer tensors in, one vector per text out."""
    import torch

    class PooledEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *tensors: Any) -> Any:
            features = dict(zip(inputs, tensors))
            hidden = self.transformer(**features).last_hidden_state
            mask = features["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            if pooling == "cls":
                return hidden[:, 0]
            if pooling == "max":
                return torch.where(mask > 0, hidden, torch.full_like(hidden, -1e9)).max(dim=1).values
            return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)

    return PooledEncoder()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporter's tracer warnings and the quantiser's advice to pre-process (both expected)."""

    class _DropAdvice(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "pre-processing before quantization" not in record.getMessage()

    root = logging.getLogger()
    advice = _DropAdvice()
    root.addFilter(advice)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.removeFilter(advice)


def _versions() -> dict[str, str | None]:
    """Versions of the libraries that shape the graph."""
    found: dict[str, str | None] = {}
    for dist in ("torch", "transformers", "sentence-transformers", "onnx", "onnxruntime", "tokenizers"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
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

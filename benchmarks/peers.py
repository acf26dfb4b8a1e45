"""This project against the strongest peers, side by side, in one run: evaluate, compare and BM25.

It installs nothing: the peers come from the ``peers`` extra (``pip install -e '.[peers]'``: pytrec_eval,
ir_measures, ranx, bm25s). A peer that is not installed is skipped with its reason. Every line prints this
project's time, the peer's and the ratio (``2.0x faster`` means the peer took twice as long).

* **evaluate** on a synthetic set of MS MARCO dev's shape (default 7,000 queries x 1,000 documents x 10 runs;
  graded qrels, 1-3 relevant documents a query with grades 1-3 and 0-2 judged non-relevant, every relevant
  document in the query's candidate window; scores are distinct integers, so no tool meets a tie), five
  metrics (nDCG@10, MAP, recall@100, P@10, MRR), against pytrec_eval, ir_measures and ranx: in memory
  (the qrels and runs as dicts; a peer's own conversion counted) and from TREC files (plain and gzip; each
  run read with the qrels, as a user scoring one run file does). The means' largest difference to
  pytrec_eval's is printed as the parity check.
* **compare**: every pair of the runs on four metrics, Fisher's randomisation test with 10,000 permutations,
  against ranx's ``compare`` (``stat_test="fisher"``). Ours also computes its bootstrap CIs (2,000 resamples).
  The verdicts (raw p <= 0.05, before Holm) are checked equal pair by pair; both p-values are Monte Carlo
  estimates with different generators, so a p near 0.05 can fall on either side: the disagreements are listed
  with both p-values. A peer that runs past ``--peer-timeout`` (in a forked child) is reported as not finished.
* **BM25** against bm25s (Numba backend, ``method="robertson"``, k1 1.5, b 0.75), on the same tokens (this
  project's tokenizer), top 10, batched and one query at a time, on two corpora. Both compute the same function:
  bm25s's Robertson idf clips a negative idf (a term in more than half the documents) to 0, so ours is built with
  ``epsilon=0`` (rank_bm25's floor for those terms, ``epsilon * mean idf``, becomes 0 too; the default 0.25 gives
  them a positive weight, which is what made the top 10 differ on 19-30% of queries); bm25s's term-frequency part
  lacks the constant factor ``k1 + 1``, and it sums in float32. Printed: the share of queries whose positive-score
  top-10 sets are the same, the share that are the same up to ties at the cut (the documents in only one of the two
  sets score, in ours, within a relative 1e-6 of our 10th: a tie or a float32 near-tie, which each tool cuts its
  own way), and the largest relative difference of the two tools' best scores (ours divided by ``k1 + 1``):

  - the known-item corpus ``installed_packages_100k`` (``data/config/datasets.yaml``) and its queries, read from
    the installed-corpus cache (``--build-corpus`` builds it when missing: minutes);
  - a code corpus: ``--code-docs`` chunks of ``--chunk-words`` whitespace-separated words of Python source (the
    standard library's ``.py`` files in sorted path order, then the environment's site-packages, so the same
    environment gives the same corpus), with ``--code-queries`` queries of six distinct tokens of a seeded
    random chunk.

Full scale (the integrator's run), and a quick one::

    .venv/bin/python benchmarks/peers.py
    .venv/bin/python benchmarks/peers.py --queries 700 --code-docs 20000 --code-queries 300
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import itertools
import multiprocessing
import queue
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from retrieval_pipeline.api import compare, evaluate  # noqa: E402
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever  # noqa: E402
from retrieval_pipeline.core.retrieval.engines.tokenize import tokenize  # noqa: E402

#: The metrics of the evaluate lines, as each tool names them.
METRICS = {
    "ours": ["ndcg@10", "map", "recall@100", "P@10", "mrr"],
    "pytrec_eval": ["ndcg_cut_10", "map", "recall_100", "P_10", "recip_rank"],
    "ir_measures": ["nDCG@10", "AP", "R@100", "P@10", "RR"],
    "ranx": ["ndcg@10", "map", "recall@100", "precision@10", "mrr"],
}
#: The four metrics of the compare lines (ours, ranx).
COMPARE_METRICS = (["ndcg@10", "map", "recall@100", "mrr"], ["ndcg@10", "map", "recall@100", "mrr"])
ALPHA = 0.05
PEERS = ("pytrec_eval", "ir_measures", "ranx", "bm25s")
KNOWN_ITEM_DATASET = "installed_packages_100k"
#: BM25's parameters, both tools (rank_bm25's and bm25s's defaults).
K1, B = 1.5, 0.75


# -- output ---------------------------------------------------------------------------------------


def ratio(ours: float, peer: float) -> str:
    """``2.0x faster`` when the peer took twice as long as ours, ``2.0x slower`` the other way round."""
    if ours <= 0 or peer <= 0:
        return "n/a"
    return f"{peer / ours:.1f}x faster" if peer >= ours else f"{ours / peer:.1f}x slower"


class Lines(list):
    """The lines of a section, each printed as it is added (a section takes minutes at full scale)."""

    def append(self, text: str) -> None:
        print(text, flush=True)
        super().append(text)

    def __iadd__(self, texts):  # type: ignore[override]
        for text in texts:
            self.append(text)
        return self


def line(work: str, ours: float, peer_name: str, peer: float | None, note: str = "") -> str:
    """One side-by-side line: the work, both times, the ratio (or why the peer has no time)."""
    if peer is None:
        return f"  {work}: ours {ours:.2f} s | {peer_name}: {note}"
    extra = f" ({note})" if note else ""
    return f"  {work}: ours {ours:.2f} s | {peer_name} {peer:.2f} s | ours {ratio(ours, peer)}{extra}"


def missing_peers() -> dict[str, str]:
    """``{peer: reason}`` for each peer that cannot be imported."""
    return {
        name: f"skipped: {name} is not installed (pip install -e '.[peers]')" for name in PEERS if importlib.util.find_spec(name) is None
    }


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    """``call()`` and its wall time."""
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def _child(call: Callable[[], Any], results: Any) -> None:
    result, seconds = timed(call)
    results.put((result, seconds))


def timed_in_child(call: Callable[[], Any], timeout_s: float) -> tuple[Any, float] | None:
    """``timed(call)`` in a forked child, or None when it runs past ``timeout_s`` (the child is killed)."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_child, args=(call, results))
    child.start()
    try:
        return results.get(timeout=timeout_s)
    except queue.Empty:
        return None
    finally:
        if child.is_alive():
            child.kill()
        child.join()


# -- the synthetic evaluation set -----------------------------------------------------------------


@dataclass
class EvalSet:
    """Qrels and runs as dicts (``{qid: {docid: grade}}``, ``{name: {qid: {docid: score}}}``)."""

    qrels: dict[str, dict[str, int]]
    runs: dict[str, dict[str, dict[str, float]]]


def synthetic_set(n_queries: int, depth: int, n_runs: int, seed: int = 13) -> EvalSet:
    """MS MARCO dev's shape: per query a window of ``1.5 * depth`` candidates, 1-3 graded relevant among them.

    Run ``r`` ranks ``depth`` of the window; a relevant candidate's random key is raised by a run-specific
    quality, so the runs differ in quality. Scores are ``depth - rank`` (distinct integers: no ties).
    """
    rng = np.random.default_rng(seed)
    window = depth + depth // 2
    pool = [f"D{i}" for i in range(max(100_000, window * 2))]
    base = rng.integers(0, len(pool), n_queries)
    n_relevant = rng.integers(1, 4, n_queries)
    n_judged_zero = rng.integers(0, 3, n_queries)
    query_ids = [f"q{i}" for i in range(n_queries)]
    qrels: dict[str, dict[str, int]] = {}
    for q, qid in enumerate(query_ids):  # window positions 0.. are relevant, the next ones judged 0
        judged = {pool[(base[q] + j) % len(pool)]: int(rng.integers(1, 4)) for j in range(n_relevant[q])}
        judged |= {pool[(base[q] + n_relevant[q] + j) % len(pool)]: 0 for j in range(n_judged_zero[q])}
        qrels[qid] = judged
    relevant = np.arange(window)[None, :] < n_relevant[:, None]
    runs: dict[str, dict[str, dict[str, float]]] = {}
    scores = [float(depth - rank) for rank in range(depth)]
    for r in range(n_runs):
        keys = rng.random((n_queries, window)) + relevant * (0.3 + 0.05 * r) * rng.random((n_queries, window))
        ranked = np.argsort(-keys, axis=1)[:, :depth]
        docs = (base[:, None] + ranked) % len(pool)
        runs[f"run{r}"] = {qid: dict(zip([pool[d] for d in docs[q].tolist()], scores)) for q, qid in enumerate(query_ids)}
    return EvalSet(qrels, runs)


def write_files(data: EvalSet, folder: Path) -> dict[str, Any]:
    """The set as TREC files, plain and gzip: ``{"qrels": path, "qrels_gz": path, "runs": [...], "runs_gz": [...]}``."""
    folder.mkdir(parents=True, exist_ok=True)
    qrels_lines = "".join(f"{q} 0 {d} {g}\n" for q, judged in data.qrels.items() for d, g in judged.items())
    paths: dict[str, Any] = {"qrels": folder / "qrels.txt", "qrels_gz": folder / "qrels.txt.gz", "runs": [], "runs_gz": []}
    paths["qrels"].write_text(qrels_lines)
    with gzip.open(paths["qrels_gz"], "wt", compresslevel=1) as handle:
        handle.write(qrels_lines)
    for name, run in data.runs.items():
        text = "".join(
            f"{q} Q0 {d} {rank} {score:g} {name}\n" for q, hits in run.items() for rank, (d, score) in enumerate(hits.items(), start=1)
        )
        plain, packed = folder / f"{name}.txt", folder / f"{name}.txt.gz"
        plain.write_text(text)
        with gzip.open(packed, "wt", compresslevel=1) as handle:
            handle.write(text)
        paths["runs"].append(plain)
        paths["runs_gz"].append(packed)
    return paths


# -- evaluate ---------------------------------------------------------------------------------------


def ours_means(qrels: Any, run: Any) -> list[float]:
    result = evaluate(qrels, run, METRICS["ours"])
    return [result[m] for m in METRICS["ours"]]


def pytrec_memory(data: EvalSet) -> list[list[float]]:
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(data.qrels, set(METRICS["pytrec_eval"]))
    return [_pytrec_means(evaluator.evaluate(run), len(data.qrels)) for run in data.runs.values()]


def _pytrec_means(per_query: dict[str, dict[str, float]], n_queries: int) -> list[float]:
    """Means over every qrels query (a query missing from the run scores 0, as ours counts it)."""
    return [sum(values[m] for values in per_query.values()) / n_queries for m in METRICS["pytrec_eval"]]


def pytrec_files(qrels_path: Path, run_paths: Sequence[Path]) -> list[list[float]]:
    import pytrec_eval

    means = []
    for run_path in run_paths:
        with _open(qrels_path) as handle:
            qrels = pytrec_eval.parse_qrel(handle)
        with _open(run_path) as handle:
            run = pytrec_eval.parse_run(handle)
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(METRICS["pytrec_eval"]))
        means.append(_pytrec_means(evaluator.evaluate(run), len(qrels)))
    return means


def _open(path: Path) -> Any:
    return gzip.open(path, "rt") if path.suffix == ".gz" else path.open()


def ir_measures_means(qrels: Any, run: Any) -> list[float]:
    import ir_measures

    measures = [ir_measures.parse_measure(m) for m in METRICS["ir_measures"]]
    if isinstance(qrels, Path):
        qrels, run = ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(run))
    result = ir_measures.calc_aggregate(measures, qrels, run)
    return [result[m] for m in measures]


def ranx_means(qrels: Any, run: Any) -> list[float]:
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    if isinstance(qrels, Path):
        qrels, run = (
            Qrels.from_file(str(qrels), kind="gz" if qrels.suffix == ".gz" else "trec"),
            Run.from_file(str(run), kind="gz" if run.suffix == ".gz" else "trec"),
        )
    else:
        qrels, run = Qrels(qrels), Run(run)
    result = ranx_evaluate(qrels, run, METRICS["ranx"])
    return [float(result[m]) for m in METRICS["ranx"]]


def largest_difference(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    return max(abs(x - y) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))


def evaluate_section(data: EvalSet, paths: dict[str, Any], missing: dict[str, str], timeout_s: float) -> list[str]:
    """The evaluate lines: in memory, plain files, gzip files; each against every peer."""
    out = Lines()
    out.append(
        f"evaluate: {len(data.qrels):,} queries x {_depth(data):,} docs x {len(data.runs)} runs, 5 metrics ({', '.join(METRICS['ours'])})"
    )
    reference: list[list[float]] | None = None
    cases: list[tuple[str, Callable[[], list[list[float]]], dict[str, Callable[[], list[list[float]]]]]] = [
        (
            "in memory",
            lambda: [ours_means(data.qrels, run) for run in data.runs.values()],
            {
                "pytrec_eval": lambda: pytrec_memory(data),
                "ir_measures": lambda: [ir_measures_means(data.qrels, run) for run in data.runs.values()],
                "ranx": lambda: [ranx_means(data.qrels, run) for run in data.runs.values()],
            },
        )
    ]
    for kind, qrels_key, runs_key in (("from files", "qrels", "runs"), ("from gzip files", "qrels_gz", "runs_gz")):
        qrels_path, run_paths = paths[qrels_key], paths[runs_key]
        cases.append(
            (
                kind,
                lambda q=qrels_path, rs=run_paths: [ours_means(q, r) for r in rs],
                {
                    "pytrec_eval": lambda q=qrels_path, rs=run_paths: pytrec_files(q, rs),
                    "ir_measures": lambda q=qrels_path, rs=run_paths: [ir_measures_means(q, r) for r in rs],
                    "ranx": lambda q=qrels_path, rs=run_paths: [ranx_means(q, r) for r in rs],
                },
            )
        )
    for kind, ours_call, peer_calls in cases:
        try:
            ours, ours_s = timed(ours_call)
        except (ValueError, OSError, UnicodeDecodeError) as error:  # a reader without gzip support
            out.append(f"  {kind}: skipped: this project's reader cannot read them yet ({type(error).__name__}: {str(error)[:120]})")
            continue
        for peer, call in peer_calls.items():
            if peer in missing:
                out.append(line(kind, ours_s, peer, None, missing[peer]))
                continue
            result = timed_in_child(call, timeout_s)
            if result is None:
                out.append(line(kind, ours_s, peer, None, f"not finished in {timeout_s:.0f} s"))
                continue
            means, peer_s = result
            if peer == "pytrec_eval" and reference is None:
                reference = means
            out.append(line(kind, ours_s, peer, peer_s, f"largest |mean difference| {largest_difference(ours, means):.2g}"))
    return out


def _depth(data: EvalSet) -> int:
    first = next(iter(data.runs.values()))
    return len(next(iter(first.values())))


# -- compare ----------------------------------------------------------------------------------------


def ours_compare(qrels_path: Path, run_paths: Sequence[Path], permutations: int) -> dict[tuple[str, str, str], float]:
    """Raw p per (metric, run, other) from this project's ``compare`` (runs read from their files)."""
    result = compare(qrels_path, {p.name.split(".")[0]: p for p in run_paths}, COMPARE_METRICS[0], n_permutations=permutations)
    return {(pair.metric, pair.run, pair.other): pair.p for pair in result.pairs}


def ranx_compare(data: EvalSet, permutations: int) -> dict[tuple[str, str, str], float]:
    """Raw p per (metric, run, other) from ranx's ``compare`` (Fisher's randomisation test)."""
    from ranx import Qrels, Run
    from ranx import compare as ranx_compare_runs

    runs = [Run(run, name=name) for name, run in data.runs.items()]
    report = ranx_compare_runs(Qrels(data.qrels), runs, COMPARE_METRICS[1], stat_test="fisher", n_permutations=permutations, max_p=ALPHA)
    p_values: dict[tuple[str, str, str], float] = {}
    for (a, b), by_metric in report.comparisons.items():
        for ours_metric, ranx_metric in zip(*COMPARE_METRICS):
            p_values[(ours_metric, a, b)] = float(by_metric[ranx_metric]["p_value"])
    return p_values


def compare_section(data: EvalSet, paths: dict[str, Any], permutations: int, missing: dict[str, str], timeout_s: float) -> list[str]:
    n_pairs = len(data.runs) * (len(data.runs) - 1) // 2
    out = Lines()
    out.append(
        f"compare: {n_pairs} pairs x {len(COMPARE_METRICS[0])} metrics, {permutations:,} permutations (Fisher), raw-p verdicts at {ALPHA}"
    )
    ours, ours_s = timed(lambda: ours_compare(paths["qrels"], paths["runs"], permutations))
    if "ranx" in missing:
        out.append(line("compare", ours_s, "ranx", None, missing["ranx"]))
        return out
    result = timed_in_child(lambda: ranx_compare(data, permutations), timeout_s)
    if result is None:
        out.append(line("compare", ours_s, "ranx", None, f"not finished in {timeout_s:.0f} s"))
        return out
    peer, peer_s = result
    agree, differ = 0, []
    for (metric, a, b), p in ours.items():
        other = peer.get((metric, a, b), peer.get((metric, b, a)))
        if other is None:
            continue
        if (p <= ALPHA) == (other <= ALPHA):
            agree += 1
        else:
            differ.append(f"{metric} {a}-{b}: ours p={p:.4f}, ranx p={other:.4f}")
    out.append(line("compare", ours_s, "ranx", peer_s, f"verdicts equal on {agree} of {agree + len(differ)} (metric, pair)"))
    out += [f"    differs: {d}" for d in differ]
    return out


# -- BM25 -------------------------------------------------------------------------------------------


@dataclass
class Corpus:
    """Tokens of a corpus and of its queries."""

    description: str
    doc_tokens: list[list[str]]
    query_tokens: list[list[str]]


def code_corpus(n_docs: int, n_queries: int, words: int = 120, seed: int = 13) -> Corpus:
    """``n_docs`` chunks of ``words`` words of Python source and ``n_queries`` six-token queries (see the module doc)."""
    stdlib, purelib = Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])
    files = itertools.chain(
        (p for p in sorted(stdlib.rglob("*.py")) if "site-packages" not in p.relative_to(stdlib).parts), sorted(purelib.rglob("*.py"))
    )
    chunks: list[str] = []
    pending: list[str] = []
    for path in files:
        try:
            pending.extend(path.read_text(encoding="utf-8").split())
        except (OSError, UnicodeDecodeError):
            continue
        while len(pending) >= words and len(chunks) < n_docs:
            chunks.append(" ".join(pending[:words]))
            del pending[:words]
        if len(chunks) >= n_docs:
            break
    doc_tokens = [tokenize(chunk) for chunk in chunks]
    rng = np.random.default_rng(seed)
    queries = []
    while len(queries) < n_queries:
        distinct = list(dict.fromkeys(doc_tokens[int(rng.integers(len(doc_tokens)))]))
        if len(distinct) >= 6:
            queries.append([distinct[i] for i in rng.choice(len(distinct), size=6, replace=False)])
    description = f"code: {len(chunks):,} chunks of {words} words of Python source, {len(queries):,} six-token queries"
    return Corpus(description, doc_tokens, queries)


def known_item_corpus(n_queries: int | None, build: bool, corpus_file: str | None = None) -> Corpus | str:
    """The ``installed_packages_100k`` documents and queries, or why they are not available.

    ``corpus_file``: a cached installed corpus to read instead of this environment's (its fingerprint changes
    with every installed distribution; the documents and queries are drawn from it with the dataset's settings).
    """
    from retrieval_pipeline.core.datasets.known_item.adapter import _build, _source, limited
    from retrieval_pipeline.core.datasets.known_item.corpus import environment_fingerprint, read_cache
    from retrieval_pipeline.core.datasets.known_item.queries import known_items
    from retrieval_pipeline.core.registry import load_registry

    config = load_registry(PROJECT_ROOT / "data" / "config" / "datasets.yaml").get(KNOWN_ITEM_DATASET)
    source = _source(config)
    cached = Path(source.cache_dir) / f"installed_corpus-{environment_fingerprint(source.introspection())[:16]}.parquet"
    if corpus_file:
        built = limited(known_items(read_cache(Path(corpus_file)), source.queries()), source)
    elif not cached.exists() and not build:
        return f"skipped: the installed corpus is not cached at {cached} (--build-corpus builds it: minutes; or --corpus-file)"
    else:
        _, built = _build(config)
    queries = built.queries[:n_queries] if n_queries else built.queries
    description = f"known-item ({KNOWN_ITEM_DATASET}): {len(built.documents):,} documents, {len(queries):,} queries"
    return Corpus(description, [tokenize(d.text) for d in built.documents], [tokenize(q.query) for q in queries])


def bm25_section(corpus: Corpus, k: int, missing: dict[str, str]) -> list[str]:
    out = Lines()
    out.append(f"BM25, {corpus.description}, top {k}")
    doc_ids = [str(i) for i in range(len(corpus.doc_tokens))]
    ours, ours_build = timed(lambda: BM25Retriever.from_tokens(doc_ids, corpus.doc_tokens, k1=K1, b=B, epsilon=0.0))
    queries = corpus.query_tokens
    ours.search_tokens(queries[:2], k)  # warm-up
    ours_hits, batched_s = timed(lambda: ours.search_tokens(queries, k))
    _, single_s = timed(lambda: [ours.search_tokens([q], k) for q in queries])
    qps = f"ours {len(queries) / batched_s:,.0f} q/s batched, {len(queries) / single_s:,.0f} q/s one at a time"
    if "bm25s" in missing:
        out.append(line("index", ours_build, "bm25s", None, missing["bm25s"]))
        out.append(f"  {qps}")
        return out
    import bm25s

    peer = bm25s.BM25(k1=K1, b=B, method="robertson", backend="numba")
    _, peer_build = timed(lambda: peer.index(corpus.doc_tokens, show_progress=False))
    bm25s_retrieve(peer, queries[:2], k)  # warm-up (Numba compiles)
    peer_hits, peer_batched = timed(lambda: bm25s_retrieve(peer, queries, k))
    _, peer_single = timed(lambda: [bm25s_retrieve(peer, [q], k) for q in queries])
    out.append(line("index", ours_build, "bm25s", peer_build))
    out.append(line(f"{len(queries):,} queries batched", batched_s, "bm25s", peer_batched, f"{len(queries) / batched_s:,.0f} q/s"))
    out.append(line(f"{len(queries):,} queries one at a time", single_s, "bm25s", peer_single, f"{len(queries) / single_s:,.0f} q/s"))
    out.append(f"  {agreement(ours, queries, ours_hits, peer_hits, k)}")
    postings = np.diff(ours.weights.indptr)
    touched = sum(int(postings[ours._term_ids(q)].sum()) for q in queries)
    out.append(
        f"  postings per query (both tools add each once; the exhaustive work): {touched / max(len(queries), 1):,.0f} of "
        f"{len(doc_ids):,} documents; ns per posting batched: ours {batched_s / max(touched, 1) * 1e9:.1f}, "
        f"bm25s {peer_batched / max(touched, 1) * 1e9:.1f}"
    )
    return out


def bm25s_retrieve(retriever: Any, queries: Sequence[list[str]], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """bm25s's top ``k`` per query: ``(positions, scores)`` with score > 0 (it pads with zero-score documents)."""
    documents, scores = retriever.retrieve(list(queries), k=k, show_progress=False)
    return [(d[s > 0], s[s > 0]) for d, s in zip(documents, scores)]


def agreement(ours: BM25Retriever, queries: Sequence[list[str]], ours_hits: list[list[Any]], peer_hits: list[Any], k: int) -> str:
    """How far the two top-``k`` lists agree: the same sets, the same up to ties at the cut, the best scores' gap."""
    same = up_to_ties = 0
    largest = 0.0
    for query, hits, (positions, scores) in zip(queries, ours_hits, peer_hits):
        mine, theirs = {int(doc_id) for doc_id, _ in hits}, set(positions.tolist())
        if hits and len(scores):
            largest = max(largest, abs(hits[0][1] / (K1 + 1) - float(scores[0])) / (hits[0][1] / (K1 + 1)))
        if mine == theirs:
            same += 1
            continue
        if len(mine) == len(theirs) and hits:
            full, cut = ours.scores_tokens(query), hits[-1][1]
            up_to_ties += all(abs(full[p] - cut) <= 1e-6 * cut for p in mine ^ theirs)
    n = max(len(queries), 1)
    return (
        f"top-{k} agreement with bm25s: the same set on {same / n:.1%} of queries, the same up to ties at the cut on "
        f"{(same + up_to_ties) / n:.1%}; best scores' largest relative difference {largest:.1e} (float32)"
    )


# -- main -------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--queries", type=int, default=7000, help="queries of the evaluate/compare set")
    parser.add_argument("--depth", type=int, default=1000, help="documents per query in each run")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--code-docs", type=int, default=100_000)
    parser.add_argument("--chunk-words", type=int, default=120)
    parser.add_argument("--code-queries", type=int, default=1000)
    parser.add_argument("--known-item-queries", type=int, default=None, help="default: all of the dataset's")
    parser.add_argument("--build-corpus", action="store_true", help="build the installed corpus when it is not cached")
    parser.add_argument("--corpus-file", default=None, help="a cached installed_corpus-*.parquet to read instead")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--peer-timeout", type=float, default=900.0, help="seconds a peer's call may take")
    parser.add_argument("--skip", default="", help="comma-separated: evaluate, compare, known-item, code")
    parser.add_argument("--workdir", default=None, help="folder for the TREC files (default: a temporary one)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    missing = missing_peers()
    print(f"peers: {', '.join(f'{p} {_version(p)}' for p in PEERS if p not in missing) or 'none installed'}", flush=True)
    for reason in missing.values():
        print(f"  {reason}")
    if not {"evaluate", "compare"} <= skip:
        if "ranx" not in missing:  # Numba compiles on first use; forked children inherit the compiled code
            tiny = synthetic_set(5, 20, 2, seed=1)
            _, compile_s = timed(lambda: (ranx_means(tiny.qrels, tiny.runs["run0"]), ranx_compare(tiny, 10)))
            print(f"ranx warm-up (Numba compiling, untimed below): {compile_s:.1f} s", flush=True)
        data, seconds = timed(lambda: synthetic_set(args.queries, args.depth, args.runs))
        if args.workdir:
            Path(args.workdir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
            paths, write_s = timed(lambda: write_files(data, Path(folder)))
            print(f"synthetic set: {seconds:.1f} s to generate, {write_s:.1f} s to write its TREC files (untimed below)", flush=True)
            if "evaluate" not in skip:
                evaluate_section(data, paths, missing, args.peer_timeout)
            if "compare" not in skip:
                compare_section(data, paths, args.permutations, missing, args.peer_timeout)
        del data
    if "known-item" not in skip:
        corpus = known_item_corpus(args.known_item_queries, args.build_corpus, args.corpus_file)
        if isinstance(corpus, str):
            print(f"BM25, known-item: {corpus}", flush=True)
        else:
            bm25_section(corpus, args.k, missing)
    if "code" not in skip:
        corpus = code_corpus(args.code_docs, args.code_queries, args.chunk_words)
        bm25_section(corpus, args.k, missing)
    return 0


def _version(package: str) -> str:
    from importlib import metadata

    names = {"pytrec_eval": "pytrec-eval-terrier"}
    for name in (names.get(package, package), package):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "?"


if __name__ == "__main__":
    sys.exit(main())

"""The HTML evaluation report on small hand-made frames: sections, marks, escaping, charts, empty data, bad input."""

from __future__ import annotations

import base64
import hashlib
import inspect
import io
import json
import re
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from retrieval_pipeline.core.common.atomic import CorruptFileWarning
from retrieval_pipeline.core.common.cache.result_cache import RESULTS_FILE, ResultCache, using_result_cache
from retrieval_pipeline.core.evaluation.statistics.pairwise import PAIR_COLUMNS
from retrieval_pipeline.core.report import charts as report_charts
from retrieval_pipeline.core.report import html as html_report
from retrieval_pipeline.core.report.charts import (
    CHART_INPUTS,
    CHART_NAMESPACE,
    NOT_FOUND_BIN,
    RANK_BINS,
    bars_figure,
    chart_key,
    chart_pngs,
    rank_histogram,
    sweep_figure,
)
from retrieval_pipeline.core.report.data import TREND_COLUMNS, ReportData, ReportInputError, iso_week, trend_frame
from retrieval_pipeline.core.report.html import (
    SECTIONS,
    bucket_counts,
    build_report,
    worst_queries,
)
from retrieval_pipeline.core.report.ui_summary import headline_metadata, summary_markdown

PROJECT_ROOT = Path(__file__).resolve().parents[3]
REAL_OUT = PROJECT_ROOT / "data" / "out"
HOSTILE_QUERY = "<script>alert('q1')</script> how do I dump JSON?"
HOSTILE_TITLE = '<img src=x onerror="alert(1)">dumps'
RETRIEVERS = ["bm25", "dense", "hybrid_mm"]
PER_QUERY = ["hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr"]

# first relevant rank per (retriever, query); NaN = not found. q1 is missed at 5 by all three, q2 by two.
RANKS = {
    "bm25": {"q1": np.nan, "q2": 7, "q3": 1, "q4": 2, "q5": 1, "q6": 12},
    "dense": {"q1": 9, "q2": 6, "q3": 1, "q4": 1, "q5": 3, "q6": 1},
    "hybrid_mm": {"q1": 30, "q2": 2, "q3": 1, "q4": 1, "q5": 1, "q6": 4},
}
GOLD = {"q1": "json.dumps", "q2": "json.loads", "q3": "csv.reader", "q4": "csv.writer", "q5": "os.path.join", "q6": "shutil.copy2"}
DOCS = [
    "json.dumps",
    "json.loads",
    "json.JSONEncoder",
    "csv.reader",
    "csv.writer",
    "os.path.join",
    "shutil.copy2",
    "shutil.copy",
    "os.walk",
]


def _top_hits(query: str, rank: float) -> list[str]:
    """Ten hits with the gold at ``rank`` (absent when NaN or deeper than 10), fillers from the corpus."""
    fillers = [d for d in DOCS if d != GOLD[query]]
    hits = [fillers[i % len(fillers)] for i in range(10)]
    if rank == rank and rank <= 10:
        hits[int(rank) - 1] = GOLD[query]
    return hits


def query_results_frame() -> pd.DataFrame:
    rows = []
    for retriever, ranks in RANKS.items():
        for query, rank in ranks.items():
            found = rank == rank
            rows.append(
                {
                    "retriever": retriever,
                    "query_id": query,
                    "hit_rate@1": float(found and rank <= 1),
                    "hit_rate@5": float(found and rank <= 5),
                    "hit_rate@10": float(found and rank <= 10),
                    "mrr": 1 / rank if found else 0.0,
                    "found": found,
                    "first_relevant_rank": float(rank),
                    "top_hits": _top_hits(query, rank),
                    "latency_ms": 1.0,
                    "error": None,
                }
            )
    return pd.DataFrame(rows)


def metrics_frame(query_results: pd.DataFrame) -> pd.DataFrame:
    """The metric table as ``retrieval_metrics`` holds it: per-retriever means (pandas), not-found rate, counts."""
    grouped = query_results.groupby("retriever", sort=False)
    frame = grouped[PER_QUERY].mean()
    frame["not_found_rate"] = 1 - grouped["found"].mean()
    frame["n_queries"] = grouped["query_id"].nunique().astype(float)
    frame["latency_mean_ms"] = grouped["latency_ms"].mean()
    return frame.reset_index()


def significance_frame() -> pd.DataFrame:
    """Hand-made significance rows: dense significantly better on hit_rate@5, hybrid_mm worse on mrr, the rest not."""
    rows = []
    for retriever in RETRIEVERS:
        for metric in PER_QUERY:
            rows.append(
                {
                    "retriever": retriever,
                    "metric": metric,
                    "n_queries": 6,
                    "mean": {"hit_rate@5": 0.5, "mrr": 0.4}.get(metric, 0.3),
                    "ci_low": 0.111,
                    "ci_high": 0.888,
                    "baseline": 0.4,
                    "delta": 0.0,
                    "p_t": np.nan,
                    "p_randomisation": np.nan,
                    "p_t_holm": np.nan,
                    "p_randomisation_holm": 0.01,
                    "significant": None if retriever == "bm25" else False,
                    "direction": None,
                    "note": "baseline" if retriever == "bm25" else "",
                }
            )
    frame = pd.DataFrame(rows)
    better = (frame["retriever"] == "dense") & (frame["metric"] == "hit_rate@5")
    worse = (frame["retriever"] == "hybrid_mm") & (frame["metric"] == "mrr")
    frame.loc[better | worse, "significant"] = True
    frame.loc[better, ["direction", "ci_low", "ci_high"]] = ["better", 0.123, 0.987]
    frame.loc[worse, ["direction", "ci_low", "ci_high"]] = ["worse", 0.234, 0.876]
    frame.loc[frame["retriever"] == "hybrid_mm", "note"] = "not enough queries for a test (n=4 < 6)"
    return frame


def pairs_frame() -> pd.DataFrame:
    """Hand-made ``retriever_pairs`` rows: dense significantly above bm25 and hybrid_mm on hit_rate@5, and below bm25
    on not_found_rate (lower is better); hybrid_mm and bm25 indistinguishable."""
    rows = [
        ("hit_rate@5", "dense", "bm25", 0.4, 0.1, 0.7, 0.002, 0.006, True),
        ("hit_rate@5", "hybrid_mm", "bm25", 0.05, -0.1, 0.2, 0.5, 1.0, False),
        ("hit_rate@5", "hybrid_mm", "dense", -0.35, -0.6, -0.1, 0.01, 0.02, True),
        ("not_found_rate", "dense", "bm25", -0.2, -0.4, -0.05, 0.03, 0.03, True),
    ]
    frame = pd.DataFrame(rows, columns=["metric", "a", "b", "delta", "ci_low", "ci_high", "p", "p_holm", "significant"])
    return frame.assign(n_queries=6, mean_a=np.nan, mean_b=np.nan, note="")[list(PAIR_COLUMNS)]


def sweep_frame() -> pd.DataFrame:
    """A min-max hybrid swept over alpha and an RRF hybrid over k, both halves; chosen 0.3 and 10, defaults 0.5 and 60."""
    rows = []
    for hybrid, method, parameter, values, chosen, default in (
        ("hybrid_mm", "minmax", "alpha", [0.0, 0.3, 0.5, 1.0], 0.3, 0.5),
        ("hybrid_rrf", "rrf", "k", [1.0, 10.0, 60.0, 100.0], 10.0, 60.0),
    ):
        for half, shift in (("dev", 0.05), ("test", 0.0)):
            for value in values:
                score = 0.6 - abs(np.log1p(value) - np.log1p(chosen)) / 10 + shift
                metrics = {m: score for m in ("hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "recall@10")}
                rows.append(
                    {"hybrid": hybrid, "method": method, "parameter": parameter, "value": value, "half": half, **metrics}
                    | {"chosen": value == chosen, "is_default": value == default}
                )
    return pd.DataFrame(rows)


def buckets_frame() -> pd.DataFrame:
    rows = [
        ("bm25", "q1", "vocabulary_mismatch", "no content word of the query ('dump') appears in the gold json.dumps's text"),
        ("bm25", "q2", "distractor_overlap", "json.JSONEncoder (sibling, overlap 3 words) ranks 1, above gold json.loads (rank 7)"),
        ("bm25", "q6", "specificity_gap", "shutil.copy <b>ranks</b> above the specific shutil.copy2"),
        ("dense", "q1", "unexplained", "no rule explains <i>this</i> miss"),
        ("dense", "q2", "distractor_overlap", "json.JSONEncoder outranks json.loads"),
        ("hybrid_mm", "q1", "vocabulary_mismatch", "no content word of the query appears in the gold"),
    ]
    frame = pd.DataFrame(rows, columns=["retriever", "query_id", "bucket", "evidence"])
    frame["query"] = frame["query_id"]
    frame["gold"] = [[GOLD[q]] for q in frame["query_id"]]
    frame["gold_rank"] = [RANKS[r][q] for r, q in zip(frame["retriever"], frame["query_id"])]
    frame["outranking_doc"] = None
    frame["also"] = [[] for _ in range(len(frame))]
    return frame


def dataset_frame() -> pd.DataFrame:
    queries = {q: f"question about {GOLD[q]}" for q in GOLD} | {"q1": HOSTILE_QUERY}
    return pd.DataFrame(
        {
            "id": list(GOLD),
            "query": [queries[q] for q in GOLD],
            "positive_ctxs": [[{"fqn": GOLD[q], "text": f"{GOLD[q]} text"}] for q in GOLD],
            "negative_ctxs": [[] for _ in GOLD],
            "metadata": ["{}" for _ in GOLD],
        }
    )


def corpus_frame() -> pd.DataFrame:
    titles = {d: f"Title of {d}" for d in DOCS} | {"json.JSONEncoder": HOSTILE_TITLE}
    return pd.DataFrame({"doc_id": DOCS, "text": [f"{d} text" for d in DOCS], "title": [titles[d] for d in DOCS]})


def history() -> list[tuple[float, dict]]:
    """Three evaluations over two ISO weeks: old flat keys, then the ``metrics`` JSON entry (as text, once)."""
    week47 = datetime(2026, 11, 16, 3, tzinfo=timezone.utc).timestamp()  # a Monday: ISO 2026-W47
    week48 = datetime(2026, 11, 23, 3, tzinfo=timezone.utc).timestamp()
    return [
        (week47, {"bm25/hit_rate@5": 0.40, "dense/hit_rate@5": 0.50, "queries": 6, "comparison": "| md |"}),
        (week47 + 3600, {"metrics": json.dumps({"bm25": {"hit_rate@5": 0.45, "mrr": 0.30}, "dense": {"hit_rate@5": 0.55}})}),
        (week48, {"metrics": {"bm25": {"hit_rate@5": 0.47, "mrr": 0.31}, "dense": {"hit_rate@5": 0.60, "mrr": 0.52}}}),
    ]


def synthetic_data(**overrides) -> ReportData:
    """A complete :class:`ReportData` for the dataset ``toy`` (every section has data)."""
    query_results = query_results_frame()
    fields = {
        "dataset": "toy",
        "description": "A toy dataset <b>not bold</b>, made by `make <i>toy</i>`.",
        "generated_at": datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc),
        "baseline": "bm25",
        "retrievers": RETRIEVERS,
        "metrics": metrics_frame(query_results),
        "significance": significance_frame(),
        "pairs": pairs_frame(),
        "query_results": query_results,
        "fusion_sweep": sweep_frame(),
        "failure_buckets": buckets_frame(),
        "retrieval_dataset": dataset_frame(),
        "corpus": corpus_frame(),
        "trend": trend_frame(history()),
        "alpha": 0.05,
    }
    return ReportData(**(fields | overrides))


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text, of an HTML document."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(document: str) -> _Tags:
    parser = _Tags()
    parser.feed(document)
    return parser


def section(document: str, key: str) -> str:
    """The HTML of one ``<section id=key>``."""
    match = re.search(rf'<section id="{key}">(.*?)</section>', document, flags=re.S)
    assert match, f"no section {key}"
    return match.group(1)


def decoded_png(b64: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(b64)))
    image.load()
    return image


@pytest.fixture(scope="module")
def document() -> str:
    """The report of :func:`synthetic_data`, built once for the tests that only read it."""
    return build_report(synthetic_data())


# --------------------------------------------------------------------------------------------------


def test_sections_in_order_with_four_decodable_charts(document):
    positions = [document.index(f'<section id="{s.key}">') for s in SECTIONS]
    assert positions == sorted(positions)
    assert [s.key for s in SECTIONS] == ["comparison", "pairs", "bars", "ranks", "sweep", "trend", "buckets", "worst"]
    assert document.index("<header>") < positions[0]
    images = [attrs for tag, attrs in parse(document).tags if tag == "img"]
    assert sorted(a["data-chart"] for a in images) == ["bars", "ranks", "sweep", "trend"]
    for attrs in images:
        assert attrs["src"].startswith("data:image/png;base64,")
        image = decoded_png(attrs["src"].split(",", 1)[1])
        assert image.format == "PNG" and image.width > 300 and image.height > 150
    assert 'class="empty"' not in document  # every section had data


def test_header_names_dataset_queries_baseline_and_time(document):
    header = document.split("</header>")[0]
    text = " ".join(parse(header).text)
    assert "Retrieval evaluation: toy" in text
    assert "6" in text.split("queries")[1][:20]  # six distinct query ids
    assert "bm25" in text and "2026-11-22 12:00 UTC" in text


def test_untrusted_text_is_escaped_and_the_page_has_no_script_or_remote_resource(document):
    parsed = parse(document)
    tags = {tag for tag, _ in parsed.tags}
    assert "script" not in tags and "iframe" not in tags
    assert "&lt;script&gt;alert(&#x27;q1&#x27;)&lt;/script&gt;" in document
    assert HOSTILE_QUERY in "".join(parsed.text)  # shown as text, whole
    assert all(attrs["src"].startswith("data:") for tag, attrs in parsed.tags if tag == "img")
    assert not any("onerror" in attrs for _, attrs in parsed.tags)  # the hostile title stayed text
    assert "&lt;b&gt;not bold&lt;/b&gt;" in document and "&lt;b&gt;ranks&lt;/b&gt;" in document
    assert "made by <code>make &lt;i&gt;toy&lt;/i&gt;</code>." in document  # a code span, its text escaped
    assert not re.search(r"(src|href)=\"(https?:)?//", document)  # no network
    csp = next(a for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp["content"] and "script-src" not in csp["content"]


def test_comparison_cells_carry_ci_and_marks_only_where_significant(document):
    comparison = section(document, "comparison")
    assert comparison.count('<td class="better">') == 1 and comparison.count('<td class="worse">') == 1
    better = re.search(r'<td class="better">(.*?)</td>', comparison).group(1)
    worse = re.search(r'<td class="worse">(.*?)</td>', comparison).group(1)
    assert "▲" in better and "[0.123, 0.987]" in better and "0.500" in better
    assert "▼" in worse and "[0.234, 0.876]" in worse and "0.400" in worse
    assert comparison.count("▲") == 2 and comparison.count("▼") == 2  # one mark each, plus the legend's
    # rows are metrics, in headline order; latency has no interval but its mean
    assert comparison.index(">hit_rate@1<") < comparison.index(">hit_rate@5<") < comparison.index(">mrr<")
    assert "latency_mean_ms" in comparison and "1.000" in comparison
    legend = " ".join(parse(comparison).text)
    assert "randomisation" in legend and "Holm" in legend and "α = 0.05" in legend and "bm25" in legend
    assert "not enough queries for a test (n=4 &lt; 6)" in comparison  # the note, escaped


def test_comparison_marks_the_best_value_per_metric_in_the_registry_direction():
    data = synthetic_data(significance=pd.DataFrame())
    comparison = section(build_report(data), "comparison")
    rows = dict(re.findall(r'<th scope="row"[^>]*>([^<]+)</th>(.*?)</tr>', comparison))
    # hit_rate@5: bm25 3/6, dense 4/6, hybrid 5/6 (by hand) -> hybrid best; not_found_rate: lower is better, dense/hybrid 0
    assert re.findall(r"<strong>([^<]+)</strong>", rows["hit_rate@5"]) == ["0.833"]
    assert re.findall(r"<strong>([^<]+)</strong>", rows["not_found_rate"]) == ["0.000", "0.000"]
    assert "No significance results" in comparison


def test_pairs_section_gives_the_verdicts_then_a_matrix_per_metric_symmetric_in_sign(document):
    pairs = section(document, "pairs")
    verdicts = re.findall(r"<li>(.*?)</li>", pairs.split('<ul class="verdicts">')[1].split("</ul>")[0])
    assert verdicts == [
        "dense beats bm25 on hit@5 by +0.400 [+0.100, +0.700], p = 0.006; dense beats hybrid_mm by +0.350 [+0.100, +0.600], "
        "p = 0.02; hybrid_mm and bm25 are indistinguishable (p = 1)",
        "dense beats bm25 on not_found_rate by -0.200 [-0.400, -0.050], p = 0.03",  # lower is better
    ]
    assert [h for h in re.findall(r"<h3[^>]*>([^<]+)</h3>", pairs)] == ["hit@5", "not_found_rate"]
    hit5 = pairs.split("<h3")[1]
    cells = dict(re.findall(r'<th scope="row">(.+?)</th>(.*?)</tr>', hit5))
    row = {name.replace("<wbr>", ""): re.findall(r"<td[^>]*>(.*?)</td>", html) for name, html in cells.items()}
    assert row["dense"][0] == '+0.400 [+0.100, +0.700]<span class="ci">p = 0.006</span>'
    assert row["bm25"][1] == '-0.400 [-0.700, -0.100]<span class="ci">p = 0.006</span>'  # the other side: negated, same p
    assert [row[r][i] for i, r in enumerate(["bm25", "dense", "hybrid_mm"])] == ["–", "–", "–"]
    assert hit5.count('<td class="better">') == 2 and hit5.count('<td class="worse">') == 2
    nfr = pairs.split("<h3")[2]
    assert nfr.count('<td class="better">') == 1 and re.search(r'<th scope="row">dense</th><td class="better">-0.200', nfr)
    assert "Holm-corrected" in pairs and "Holm p ≤ 0.05" in pairs


def test_an_unadjusted_interval_never_reads_as_a_verdict_the_corrected_test_does_not_give():
    """The issue's `+0.128 [+0.021, +0.234], p = 0.27`: the interval excludes 0, the Holm p does not reject. The cell
    carries no colour, a † says the interval is unadjusted and not a win, and both legends say "unadjusted"."""
    frame = pairs_frame()
    frame.loc[1, ["delta", "ci_low", "ci_high", "p", "p_holm", "significant"]] = [0.128, 0.021, 0.234, 0.09, 0.27, False]
    document = build_report(synthetic_data(pairs=frame))
    pairs = section(document, "pairs")
    hit5 = pairs.split("<h3")[1]
    cells = dict(re.findall(r'<th scope="row">(.+?)</th>(.*?)</tr>', hit5))
    row = {name.replace("<wbr>", ""): re.findall(r"<td[^>]*>(.*?)</td>", html) for name, html in cells.items()}
    assert row["hybrid_mm"][0].startswith("+0.128 [+0.021, +0.234]<sup") and "†" in row["hybrid_mm"][0]
    assert "hybrid_mm and bm25 are indistinguishable (p = 0.27)" in pairs
    assert "†" not in row["dense"][0]  # a significant pair: the interval and the verdict agree, no mark
    assert "unadjusted" in pairs and "unadjusted" in section(document, "comparison")
    assert "Holm-corrected over every pair of retrievers" in section(document, "comparison")


def test_pairs_without_a_test_say_so_and_no_pairs_is_one_line():
    untested = pairs_frame().assign(p=np.nan, p_holm=np.nan, significant=False, note="not enough queries for a test (n=4 < 6)")
    pairs = section(build_report(synthetic_data(pairs=untested)), "pairs")
    assert "<li>hit@5: no test (not enough queries for a test (n=4 &lt; 6))</li>" in pairs
    assert "no test</span>" in pairs and 'class="better"' not in pairs
    assert "not enough queries for a test (n=4 &lt; 6): deltas and intervals only, no p-value." in pairs
    assert section(build_report(synthetic_data(pairs=pd.DataFrame())), "pairs").count('<p class="empty">') == 1


def test_latency_is_bold_only_beyond_the_spread_and_shows_it():
    def comparison(latencies: dict[str, list[float]]) -> dict[str, str]:
        qr = query_results_frame()
        qr["latency_ms"] = [latencies[r][i % len(latencies[r])] for i, r in enumerate(qr["retriever"])]
        data = synthetic_data(query_results=qr, metrics=metrics_frame(qr))
        return dict(re.findall(r'<th scope="row"[^>]*>([^<]+)</th>(.*?)</tr>', section(build_report(data), "comparison")))

    apart = comparison({"bm25": [1.0, 1.2, 1.1], "dense": [9.0, 10.0, 11.0], "hybrid_mm": [10.0, 12.0, 14.0]})
    assert re.findall(r"<strong>([^<]+)</strong>", apart["latency_mean_ms"]) == ["1.100"]
    assert "median 1.10 ms (p10–p90 1.00–1.20, 6 timed)" in apart["latency_mean_ms"]
    overlapping = comparison({"bm25": [1.0, 9.5, 1.1], "dense": [9.0, 10.0, 11.0], "hybrid_mm": [10.0, 12.0, 14.0]})
    assert "<strong>" not in overlapping["latency_mean_ms"]  # bm25's mean is lowest, but its p90 reaches dense's p10
    assert "median" in overlapping["latency_mean_ms"]


def test_rank_histogram_matches_numpy_and_a_hand_count():
    ranks = [1, 1, 2, 4, 5, 6, 60, np.nan, 3, 20, 21, 50]
    frame = pd.DataFrame({"retriever": "r", "first_relevant_rank": ranks})
    counts = rank_histogram(frame).loc["r"]
    by_hand = {"1": 2, "2": 1, "3": 1, "4-5": 2, "6-10": 1, "11-20": 1, "21-50": 2, "51+": 1, NOT_FOUND_BIN: 1}
    assert counts.to_dict() == by_hand
    edges = [low - 0.5 for _, low, _ in RANK_BINS] + [np.inf]
    reference, _ = np.histogram(np.array(ranks, dtype=float)[~np.isnan(ranks)], bins=edges)
    assert counts.drop(NOT_FOUND_BIN).tolist() == reference.tolist()


def test_bar_whiskers_span_the_given_confidence_intervals():
    figure = bars_figure(synthetic_data())
    (ax,) = figure.axes
    segments = [seg for coll in ax.collections for seg in coll.get_segments()]
    spans = {(round(float(s[0][1]), 3), round(float(s[1][1]), 3)) for s in segments}
    assert (0.123, 0.987) in spans  # dense hit_rate@5
    assert (0.234, 0.876) in spans  # hybrid_mm mrr
    assert [t.get_text() for t in ax.get_xticklabels()] == RETRIEVERS


def test_sweep_chart_marks_the_chosen_value_per_hybrid_with_log_k():
    figure = sweep_figure(synthetic_data())
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == ["hybrid_mm (minmax)", "hybrid_rrf (rrf)"]
    labels = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in figure.axes]
    assert labels == [["dev", "test", "chosen = 0.3"], ["dev", "test", "chosen = 10"]]
    assert figure.axes[0].get_xscale() == "linear" and figure.axes[1].get_xscale() == "log"


def test_trend_frame_reads_old_and_new_metadata_keeping_the_last_value_per_iso_week():
    trend = trend_frame(history())
    assert tuple(trend.columns) == TREND_COLUMNS
    got = {(w, r, m): v for w, r, m, v in trend[["week", "retriever", "metric", "value"]].itertuples(index=False)}
    assert got == {
        ("2026-W47", "bm25", "hit_rate@5"): 0.45,  # the later JSON value replaces the flat one of the same week
        ("2026-W47", "bm25", "mrr"): 0.30,
        ("2026-W47", "dense", "hit_rate@5"): 0.55,
        ("2026-W48", "bm25", "hit_rate@5"): 0.47,
        ("2026-W48", "bm25", "mrr"): 0.31,
        ("2026-W48", "dense", "hit_rate@5"): 0.60,
        ("2026-W48", "dense", "mrr"): 0.52,
    }


def test_trend_frame_skips_non_metrics_and_non_numbers_and_handles_no_history():
    ts = datetime(2026, 11, 16, tzinfo=timezone.utc).timestamp()
    meta = {"run/bm25": "/tmp/x.run", "bm25/not_a_metric": 1.0, "bm25/mrr": float("nan"), "bm25/query_id": 3.0, "bm25/ndcg@10": 0.5}
    trend = trend_frame([(ts, meta)])
    assert trend[["retriever", "metric", "value"]].values.tolist() == [["bm25", "ndcg@10", 0.5]]
    empty = trend_frame([])
    assert empty.empty and tuple(empty.columns) == TREND_COLUMNS


@pytest.mark.parametrize(
    ("when", "week"),
    [
        (datetime(2026, 11, 16, 0, 0, tzinfo=timezone.utc), "2026-W47"),  # Monday of week 47 (Jan 1 2026 is a Thursday)
        (datetime(2026, 1, 1, 12, tzinfo=timezone.utc), "2026-W01"),
        (datetime(2027, 1, 1, 12, tzinfo=timezone.utc), "2026-W53"),  # 2026 starts on a Thursday: it has 53 weeks
        (datetime(2025, 12, 29, 0, 0, tzinfo=timezone.utc), "2026-W01"),  # the Monday before Jan 1 2026
    ],
)
def test_iso_week_by_hand(when, week):
    assert iso_week(when.timestamp()) == week


def test_worst_queries_ranked_by_misses_with_gold_top_hits_and_titles(document):
    worst = worst_queries(query_results_frame(), k=5, n=10)
    # by hand: q1 missed at 5 by all 3; q2 by bm25 (7) and dense (6); q6 by bm25 (12); the rest by none
    assert worst["query_id"].tolist() == ["q1", "q2", "q6"] and worst["misses"].tolist() == [3, 2, 1]
    html_worst = section(document, "worst")
    first = html_worst.split("<article")[1]
    assert "missed at 5 by 3 of 3 retrievers" in first and "<code>json.dumps</code>" in first
    assert "not found" in first  # bm25 never retrieved the gold of q1
    assert first.count("<ol class='hits'>") == 3 and all(part.count("<li>") == 3 for part in first.split("<ol class='hits'>")[1:])
    assert "Title of json.loads" in first and "&lt;img src=x onerror" in first  # titles, escaped


def test_hit_labels_are_informative_titles_or_text_snippets_never_the_repeated_name():
    hits = ["pkg.mod.func", "chunk_7", "pkg.Other"]
    query_results = pd.DataFrame(
        {"retriever": ["r"], "query_id": ["q"], "first_relevant_rank": [np.nan], "top_hits": [hits], "hit_rate@5": [0.0]}
    )
    corpus = pd.DataFrame(
        {
            "doc_id": [*hits, "gold.doc"],
            "title": ["func", "", "A longer page title", "doc"],
            "text": ["func (function) pkg.mod.func", "Some   chunk text " + "x" * 200, "Other text", "gold text"],
        }
    )
    dataset = pd.DataFrame({"id": ["q"], "query": ["a question"], "positive_ctxs": [[{"fqn": "gold.doc"}]]})
    worst = section(build_report(ReportData(dataset="d", query_results=query_results, corpus=corpus, retrieval_dataset=dataset)), "worst")
    items = re.findall(r"<li>(.*?)</li>", worst)
    assert items[0] == "<code>pkg.mod.func</code>"  # the title only repeats the name
    assert items[1].startswith('<code>chunk_7</code> <span class="title">Some chunk text xxx') and items[1].endswith("…</span>")
    assert len(re.search(r'class="title">(.*?)</span>', items[1]).group(1)) == 90
    assert items[2] == '<code>pkg.Other</code> <span class="title">A longer page title</span>'
    assert "gold: <code>gold.doc</code></p>" in worst  # its title "doc" repeats the name


def test_failure_bucket_counts_add_up_and_examples_show_evidence(document):
    fb = buckets_frame()
    counts = bucket_counts(fb, RETRIEVERS)
    assert counts.loc["bm25"].to_dict() == {
        "vocabulary_mismatch": 1,
        "specificity_gap": 1,
        "distractor_overlap": 1,
        "unexplained": 0,
        "total": 3,
    }
    assert (counts["total"] == fb.groupby("retriever").size().reindex(counts.index)).all()
    buckets = section(document, "buckets")
    assert "json.JSONEncoder (sibling, overlap 3 words)" in buckets and "&lt;i&gt;this&lt;/i&gt;" in buckets
    assert buckets.count("<h3>") == 4


def test_every_section_says_so_in_one_line_when_its_data_is_missing():
    document = build_report(ReportData(dataset="bare"))
    for s in SECTIONS:
        body = section(document, s.key)
        assert body.count('<p class="empty">') == 1, s.key
        assert "<img" not in body
    assert "No fusion sweep for this dataset" in document and "No past evaluations" in document


def test_metrics_without_sweep_buckets_or_trend_still_render_the_rest():
    data = synthetic_data(fusion_sweep=pd.DataFrame(), failure_buckets=pd.DataFrame(), trend=trend_frame([]))
    document = build_report(data)
    assert section(document, "sweep").count('class="empty"') == 1
    assert section(document, "buckets").count('class="empty"') == 1
    assert section(document, "trend").count('class="empty"') == 1
    assert 'data-chart="bars"' in document and 'data-chart="ranks"' in document


def test_missing_columns_and_duplicate_keys_are_refused_naming_dataset_and_frame():
    with pytest.raises(ReportInputError, match=r"dataset 'toy': frame metric_significance lacks columns \['ci_low', 'ci_high'\]"):
        synthetic_data(significance=significance_frame().drop(columns=["ci_low", "ci_high"]))
    with pytest.raises(ReportInputError, match="dataset 'toy': frame retrieval_metrics has 2 rows sharing a key"):
        metrics = metrics_frame(query_results_frame())
        synthetic_data(metrics=pd.concat([metrics, metrics.head(1)]))
    with pytest.raises(ReportInputError, match="query_results must be a pandas DataFrame"):
        synthetic_data(query_results=[1, 2])


def test_summary_markdown_table_charts_and_budget():
    data = synthetic_data()
    text = summary_markdown(data)
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert lines[0] == "| retriever | hit_rate@1 | hit_rate@5 | mrr | not_found_rate |"
    assert len(lines) == 2 + len(RETRIEVERS) and "bm25 (baseline)" in lines[2]
    assert "0.500 [0.123, 0.987] ▲" in text and "0.400 [0.234, 0.876] ▼" in text
    images = re.findall(r"!\[(\w+)\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", text)
    assert [name for name, _ in images] == ["bars", "ranks"]
    assert all(decoded_png(b64).width > 100 for _, b64 in images)
    assert len(text.encode()) < 300_000
    tight = summary_markdown(data, max_bytes=3_000)
    assert "![" not in tight and "left out" in tight and lines[0] in tight


def test_headline_metadata_is_rounded_to_four_digits():
    meta = headline_metadata(synthetic_data())
    assert meta["bm25"]["mrr"] == round((1 / 7 + 1 + 1 / 2 + 1 + 1 / 12) / 6, 4)  # by hand from RANKS
    assert all(v == round(v, 4) for ms in meta.values() for v in ms.values())


def test_chart_pngs_rejects_unknown_names_and_skips_charts_without_data():
    with pytest.raises(ValueError, match="unknown chart"):
        chart_pngs(synthetic_data(), ["pie"])
    assert set(chart_pngs(synthetic_data(fusion_sweep=pd.DataFrame()), ["bars", "sweep"])) == {"bars"}


def _real_frame(asset: str) -> pd.DataFrame:
    return pd.read_parquet(REAL_OUT / asset / "stdlib.parquet")


@pytest.mark.skipif(
    not (REAL_OUT / "query_results" / "stdlib.parquet").exists(), reason="no real stdlib outputs in data/out (run the pipeline first)"
)
def test_report_from_the_real_stdlib_frames():
    present = {a: _real_frame(a) for a in ("retrieval_metrics", "query_results", "retrieval_dataset", "corpus")}
    data = ReportData(
        dataset="stdlib",
        baseline="bm25",
        metrics=present["retrieval_metrics"],
        query_results=present["query_results"],
        retrieval_dataset=present["retrieval_dataset"],
        corpus=present["corpus"],
    )
    document = build_report(data)
    assert 'data-chart="bars"' in document and 'data-chart="ranks"' in document
    n = present["query_results"]["query_id"].nunique()
    assert f"<span>queries</span>{n}<" in document
    worst = section(document, "worst")
    assert worst.count("<article") == min(data.worst_n, len(worst_queries(present["query_results"], 5, 100)))


# -- the chart cache: a chart's PNG is reused while what it draws is unchanged ----------------------


def _perturbed(value, keep=()):
    """Another value of one report field (a frame's numeric columns but ``keep``), keeping the retriever order."""
    if isinstance(value, pd.DataFrame):
        frame = value.copy()
        for c in frame.select_dtypes("number").columns.difference(list(keep)):
            frame[c] = frame[c] * 0.5 + 1
        return frame
    if isinstance(value, str):
        return value + " changed"
    return value


UNDECLARED_CHANGES = {  # every field a chart might read by mistake, changed without touching the retriever order
    "description": "another description",
    "generated_at": datetime(2030, 1, 1, tzinfo=timezone.utc),
    "baseline": "dense",
    "failure_buckets": pd.DataFrame(),
    "retrieval_dataset": pd.DataFrame(),
    "corpus": pd.DataFrame(),
    "alpha": 0.01,
    "confidence": 0.9,
    "objective": "mrr",
    "k": 3,
    "worst_n": 2,
}


@pytest.mark.parametrize("name", sorted(CHART_INPUTS))
def test_a_chart_draws_only_what_its_key_covers(name):
    """Change every field and column outside CHART_INPUTS[name]: the key stays and the PNG is byte for byte the same."""
    base = synthetic_data()
    frames = ("metrics", "significance", "query_results", "fusion_sweep", "trend")
    changes = {f: v for f, v in UNDECLARED_CHANGES.items() if f not in CHART_INPUTS[name]}
    changes |= {f: _perturbed(getattr(base, f)) for f in frames if f not in CHART_INPUTS[name]}
    for field_name, columns in CHART_INPUTS[name].items():  # the undrawn columns of a drawn frame (latencies, timestamps)
        if columns is not None:
            changes[field_name] = _perturbed(getattr(base, field_name), keep=columns).assign(undrawn_extra=1.0)
    other = synthetic_data(**changes)
    assert other.retriever_order() == base.retriever_order()
    assert chart_key(other, name) == chart_key(base, name)
    assert chart_pngs(other, [name]) == chart_pngs(base, [name])


@pytest.mark.parametrize("name", sorted(CHART_INPUTS))
def test_a_chart_key_changes_with_each_thing_it_draws(name):
    base = synthetic_data()
    for field_name in CHART_INPUTS[name]:
        changed = synthetic_data(**{field_name: _perturbed(getattr(base, field_name))})
        assert chart_key(changed, name) != chart_key(base, name), field_name
    assert chart_key(base, name, dpi=60) != chart_key(base, name)


def test_an_unchanged_report_reuses_every_chart_and_the_html_is_the_same(tmp_path, monkeypatch):
    data = synthetic_data()
    uncached = build_report(data)
    with using_result_cache(tmp_path):
        first = build_report(data)
    drawn: list[object] = []
    original = report_charts.chart_png_base64
    monkeypatch.setattr(report_charts, "chart_png_base64", lambda figure, dpi=100: drawn.append(figure) or original(figure, dpi))
    with using_result_cache(tmp_path):
        second = build_report(data)
        assert drawn == []  # nothing drawn: all four read back
        changed = build_report(synthetic_data(fusion_sweep=_perturbed(data.fusion_sweep)))
    assert len(drawn) == 1  # only the sweep changed
    assert first == second == uncached
    assert changed != second


def test_a_corrupt_chart_entry_is_drawn_again(tmp_path):
    data = synthetic_data()
    with ResultCache(tmp_path / RESULTS_FILE) as store:
        store.put(CHART_NAMESPACE, chart_key(data, "bars"), {"png": 5})
    with using_result_cache(tmp_path), pytest.warns(CorruptFileWarning, match="corrupt"):
        png = chart_pngs(data, ["bars"])["bars"]
    assert decoded_png(png).width > 300


def test_an_unpaired_backtick_stays_text():
    assert html_report._code_spans("a ` b <x>") == "a ` b &lt;x&gt;"
    assert html_report._code_spans("`a` and `b`") == "<code>a</code> and <code>b</code>"


def test_the_chart_key_covers_the_source_of_every_chart_drawing():
    """The key's drawing version hashes charts.py, and every chart (and what it calls there) is drawn by code in it."""
    source = Path(report_charts.__file__)
    assert hashlib.sha256(source.read_bytes()).hexdigest() in report_charts._drawing_version()
    assert all(Path(inspect.getsourcefile(draw)) == source for draw in report_charts.CHARTS.values())

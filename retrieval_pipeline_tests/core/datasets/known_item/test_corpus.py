"""The installed-distributions corpus: child-process introspection, its cache, and known-item queries.

Unit tests introspect two small stdlib modules (``json``, ``textwrap``) through the real child process,
or work on hand-made corpora; the full build (>= 100,000 documents, minutes) is opt-in.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.datasets.api_index import introspect_modules, package_modules
from retrieval_pipeline.core.datasets.known_item import corpus as ic
from retrieval_pipeline.core.datasets.known_item.corpus import (
    InstalledCorpus,
    IntrospectionError,
    IntrospectionSettings,
    build_installed_corpus,
)
from retrieval_pipeline.core.datasets.known_item.queries import KnownItemSettings, docstring_of, known_items
from retrieval_pipeline.core.datasets.sentences import collapse, first_sentence, remove_sentence

SMALL = IntrospectionSettings(include=("json", "textwrap"), min_documents=10, child_timeout_s=120)


@pytest.fixture(scope="module")
def small_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache folder holding ``json`` and ``textwrap`` as introspected by a real child."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def small_corpus(small_cache: Path) -> InstalledCorpus:
    """``json`` and ``textwrap`` introspected by a real child (one stdlib group: one child)."""
    return build_installed_corpus(SMALL, small_cache)


def _fake_package(root: Path, name: str, init: str) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(textwrap.dedent(init), encoding="utf-8")


@pytest.fixture
def fake_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on the children's PYTHONPATH holding packages that misbehave at import."""
    root = tmp_path / "site"
    root.mkdir()
    _fake_package(root, "crashpkg", "import os, sys\nsys.stderr.write('crashpkg boom at import\\n')\nos._exit(3)\n")
    _fake_package(root, "sleepypkg", "import time\ntime.sleep(60)\n")
    _fake_package(root, "exitpkg", '"""Exits."""\nimport sys\nsys.exit(0)\n')
    _fake_package(root, "hangmod", '"""Hangs."""\nimport time\ntime.sleep(60)\n')
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    return root


# --------------------------------------------------------------------------- sentences


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ("Return the value. Then more.", "Return the value."),
        ("Is it true? Yes.", "Is it true?"),
        ("Use a helper, e.g. fill, to wrap text. More.", "Use a helper, e.g. fill, to wrap text."),
        ("Wrap a paragraph\nover two lines. Rest", "Wrap a paragraph\nover two lines."),
        ("No full stop at all", "No full stop at all"),
        ("Version 1.5 is the default. Next.", "Version 1.5 is the default."),  # a dot inside a number ends nothing
        ("First paragraph without a stop\n\nSecond one. Here.", "First paragraph without a stop"),
        ("", ""),
    ],
)
def test_first_sentence(head: str, expected: str) -> None:
    assert first_sentence(head) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("f (function)\nm.f\nf(x, y=1)\nAdd them.\n\nMore.", "Add them.\n\nMore."),  # the signature line is not docstring
        ("enc (function)\nm.enc\nenc(string) -> string\n\nEncode it.", "Encode it."),  # a C function's signature paragraph
        ("m (module)\nm\nThe module.", "The module."),
        ("g (function)\nm.g\ng()", ""),  # no docstring
        ("g (function)\nm.g\nThe g(x) call is fine.", "The g(x) call is fine."),
    ],
)
def test_docstring_of_reads_the_docstring_back_from_the_text(text: str, expected: str) -> None:
    name = text.split(" ", 1)[0]
    assert docstring_of(Document(f"m.{name}", text, title=name)) == expected


def test_remove_sentence_removes_every_occurrence_whatever_the_wrapping() -> None:
    text = "f (function)\nmod.f\nSplit the text into words.\n\nSee also: split the text\ninto   words. End"
    removed, count = remove_sentence(text, "Split the text into words.")
    assert count == 1  # case differs in the second occurrence: it is another string, kept
    assert "Split the text into words." not in removed and "split the text\ninto   words." in removed
    removed, count = remove_sentence("A b c.\nx\nA b\nc.", "A b c.")
    assert (removed, count) == ("x", 2)
    assert remove_sentence("unrelated text", "A b c.") == ("unrelated text", 0)


# --------------------------------------------------------------------------- known items on a hand-made corpus


def _corpus(entries: dict[str, str], extra: int = 0) -> InstalledCorpus:
    """One document per ``doc_id -> docstring`` (text as introspection writes it, a signature line included),
    plus ``extra`` eligible ones."""
    entries = dict(entries)
    for i in range(extra):
        entries[f"pkg.gen{i:03d}"] = f"Compute the generated value number {i} for tests.\n\nMore text."
    docs = []
    for doc_id, docstring in entries.items():
        name = doc_id.rsplit(".", 1)[-1]
        text = "\n".join(filter(None, [f"{name} (function)", doc_id, f"{name}(x)", docstring]))
        docs.append(Document(doc_id, text, title=name, kind="function", module="pkg"))
    return InstalledCorpus(docs)


def test_known_items_skip_short_cut_and_shared_sentences_and_counts_add_up() -> None:
    corpus = _corpus(
        {
            "pkg.short": "Too short here.",
            "pkg.a": "Open the named file and return a handle.",
            "pkg.b": "open the named file   and return a handle.",  # same sentence (case, spacing): two golds, both skipped
            "pkg.none": "",
            "pkg.cut": "A first sentence that runs past the docstring cap and is cut…",
            "pkg.ok": "Close every handle that this process has opened.",
        },
        extra=3,
    )
    result = known_items(corpus, KnownItemSettings(n_queries=4, min_words=6, seed=1))
    counts = result.counts
    expected = {
        "candidates": 8,
        "skipped_too_short": 1,
        "skipped_cut": 1,
        "skipped_duplicate": 2,
        "eligible": 4,
        "skipped_in_neighbour": 0,
        "sampled": 4,
    }
    assert counts == expected
    assert counts["candidates"] == sum(counts[k] for k in ("skipped_too_short", "skipped_cut", "skipped_duplicate", "eligible"))
    assert sorted(q.gold_doc_id for q in result.queries) == ["pkg.gen000", "pkg.gen001", "pkg.gen002", "pkg.ok"]


def test_known_item_gold_loses_its_sentence_and_other_documents_are_unchanged() -> None:
    corpus = _corpus({"pkg.ok": "Close every handle that this process\nhas opened. Then return.", "pkg.tiny": "Short one."})
    result = known_items(corpus, KnownItemSettings(n_queries=1, seed=0))
    (query,) = result.queries
    gold = next(d for d in result.documents if d.doc_id == query.gold_doc_id)
    original = next(d for d in corpus.documents if d.doc_id == query.gold_doc_id)
    assert query.query in collapse(original.text) and query.query not in collapse(gold.text) and query.removed == 1
    assert gold.text.startswith(f"{gold.title} (function)\n{gold.doc_id}\n{gold.title}(x)") and "Then return." in gold.text
    assert query.query_id == f"ki:{query.gold_doc_id}" and "\n" not in query.query
    others = {d.doc_id: d.text for d in result.documents if d.doc_id != query.gold_doc_id}
    assert others == {d.doc_id: d.text for d in corpus.documents if d.doc_id != query.gold_doc_id}
    assert [d.doc_id for d in result.documents] == [d.doc_id for d in corpus.documents]


def test_known_item_sample_is_seeded_and_matches_numpy() -> None:
    corpus = _corpus({}, extra=60)
    draw = lambda seed: [q.gold_doc_id for q in known_items(corpus, KnownItemSettings(n_queries=10, seed=seed)).queries]  # noqa: E731
    assert draw(7) == draw(7)
    assert draw(7) != draw(8)
    eligible = sorted(d.doc_id for d in corpus.documents)
    expected = sorted(eligible[i] for i in np.random.default_rng(7).permutation(len(eligible))[:10])
    assert draw(7) == expected and len(set(draw(7))) == 10


def test_a_sentence_found_in_a_neighbours_text_is_passed_over() -> None:
    """Same module (a sibling quoting it) or same name elsewhere (a copied docstring): the query would have two golds."""
    corpus = _corpus(
        {
            "pkg.make": "Build the functional form of a given module.",
            "pkg.make_more": "Like make. Build the functional form of a given module. And buffers.",  # first sentence too short
            "other.gen000": "A copy of pkg.gen000, quoted below here.\n\nCompute the generated value number 0 for tests.",
        },
        extra=3,
    )
    corpus.documents[2] = dataclasses.replace(corpus.documents[2], module="other")  # named gen000 too, in another module
    result = known_items(corpus, KnownItemSettings(n_queries=3, seed=0))
    assert {q.gold_doc_id for q in result.queries} == {"other.gen000", "pkg.gen001", "pkg.gen002"}  # not pkg.make, pkg.gen000
    assert result.counts["eligible"] == 5 and result.counts["sampled"] == 3
    assert result.counts["skipped_in_neighbour"] + result.counts["sampled"] <= result.counts["eligible"]
    with pytest.raises(InputError, match=r"only 3 documents are usable known items, n_queries=4; .*'skipped_in_neighbour': 2"):
        known_items(corpus, KnownItemSettings(n_queries=4, seed=0))


def test_too_few_eligible_documents_is_a_clear_error() -> None:
    with pytest.raises(InputError, match=r"dataset 'x': only 3 documents are usable known items, n_queries=5"):
        known_items(_corpus({}, extra=3), KnownItemSettings(n_queries=5), label="dataset 'x'")


# --------------------------------------------------------------------------- the child process


def test_child_introspection_matches_in_process_introspection(small_corpus: InstalledCorpus) -> None:
    expected = introspect_modules([*package_modules("json"), *package_modules("textwrap")])
    assert [d.doc_id for d in small_corpus.documents] == [d.doc_id for d in expected.documents]
    assert [d.text for d in small_corpus.documents] == [d.text for d in expected.documents]
    report = small_corpus.report
    assert report["documents"] == len(small_corpus.documents) == sum(report["by_kind"].values()) == sum(report["by_package"].values())
    assert report["by_package"] == {"stdlib": len(small_corpus.documents)} and report["modules"] == expected.report["modules"]
    assert report["failed_modules"] == 0 and report["child_peak_rss_mb"] > 0 and report["introspection_wall_s"] > 0
    assert docstring_of(next(d for d in small_corpus.documents if d.doc_id == "textwrap.dedent")) == inspect.getdoc(textwrap.dedent)


def test_a_package_that_is_not_installed_is_a_reject_naming_it(tmp_path: Path) -> None:
    settings = IntrospectionSettings(include=("no_such_pkg_xyz",), min_documents=0)
    corpus = build_installed_corpus(settings, tmp_path)
    (reject,) = corpus.rejects
    assert reject.case_id == "no_such_pkg_xyz" and "'no_such_pkg_xyz' is not installed" in reject.reason
    assert corpus.report["failed_packages"] == 1 and corpus.report["children"] == 1 and corpus.documents == []


def test_a_crashing_child_is_an_error_with_its_stderr_tail(tmp_path: Path, fake_packages: Path) -> None:
    settings = IntrospectionSettings(include=("crashpkg",), min_documents=1)
    with pytest.raises(IntrospectionError, match=r"(?s)package group 'crashpkg'.*exited with code 3.*'exclude'.*crashpkg boom at import"):
        build_installed_corpus(settings, tmp_path)
    assert not list(tmp_path.glob("*.parquet")), "a failed build is not cached"


def test_a_child_past_its_timeout_is_killed_and_named(tmp_path: Path, fake_packages: Path) -> None:
    settings = IntrospectionSettings(include=("sleepypkg",), min_documents=1, child_timeout_s=1.5, module_timeout_s=60)
    with pytest.raises(IntrospectionError, match=r"package group 'sleepypkg' \(sleepypkg\) timed out after 1.5 s"):
        build_installed_corpus(settings, tmp_path)


def test_modules_that_exit_or_hang_at_import_are_rejects(tmp_path: Path, fake_packages: Path) -> None:
    settings = IntrospectionSettings(include=("exitpkg", "hangmod"), min_documents=0, module_timeout_s=0.5)
    corpus = build_installed_corpus(settings, tmp_path)  # the children finish: each module is only a reject
    reasons = {r.case_id: r.reason for r in corpus.rejects}
    assert set(reasons) == {"exitpkg", "hangmod"}
    assert "SystemExit" in reasons["exitpkg"] and "TimeoutError" in reasons["hangmod"]
    assert corpus.report["failed_modules"] == 2 and corpus.report["modules"] == 2 and corpus.documents == []


def test_fewer_documents_than_min_documents_is_a_clear_error(small_cache: Path, small_corpus: InstalledCorpus) -> None:
    settings = IntrospectionSettings(include=SMALL.include, min_documents=10**6)  # same documents: read from the cache
    count = len(small_corpus.documents)
    with pytest.raises(
        IntrospectionError, match=rf"dataset 'd': introspection gave {count} documents, fewer than min_documents=1,000,000 .*stdlib {count}"
    ):
        build_installed_corpus(settings, small_cache, label="dataset 'd'")


# --------------------------------------------------------------------------- the cache


def test_a_rerun_reads_the_cache_without_a_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = IntrospectionSettings(include=("textwrap",), min_documents=1)
    first = build_installed_corpus(settings, tmp_path)
    assert first.report["cache"] == "miss"

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached corpus must not start a child")

    monkeypatch.setattr(ic, "introspect_in_children", no_child)
    second = build_installed_corpus(settings, tmp_path)
    assert second.report["cache"] == "hit" and second.report["cache_file"] == first.report["cache_file"]
    assert second.documents == first.documents and second.rejects == first.rejects
    with pytest.raises(AssertionError, match="must not start a child"):  # other settings: another fingerprint, a new build
        build_installed_corpus(IntrospectionSettings(include=("textwrap",), min_documents=1, max_modules_per_package=1), tmp_path)


def test_the_fingerprint_follows_the_settings_that_change_the_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ic, "installed_distributions", lambda: [("numpy", "2.4.6")])
    base = ic.environment_fingerprint(SMALL)
    assert base == ic.environment_fingerprint(IntrospectionSettings(include=("textwrap", "json"), min_documents=5, child_timeout_s=9))
    assert base != ic.environment_fingerprint(IntrospectionSettings(include=("json",)))
    assert base != ic.environment_fingerprint(IntrospectionSettings(include=SMALL.include, exclude=("x",)))
    monkeypatch.setattr(ic, "installed_distributions", lambda: [("numpy", "2.4.7")])
    assert base != ic.environment_fingerprint(SMALL), "another version of a distribution is another environment"


def test_a_damaged_cache_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "installed_corpus-0.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(IntrospectionError, match=rf"file {path}: cached corpus is unreadable .*delete it to rebuild"):
        ic.read_cache(path)


# --------------------------------------------------------------------------- the full build (opt-in)


@pytest.mark.integration
@pytest.mark.skipif(
    os.environ.get("RETRIEVAL_SCALE_TESTS") != "1",
    reason="the full installed-packages corpus takes minutes to introspect; set RETRIEVAL_SCALE_TESTS=1 (the scale benchmark runs it)",
)
def test_the_full_corpus_has_100k_documents_and_2000_known_items() -> None:
    corpus = build_installed_corpus(IntrospectionSettings())
    assert len(corpus.documents) >= 100_000 and len({d.doc_id for d in corpus.documents}) == len(corpus.documents)
    assert corpus.report["by_package"]["stdlib"] > 0 and {"numpy", "pandas", "scipy", "torch", "dagster"} <= set(
        corpus.report["by_package"]
    )
    result = known_items(corpus, KnownItemSettings())
    assert len(result.queries) == 2000 and result.counts["sampled"] == 2000
    texts = {d.doc_id: collapse(d.text) for d in result.documents}
    assert all(q.query not in texts[q.gold_doc_id] for q in result.queries)

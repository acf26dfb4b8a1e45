"""The third int8 recipe's graph surgery (:mod:`~retrieval_pipeline.core.retrieval.models.onnx_outliers`) on a tiny feed-forward block.

The block is the traced graph's shape in small: ``x @ W1 + b1`` (8 channels), the exporter's erf GELU (Div, Erf,
Add, Mul, Mul by scalar Constants), then the output MatMul (named as the traced graph names it) and its bias. One
channel of the activation is a thousand times the others: the outlier the recipe keeps in fp32.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_pipeline.core.retrieval.models.onnx_outliers import (
    CALIBRATION_TEXTS,
    OUTLIER_FACTOR,
    ffn_input_maxima,
    fp32_parts,
    outlier_channels,
    split_outlier_channels,
)

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install the project)")
onnx = pytest.importorskip("onnx")

FFN = "/transformer/encoder/layer.0/output/dense/MatMul"
OUTLIER = 5


def _block(shared_activation: bool = False) -> Any:
    """The tiny block; ``shared_activation``: the GELU's output is also a graph output (read outside the block)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.normal(0, 0.5, (4, 8)).astype(np.float32)
    w1[:, OUTLIER] *= 1000.0
    b1 = rng.normal(0, 0.1, 8).astype(np.float32)
    w2 = rng.normal(0, 0.5, (8, 3)).astype(np.float32)
    w2[OUTLIER] /= 1000.0  # the outlier channel still contributes, as in the real model
    b2 = rng.normal(0, 0.1, 3).astype(np.float32)
    prefix = "/transformer/encoder/layer.0/intermediate"

    def const(name: str, value: float) -> Any:
        return helper.make_node("Constant", [], [name], name=name, value=helper.make_tensor(name, TensorProto.FLOAT, [], [value]))

    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name=f"{prefix}/dense/MatMul"),
        helper.make_node("Add", ["b1", "h0"], ["h"], name=f"{prefix}/dense/Add"),
        const("sqrt2", float(np.sqrt(2.0))),
        helper.make_node("Div", ["h", "sqrt2"], ["d"], name=f"{prefix}/act/Div"),
        helper.make_node("Erf", ["d"], ["e"], name=f"{prefix}/act/Erf"),
        const("one", 1.0),
        helper.make_node("Add", ["e", "one"], ["e1"], name=f"{prefix}/act/Add"),
        helper.make_node("Mul", ["h", "e1"], ["m"], name=f"{prefix}/act/Mul"),
        const("half", 0.5),
        helper.make_node("Mul", ["m", "half"], ["g"], name=f"{prefix}/act/Mul_1"),
        helper.make_node("MatMul", ["g", "w2"], ["y0"], name=FFN),
        helper.make_node("Add", ["b2", "y0"], ["y"], name="/transformer/encoder/layer.0/output/dense/Add"),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", 3])]
    if shared_activation:
        outputs.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, ["batch", "sequence", 8]))
    inits = [numpy_helper.from_array(v, n) for n, v in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))]
    graph = helper.make_graph(
        nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 4])], outputs, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: Any, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(
        model.SerializeToString() if not isinstance(model, Path) else str(model), providers=["CPUExecutionProvider"]
    )
    return session.run(["y"], {"x": x})[0]


def _inputs(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (2, 6, 4)).astype(np.float32)


def test_outlier_channels_are_those_above_the_factor_times_the_median() -> None:
    maxima = np.array([1.0, 2.0, 1.5, 100.0, 2.0, 12.5, 11.9])  # median 2.0
    assert outlier_channels(maxima, 6.0).tolist() == [3, 5] and outlier_channels(maxima, 100.0).tolist() == []
    assert OUTLIER_FACTOR == 6.0 and len(CALIBRATION_TEXTS) == len(set(CALIBRATION_TEXTS)) >= 30


def test_maxima_are_per_input_channel_over_every_token_of_every_feed(tmp_path: Path) -> None:
    path = tmp_path / "block.onnx"
    onnx.save(_block(), str(path))
    feeds = [{"x": _inputs(1)}, {"x": _inputs(2)}]
    maxima = ffn_input_maxima(path, [FFN], feeds)[FFN]
    assert maxima.shape == (8,) and outlier_channels(maxima).tolist() == [OUTLIER]
    assert maxima[OUTLIER] > 100 * np.median(maxima)


def test_the_split_graph_computes_the_same_and_keeps_only_the_outliers_apart(tmp_path: Path) -> None:
    path = tmp_path / "block.onnx"
    onnx.save(_block(), str(path))
    maxima = ffn_input_maxima(path, [FFN], [{"x": _inputs(1)}])
    model = _block()
    assert split_outlier_channels(model, maxima) == {FFN: [OUTLIER]}
    ops = {node.name: node.op_type for node in model.graph.node}
    assert FFN not in ops and ops[f"{FFN}/split"] == "Split" and ops[f"{FFN}/sum"] == "Add"
    assert ops[f"{FFN}/bulk"] == ops[fp32_parts([FFN])[0]] == "MatMul" and fp32_parts([FFN]) == [f"{FFN}/outlier_channels"]
    weights = {init.name: init for init in model.graph.initializer}
    assert (
        "w2" not in weights and list(weights[f"{FFN}/outlier_weight"].dims) == [1, 3] and list(weights[f"{FFN}/bulk_weight"].dims) == [7, 3]
    )
    x = _inputs(3)  # not the calibration input
    assert np.allclose(_run(model, x), _run(_block(), x), rtol=1e-5, atol=1e-3)


def test_quantised_with_the_outliers_in_fp32_the_block_keeps_its_output(tmp_path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    float_path, split_path = tmp_path / "block.onnx", tmp_path / "split.onnx"
    onnx.save(_block(), str(float_path))
    model = _block()
    split_outlier_channels(model, ffn_input_maxima(float_path, [FFN], [{"x": _inputs(1)}]))
    onnx.save(model, str(split_path))
    x = _inputs(4)
    expected = _run(float_path, x)
    errors = {}
    for name, source, keep in (("whole", float_path, []), ("split", split_path, fp32_parts([FFN]))):
        target = tmp_path / f"{name}-int8.onnx"
        quantize_dynamic(
            str(source), str(target), weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=keep, op_types_to_quantize=["MatMul"]
        )
        assert any(node.op_type.startswith(("DynamicQuantize", "MatMulInteger")) for node in onnx.load(str(target)).graph.node)
        errors[name] = float(np.abs(_run(target, x) - expected).max())
    assert errors["split"] < errors["whole"] / 5, errors  # one scale for 1000x channel flattens the others


def test_the_split_is_refused_where_permuting_channels_would_change_something_else(tmp_path: Path) -> None:
    maxima = {FFN: np.array([1.0, 1, 1, 1, 1, 500, 1, 1])}
    with pytest.raises(ValueError, match="also read by"):
        split_outlier_channels(_block(shared_activation=True), maxima)
    from onnx import TensorProto, helper, numpy_helper

    direct = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name=FFN)],
        "direct",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(np.ones((8, 3), np.float32), "w")],
    )
    with pytest.raises(ValueError, match="not computed in the graph"):
        split_outlier_channels(helper.make_model(direct), maxima)
    model = _block()
    assert split_outlier_channels(model, {FFN: np.ones(8)}) == {}  # no outlier: the graph is left as it was
    assert FFN in {node.name for node in model.graph.node}

"""The third int8 recipe (backend ``onnx_int8_outliers_fp32``): the few outlier channels of each feed-forward output in fp32.

**Why.** all-mpnet-base-v2's int8 graph (the first recipe) has a cosine of .885 to torch; nearly all of the
error comes from the feed-forward output MatMuls (``layer.N/output/dense``), whose 3,072-wide GELU input is
quantised per batch with one uint8 scale. That input has a handful of outlier *channels*: in layers 6-10 one
to four of the 3,072 reach 30-100 where the median channel's maximum is about 2, the same channels on every
text (measured on MS MARCO passages, NQ passages and this module's :data:`CALIBRATION_TEXTS`). One scale for
all of them leaves the other channels a few levels of the 256. The second recipe keeps the twelve MatMuls in
fp32 (cosine .994, but a third of the FLOPs stay fp32: about 2x torch instead of 3x).

**What this recipe does** (LLM.int8()'s mixed-precision decomposition, with the channels fixed at export):

1. the float graph is run on :data:`CALIBRATION_TEXTS` (project-written sentences, prose, questions, code and
   API text; neither the NQ passages nor the ADK documents the recipe is measured on) and the largest absolute
   value of each input channel of each feed-forward output MatMul is recorded (:func:`ffn_input_maxima`);
2. a channel whose maximum exceeds :data:`OUTLIER_FACTOR` times the median channel's of its layer is an
   outlier (:func:`outlier_channels`; 33 of the 36,864 for all-mpnet-base-v2);
3. the graph is rewritten (:func:`split_outlier_channels`): the intermediate dense layer's weight columns and
   bias are permuted so that a layer's outlier channels come last (the activation between them is elementwise,
   so nothing else changes), the output MatMul's weight rows likewise, and the MatMul becomes
   ``Split -> MatMul(bulk) + MatMul(outlier channels)``; the float graph computes the same vectors;
4. ``quantize_dynamic`` quantises every MatMul (per-channel int8 weights) except the small outlier ones
   (``k x 768``, fp32); the embeddings' Gather stays fp32 (quantising it lowered the cosine and saves no time).

all-mpnet-base-v2 (``benchmarks/mpnet_int8_variants.py``, 32 passages): cosine to torch .994 (min .992) on NQ passages,
where the factor was chosen, and .994 (min .990) on ADK documents, the check; 3.26x and 3.43x torch's passages/s, about
the fully quantised graph's speed (the second recipe: the same cosine at 2.1-2.2x). docs/retrievers.md has the table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: A channel is an outlier when its calibration maximum exceeds this many times the median channel's of its layer.
OUTLIER_FACTOR = 6.0
#: Op types that may stand between the intermediate dense layer's bias and the output MatMul (the activation): all
#: elementwise, with scalar constants only, so that permuting channels commutes with them.
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Sigmoid", "Pow", "Relu", "Gelu", "FastGelu"})
#: The texts the float graph is run on to find the outlier channels: written for this project (everyday prose,
#: questions, instructions, Python, SQL, error messages and API documentation), not taken from any evaluation set;
#: kept as data in `calibration_texts.json` beside this module (a text holding Python is data here, not code to run).
CALIBRATION_TEXTS: tuple[str, ...] = tuple(json.loads((Path(__file__).with_name("calibration_texts.json")).read_text(encoding="utf-8")))


def outlier_channels(maxima: np.ndarray, factor: float = OUTLIER_FACTOR) -> np.ndarray:
    """The indices (ascending) of the channels whose maximum exceeds ``factor`` times the median channel's."""
    maxima = np.asarray(maxima, dtype=np.float64)
    return np.flatnonzero(maxima > factor * float(np.median(maxima)))


def ffn_input_maxima(float_path: Path, matmuls: Sequence[str], feeds: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The largest absolute value of each input channel (last axis) of each named MatMul's first input over ``feeds``.

    Args:
        float_path: The float graph.
        matmuls: Names of MatMul nodes in it.
        feeds: The graph's inputs, one dict per run (one text per run: no padding token is counted).

    Returns:
        ``{matmul name: (channels,) float64 array}``.
    """
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(float_path))
    by_name = {node.name: node for node in model.graph.node}
    tensors = [by_name[name].input[0] for name in matmuls]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(tensor) for tensor in tensors)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    maxima: dict[str, np.ndarray] = {}
    for feed in feeds:
        for name, value in zip(matmuls, session.run(tensors, dict(feed))):
            channels = np.abs(np.asarray(value, dtype=np.float64)).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], channels) if name in maxima else channels
    return maxima


def split_outlier_channels(model: Any, maxima: Mapping[str, np.ndarray], factor: float = OUTLIER_FACTOR) -> dict[str, list[int]]:
    """Rewrite ``model`` (an ``onnx.ModelProto``, in place) so that each named MatMul's outlier channels run apart.

    For each ``name -> maxima`` whose :func:`outlier_channels` are not empty: the MatMul's input must come from an
    intermediate ``MatMul(x, W1) + b1`` through elementwise ops with scalar constants only (an activation); the
    columns of ``W1`` and ``b1`` and the rows of the MatMul's weight are permuted so that the outlier channels
    come last, and the MatMul becomes ``Split`` into the ``n - k`` others and the ``k`` outliers, a MatMul on each
    (``<name>/bulk`` and ``<name>/outlier_channels``) and their ``Add`` (``<name>/sum``), which writes the old output.

    Returns:
        ``{MatMul name: its outlier channels (original indices)}`` for the MatMuls rewritten; the names of their fp32
        parts are ``f"{name}/outlier_channels"`` (:func:`fp32_parts`).

    Raises:
        ValueError: A named MatMul's weight or its input's producer is not of that form, or a tensor between them
            is read by anything else.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for tensor in node.input:
            consumers.setdefault(tensor, []).append(node)
    scalars = {node.output[0] for node in graph.node if node.op_type == "Constant" and _constant_size(node) == 1}
    scalars |= {name for name, init in initializers.items() if int(np.prod(init.dims)) == 1}
    graph_outputs = {output.name for output in graph.output}
    rewritten: dict[str, list[int]] = {}
    for node in list(graph.node):
        if node.name not in maxima:
            continue
        outliers = outlier_channels(maxima[node.name], factor)
        if node.op_type != "MatMul" or node.input[1] not in initializers:
            raise ValueError(f"{node.name}: not a MatMul with a constant weight")
        weight = numpy_helper.to_array(initializers[node.input[1]])
        width = weight.shape[0]
        if len(outliers) == 0 or len(outliers) == width:
            continue
        first, bias_name = _intermediate_dense(node, width, producers, consumers, initializers, scalars, graph_outputs)
        order = np.concatenate([np.setdiff1d(np.arange(width), outliers), outliers])
        for name, permuted in (
            (first.input[1], numpy_helper.to_array(initializers[first.input[1]])[:, order]),
            (bias_name, numpy_helper.to_array(initializers[bias_name])[order]),
        ):
            initializers[name].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(permuted), name))
        weight = weight[order]
        keep, k = width - len(outliers), len(outliers)
        tensors = {
            part: f"{node.name}/{part}"
            for part in ("bulk_weight", "outlier_weight", "sizes", "x_bulk", "x_outliers", "y_bulk", "y_outliers")
        }
        graph.initializer.extend(
            [
                numpy_helper.from_array(np.ascontiguousarray(weight[:keep]), tensors["bulk_weight"]),
                numpy_helper.from_array(np.ascontiguousarray(weight[keep:]), tensors["outlier_weight"]),
                numpy_helper.from_array(np.array([keep, k], dtype=np.int64), tensors["sizes"]),
            ]
        )
        parts = [
            helper.make_node(
                "Split", [node.input[0], tensors["sizes"]], [tensors["x_bulk"], tensors["x_outliers"]], name=f"{node.name}/split", axis=-1
            ),
            helper.make_node("MatMul", [tensors["x_bulk"], tensors["bulk_weight"]], [tensors["y_bulk"]], name=f"{node.name}/bulk"),
            helper.make_node(
                "MatMul", [tensors["x_outliers"], tensors["outlier_weight"]], [tensors["y_outliers"]], name=fp32_parts([node.name])[0]
            ),
            helper.make_node("Add", [tensors["y_bulk"], tensors["y_outliers"]], [node.output[0]], name=f"{node.name}/sum"),
        ]
        position = list(graph.node).index(node)
        old_weight = node.input[1]
        graph.node.remove(node)
        for offset, part in enumerate(parts):
            graph.node.insert(position + offset, part)
        if not any(old_weight in other.input for other in graph.node):
            graph.initializer.remove(initializers.pop(old_weight))
        rewritten[node.name] = [int(i) for i in outliers]
    return rewritten


def fp32_parts(matmuls: Sequence[str]) -> list[str]:
    """The names of the fp32 MatMuls :func:`split_outlier_channels` makes for the MatMuls named."""
    return [f"{name}/outlier_channels" for name in matmuls]


def _constant_size(node: Any) -> int:
    """The number of elements of a ``Constant`` node's value (0 when it is not a tensor)."""
    for attribute in node.attribute:
        if attribute.name == "value":
            return int(np.prod(attribute.t.dims))
        if attribute.name in ("value_float", "value_int"):
            return 1
    return 0


def _intermediate_dense(
    matmul: Any,
    width: int,
    producers: Mapping[str, Any],
    consumers: Mapping[str, list[Any]],
    initializers: Mapping[str, Any],
    scalars: set[str],
    graph_outputs: set[str],
) -> tuple[Any, str]:
    """The ``MatMul(x, W1)`` and the name of ``b1`` of the ``MatMul(x, W1) + b1`` that feeds ``matmul`` through an activation.

    Walks back from ``matmul``'s input through :data:`ELEMENTWISE` ops whose other inputs are scalar constants;
    every path must end at one and the same bias ``Add`` (a ``(width,)`` initializer plus a MatMul by a
    ``(d, width)`` initializer), and no tensor on the way, nor ``W1`` or ``b1``, may be read outside the walk.
    """
    name = matmul.name
    seen: dict[str, Any] = {}
    found: list[tuple[Any, str]] = []
    pending = [matmul.input[0]]
    while pending:
        tensor = pending.pop()
        node = producers.get(tensor)
        if node is None:
            raise ValueError(f"{name}: its input {tensor!r} is not computed in the graph")
        if node.name in seen:
            continue
        seen[node.name] = node
        dense = _bias_add(node, width, producers, initializers)
        if dense is not None:
            found.append(dense)
            continue
        if node.op_type not in ELEMENTWISE:
            raise ValueError(f"{name}: {node.op_type} {node.name!r} stands between it and the intermediate dense layer")
        inputs = [t for t in node.input if t and t not in scalars]
        if any(t in initializers for t in inputs):
            raise ValueError(f"{name}: {node.name!r} has a constant input that is not a scalar")
        pending.extend(inputs)
    if len({id(first) for first, _ in found}) != 1:
        raise ValueError(f"{name}: its input does not come from one intermediate dense layer (MatMul + bias)")
    first, bias_name = found[0]
    walked = {first.name, *seen}
    for node in [first, *seen.values()]:
        for tensor in node.output:
            readers = [r.name for r in consumers.get(tensor, []) if r.name not in walked and r.name != name]
            readers += ["the graph's outputs"] if tensor in graph_outputs else []
            if readers:
                raise ValueError(f"{name}: {tensor!r} is also read by {readers}; permuting its channels would change them")
    for constant in (first.input[1], bias_name):
        readers = [r.name for r in consumers.get(constant, []) if r.name not in walked]
        if readers:
            raise ValueError(f"{name}: {constant!r} is also read by {readers}; permuting it would change them")
    return first, bias_name


def _bias_add(node: Any, width: int, producers: Mapping[str, Any], initializers: Mapping[str, Any]) -> tuple[Any, str] | None:
    """``(MatMul node, bias name)`` when ``node`` is ``MatMul(x, W) + b`` with ``W`` ``(d, width)`` and ``b`` ``(width,)``."""
    if node.op_type != "Add" or len(node.input) != 2:
        return None
    for bias, other in (node.input, node.input[::-1]):
        first = producers.get(other)
        if bias not in initializers or first is None or first.op_type != "MatMul" or first.input[1] not in initializers:
            continue
        if list(initializers[bias].dims) == [width] and list(initializers[first.input[1]].dims)[-1:] == [width]:
            return first, bias
    return None

"""Small TensorFlow Lite models built at test time with the tflite-micro wheel's own model builder, and
their graphs as the arena planner of the cross-check sees them (arena_plan.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tflite_micro
from tflite_micro.tensorflow.lite.micro.compression import model_editor as me
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb

from tests.tflm.arena_plan import GraphOp, GraphTensor

SINE = Path(tflite_micro.__file__).parent / "python" / "tflite_micro" / "sine_float.tflite"
_ITEM = {fb.TensorType.FLOAT32: 4, fb.TensorType.INT8: 1, fb.TensorType.INT32: 4, fb.TensorType.UINT8: 1}


@dataclass(frozen=True)
class Graph:
    tensors: tuple[GraphTensor, ...]
    ops: tuple[GraphOp, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def graph_of(model: bytes) -> Graph:
    """The first subgraph of a flatbuffer model: tensor sizes, constant data, operators."""
    m = fb.ModelT.InitFromPackedBuf(model, 0)
    sg = m.subgraphs[0]
    tensors = []
    for t in sg.tensors:
        n = _ITEM[t.type]
        for d in (t.shape if t.shape is not None else []):
            n *= int(d)
        data = m.buffers[t.buffer].data if t.buffer else None
        tensors.append(GraphTensor(n, constant=data is not None and len(data) > 0, variable=bool(t.isVariable)))
    ops = []
    for op in sg.operators:
        code = m.operatorCodes[op.opcodeIndex]
        builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
        scratch: tuple[int, ...] = ()
        if builtin == fb.BuiltinOperator.SUM:  # float SUM asks for rank x 4 and num_axes x 4 bytes
            rank = len(sg.tensors[op.inputs[0]].shape)
            axes = int(np.prod(sg.tensors[op.inputs[1]].shape))
            scratch = (rank * 4, axes * 4)
        ops.append(GraphOp(tuple(int(i) for i in op.inputs), tuple(int(o) for o in op.outputs), scratch))
    return Graph(tuple(tensors), tuple(ops), tuple(int(i) for i in sg.inputs), tuple(int(o) for o in sg.outputs))


def _tensor(length: int, name: str, data: np.ndarray | None = None) -> me.Tensor:
    return me.Tensor(shape=(length,), dtype=fb.TensorType.FLOAT32, name=name, data=data)


def random_model(seed: int) -> bytes:
    """A random float32 1-D graph of ADD (tensor or constant operand), CONCATENATION (axis 0) and SUM
    (keep dims, constant axis: two scratch buffers)."""
    rng = random.Random(seed)
    tensors: list[me.Tensor] = []
    live: list[me.Tensor] = []
    ops: list[me.Operator] = []
    inputs = [_tensor(rng.randint(1, 24), f"in{i}") for i in range(rng.randint(1, 2))]
    tensors += inputs
    live += inputs
    for i in range(rng.randint(1, 7)):
        kind = rng.choice(("add", "add", "concat", "sum"))
        a = rng.choice(live)
        length = a.shape[0]
        if kind == "add":
            same = [t for t in live if t.shape[0] == length and t is not a]
            if same and rng.random() < 0.5:
                b = rng.choice(same)
            else:
                b = _tensor(length, f"k{i}", np.full(length, 0.5, dtype=np.float32))
                tensors.append(b)
            out = _tensor(length, f"t{i}")
            op = me.Operator(opcode=fb.BuiltinOperator.ADD, inputs=[a, b], outputs=[out])
            op._fb.builtinOptionsType = fb.BuiltinOptions.AddOptions
            op._fb.builtinOptions = fb.AddOptionsT()
        elif kind == "concat":
            b = rng.choice(live)
            out = _tensor(length + b.shape[0], f"t{i}")
            op = me.Operator(opcode=fb.BuiltinOperator.CONCATENATION, inputs=[a, b], outputs=[out])
            op._fb.builtinOptionsType = fb.BuiltinOptions.ConcatenationOptions
            opts = fb.ConcatenationOptionsT()
            opts.axis = 0
            op._fb.builtinOptions = opts
        else:
            axis = me.Tensor(shape=(1,), dtype=fb.TensorType.INT32, name=f"ax{i}", data=np.zeros(1, dtype=np.int32))
            tensors.append(axis)
            out = _tensor(1, f"t{i}")
            op = me.Operator(opcode=fb.BuiltinOperator.SUM, inputs=[a, axis], outputs=[out])
            op._fb.builtinOptionsType = fb.BuiltinOptions.ReducerOptions
            opts = fb.ReducerOptionsT()
            opts.keepDims = True
            op._fb.builtinOptions = opts
        tensors.append(out)
        live.append(out)
        ops.append(op)
    outputs = [live[-1]]
    if len(live) > 2 and rng.random() < 0.3:
        extra = rng.choice(live[:-1])
        if extra not in inputs:
            outputs.append(extra)
    sg = me.Subgraph(tensors=tensors, operators=ops, inputs=inputs, outputs=outputs)
    return bytes(me.Model(subgraphs=[sg], description=f"npuconf arena check {seed}").build())

"""The arena planner the TFLM cross-check predicts with (arena_plan.py): lifetimes, largest first, the later
inserted first among equal sizes. Needs no TensorFlow Lite Micro."""

from __future__ import annotations

from tests.tflm.arena_plan import GraphOp, GraphTensor, Planned, greedy_offsets, head_bytes, planned_buffers


def test_arena_planner_lifetimes_and_tie_break():
    # the shape of the sine model: input 1x1, two 1x16 hidden layers with constant weights, output 1x1
    tensors = [GraphTensor(4), GraphTensor(64, constant=True), GraphTensor(64), GraphTensor(64, constant=True),
               GraphTensor(64), GraphTensor(4)]
    ops = [GraphOp((0, 1), (2,)), GraphOp((2, 3), (4,)), GraphOp((4,), (5,))]
    bufs = planned_buffers(tensors, ops, inputs=(0,), outputs=(5,))
    assert bufs == [Planned(16, 0, 1), Planned(64, 1, 2), Planned(64, 2, 3), Planned(16, 3, 3)]
    assert head_bytes(bufs) == 128
    # equal sizes: the later inserted is placed first; scratch buffers live for their operator only
    assert greedy_offsets([Planned(32, 0, 1), Planned(32, 1, 2)]) == [32, 0]
    scratch = planned_buffers([GraphTensor(8), GraphTensor(8)], [GraphOp((0,), (1,), scratch=(4, 4))], (0,), (1,))
    assert scratch[2:] == [Planned(16, 1, 1), Planned(16, 1, 1)] and head_bytes(scratch) == 64

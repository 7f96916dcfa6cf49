"""Runs models in the real TensorFlow Lite Micro interpreter and prints, per model, the arena numbers it
reports (one JSON line each). Run as a subprocess: a failing runtime may take the process down.

usage: python -m tests.tflm.run_models ARENA_BYTES MODEL.tflite...
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile

import numpy as np
from tflite_micro.python.tflite_micro import runtime
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb

LINE = re.compile(r"Arena allocation (total|head|tail) (\d+) bytes")


def arena_report(model: bytes, arena: int) -> dict[str, int]:
    interp = runtime.Interpreter.from_bytes(model, arena_size=arena)
    for i in range(len(fb.ModelT.InitFromPackedBuf(model, 0).subgraphs[0].inputs)):
        d = interp.get_input_details(i)
        interp.set_input(np.zeros(d["shape"], dtype=d["dtype"]), i)
    interp.invoke()
    with tempfile.TemporaryFile() as f:  # print_allocations writes to the C-level stderr
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            interp.print_allocations()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode()
    return {k: int(v) for k, v in LINE.findall(text)}


def main(argv: list[str]) -> int:
    arena = int(argv[0])
    for path in argv[1:]:
        with open(path, "rb") as f:
            print(json.dumps({"model": path, **arena_report(f.read(), arena)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

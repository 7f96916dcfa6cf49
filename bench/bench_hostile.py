"""Peak host memory of `npuconf run` against hostile device output.

    python bench/bench_hostile.py [--line-mb 100] [--lines 3000000]

A stand-in probe wraps the real one (build/probe) and, just before the `exit` event of the first
scenario, prints either one line of --line-mb megabytes or --lines short trace lines; the other
scenario runs for real. Each case is a fresh `npuconf run` in its own interpreter; the figure is that
interpreter's peak resident memory (ru_maxrss, the stand-in probe not counted), next to a run with
no hostile output. Default limits apply (docs/formats.md, "Limits"): the flooded scenario is ERROR
naming the limit, the other PASSes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host.probe import DEFAULT_BUILD_DIR, ProbeBuild, build_probe

FIRST, SECOND = "requests.create_then_free", "support.empty_list"

STANDIN = """\
#!{python}
import json, os, subprocess, sys
REAL = {real!r}
MODE, AMOUNT = {mode!r}, {amount!r}
if "--list" in sys.argv:
    os.execv(REAL, [REAL, *sys.argv[1:]])
child = subprocess.Popen([REAL, *sys.argv[1:]], stdout=subprocess.PIPE)
out = sys.stdout.buffer
for raw in child.stdout:
    try:
        event = json.loads(raw)
    except ValueError:
        event = {{}}
    if event.get("ev") == "exit" and event.get("scenario") == {first!r}:
        if MODE == "line":
            block = b"x" * (1 << 20)
            for _ in range(AMOUNT):
                out.write(block)
            out.write(b"\\n")
        elif MODE == "flood":
            line = b'{{"ev":"note","text":"flood"}}\\n'
            for _ in range(AMOUNT // 10000):
                out.write(line * 10000)
    out.write(raw)
    out.flush()
sys.exit(child.wait())
"""

MEASURE = """\
import resource, sys, time
from host.cli import main
started = time.monotonic()
code = main(sys.argv[1:])
print("BENCH", code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.monotonic() - started, file=sys.stderr)
"""


def standin(directory: Path, real: ProbeBuild, mode: str, amount: int) -> Path:
    build = directory / f"build-{mode}"
    build.mkdir()
    probe = build / "npuconf-probe"
    probe.write_text(
        STANDIN.format(python=sys.executable, real=str(real.probe), mode=mode, amount=amount, first=FIRST)
    )
    probe.chmod(probe.stat().st_mode | stat.S_IXUSR)
    shutil.copy(real.vnpu, build / "libvnpu.so")
    return build


def measure(directory: Path, build: Path, name: str) -> dict[str, object]:
    run_dir = directory / f"run-{name}"
    args = ["run", "--target", "local", "--build-dir", str(build), "-k", f"{FIRST} or {SECOND}",
            "--out", str(run_dir), "-q"]
    done = subprocess.run([sys.executable, "-c", MEASURE, *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), NPUCONF_STATE_DIR=str(directory / "state")),
                          check=False)
    line = next((x for x in done.stderr.splitlines() if x.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"{name}: no measurement\n{done.stderr}")
    _, code, rss_kb, seconds = line.split()
    results = {}
    for raw in (run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(raw)
        if record["kind"] == "result":
            results[record["scenario"]] = (record["verdict"], record["reason"])
    return {"case": name, "exit": int(code), "peak_mb": int(rss_kb) / 1024, "seconds": float(seconds),
            "results_kb": (run_dir / "results.jsonl").stat().st_size / 1024, "verdicts": results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--line-mb", type=int, default=100, help="size of the one long line (MB)")
    parser.add_argument("--lines", type=int, default=3_000_000, help="lines in the flood")
    args = parser.parse_args()
    real = ProbeBuild(DEFAULT_BUILD_DIR)
    if not real.exists():
        real = build_probe(DEFAULT_BUILD_DIR)
    with tempfile.TemporaryDirectory(prefix="npuconf-bench-hostile-") as tmp:
        directory = Path(tmp)
        rows = [
            measure(directory, standin(directory, real, "none", 0), "baseline (no hostile output)"),
            measure(directory, standin(directory, real, "line", args.line_mb), f"one {args.line_mb} MB line"),
            measure(directory, standin(directory, real, "flood", args.lines), f"{args.lines:,} lines"),
        ]
    print(f"{'case':32} {'exit':>4} {'peak MB':>8} {'seconds':>8} {'results KB':>10}  verdicts")
    for row in rows:
        verdicts = "; ".join(f"{k}: {v[0]}" for k, v in row["verdicts"].items())  # type: ignore[attr-defined]
        print(f"{row['case']:32} {row['exit']:>4} {row['peak_mb']:>8.1f} {row['seconds']:>8.1f} "
              f"{row['results_kb']:>10.1f}  {verdicts}")
    for row in rows[1:]:
        reasons = [v[1] for v in row["verdicts"].values() if v[0] == "ERROR"]  # type: ignore[attr-defined]
        print(f"{row['case']}: {reasons[0][:160] if reasons else 'no ERROR'}")
    worst = max(float(row["peak_mb"]) for row in rows)  # type: ignore[arg-type]
    print(f"peak host memory: {worst:.1f} MB (target < 200 MB)")
    return 0 if worst < 200 else 1


if __name__ == "__main__":
    sys.exit(main())

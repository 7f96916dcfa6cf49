"""Peak host memory and time of the kit against hostile device output and hostile inputs.

    python bench/bench_hostile.py [--line-mb 100] [--lines 3000000] [--digits 1000000]
                                  [--devices 100000] [--file-bytes 3221225472]

A stand-in probe wraps the real one (build/probe) and, just before the `exit` event of the first
scenario, prints either one line of --line-mb megabytes or --lines short trace lines; the other
scenario runs for real. Each case is a fresh `npuconf run` in its own interpreter; the figure is that
interpreter's peak resident memory (ru_maxrss, the stand-in probe not counted), next to a run with
no hostile output. Default limits apply (docs/formats.md, "Limits"): the flooded scenario is ERROR
naming the limit, the other PASSes.

Then the inputs a submitter or a scenario author controls, each measured the same way (a fresh
interpreter, its peak RSS and wall time), all to stay under 200 MB and 30 s:
- **long integers**: a results.jsonl whose trace and record fields hold integers of --digits digits,
  through `report`, `store import` and `verify` of a bundle holding it;
- **device records**: a bundle whose results.jsonl adds --devices device records for unplanned
  devices, through `verify`;
- **a huge `file_new`**: a scenario file whose `file_new` asks for --file-bytes bytes, through
  `run`. The scenario is loaded first in this process: when the kit's loader accepts the size, the
  run is NOT started (it would make the probe fill that much shared memory) and the case is reported
  as accepted, unmeasured.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
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


LIMIT_MB, LIMIT_S = 200.0, 30.0


def measure_cli(directory: Path, name: str, *args: str) -> dict[str, object]:
    """One kit command in a fresh interpreter: exit code, peak RSS (MB), seconds, last stdout/stderr line."""
    done = subprocess.run([sys.executable, "-c", MEASURE, *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), NPUCONF_STATE_DIR=str(directory / "state")),
                          check=False, timeout=600)
    line = next((x for x in done.stderr.splitlines() if x.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"{name}: no measurement\n{done.stderr[-2000:]}")
    _, code, rss_kb, seconds = line.split()
    said = [x for x in (done.stdout + done.stderr).splitlines() if x.strip() and not x.startswith("BENCH ")]
    return {"case": name, "exit": int(code), "peak_mb": int(rss_kb) / 1024, "seconds": float(seconds),
            "said": said[0][:150] if said else ""}


def _bundle_with(original: Path, results: bytes, target: Path) -> Path:
    """The bundle `original` with another results.jsonl, its manifest listing the new hash (so verify reads it)."""
    with tarfile.open(original, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    members["results.jsonl"] = results
    manifest = json.loads(members["manifest.json"])
    manifest["files"]["results.jsonl"] = hashlib.sha256(results).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    target.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return target


def input_cases(
    directory: Path, real: ProbeBuild, digits: int, devices: int, file_bytes: int
) -> list[dict[str, object]]:
    """The inputs a submitter or scenario author controls. This process stays small: a child's ru_maxrss
    starts from its parent's at fork, so every big input is written to a file piecewise."""
    base = directory / "base-run"
    build = standin(directory, real, "plain", 0)
    rows = [measure_cli(directory, "a clean two-scenario run", "run", "--target", "local", "--build-dir", str(build),
                        "-k", f"{FIRST} or {SECOND}", "--out", str(base), "-q")]
    bundle = directory / "base.tar.gz"
    rows.append(measure_cli(directory, "bundle of it", "bundle", str(base), "--out", str(bundle)))
    lines = (base / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]

    # long integers: in a trace event and as a record's duration
    huge = "9" * digits
    long_lines = list(lines)
    index = next(i for i, r in enumerate(records) if r.get("kind") == "result")
    record = records[index]
    trace = list(record["trace"])
    trace.insert(1, '{"ev":"note","text":"n","value":' + huge + "}")
    long_lines[index] = json.dumps({**record, "trace": trace})[:-1] + ', "attempts": ' + huge + "}"
    long_lines.insert(index + 1, json.dumps({**record, "scenario": record["scenario"]})[:-1]
                      + ', "duration_ms": ' + huge + "}")
    long_dir = directory / "long-integers"
    long_dir.mkdir()
    long_results = ("\n".join(long_lines) + "\n").encode()
    (long_dir / "results.jsonl").write_bytes(long_results)
    label = f"{digits:,}-digit integers"
    rows.append(measure_cli(directory, f"{label}: report", "report", str(long_dir)))
    rows.append(measure_cli(directory, f"{label}: store import", "store", "import", str(long_dir),
                            "--store", str(directory / "store.sqlite")))
    rows.append(measure_cli(directory, f"{label}: verify", "verify",
                            str(_bundle_with(bundle, long_results, directory / "long.tar.gz"))))

    # device records for devices the plan never named (each as small as a device record can be)
    end = next((i for i, r in enumerate(records) if r.get("kind") == "end"), len(lines))
    many_path = directory / "many-devices.jsonl"
    with many_path.open("w") as handle:
        handle.writelines(line + "\n" for line in lines[:end])
        for i in range(devices):
            ghost = {"kind": "device", "device": f"ghost-{i}", "info": {"serial": f"ghost-{i}"}}
            handle.write(json.dumps(ghost) + "\n")
        handle.writelines(line + "\n" for line in lines[end:])
    many = many_path.read_bytes()
    rows.append(measure_cli(directory, f"{devices:,} device records: verify", "verify",
                            str(_bundle_with(bundle, many, directory / "devices.tar.gz"))))
    del many

    # a scenario asking for a huge file
    scenarios = directory / "huge-file"
    (scenarios / "loading").mkdir(parents=True)
    (scenarios / "loading" / "huge_file.yaml").write_text(
        "scenarios:\n"
        "  - id: loading.huge_file\n"
        "    title: A file_new of a hostile size\n"
        "    clauses: [req-create-returns-request]\n"
        "    steps:\n"
        f"      - file_new: {{file: f, size: {file_bytes}, seed: 1}}\n"
        "      - req_create: {req: r}\n"
        "      - req_free: {req: r}\n"
    )
    name = f"file_new of {file_bytes:,} bytes: run"
    from host.suite import load_catalogue, load_corpus
    from reference_model.errors import KitError

    try:
        load_corpus(scenarios, known_clauses=load_catalogue().ids())
    except KitError as exc:
        row = measure_cli(directory, name, "run", "--target", "local", "--build-dir", str(build),
                          "--scenarios", str(scenarios), "--out", str(directory / "huge-run"), "-q")
        row["said"] = str(exc).splitlines()[0][:150]
        rows.append(row)
    else:
        rows.append({"case": name, "exit": None, "peak_mb": None, "seconds": None,
                     "said": "ACCEPTED by the scenario loader: not run (the probe would fill that much shared memory)"})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--line-mb", type=int, default=100, help="size of the one long line (MB)")
    parser.add_argument("--lines", type=int, default=3_000_000, help="lines in the flood")
    parser.add_argument("--digits", type=int, default=1_000_000, help="digits of the long integers")
    parser.add_argument("--devices", type=int, default=100_000, help="unplanned device records in the bundle")
    parser.add_argument("--file-bytes", type=int, default=3 << 30, help="size a scenario's file_new asks for")
    parser.add_argument("--inputs-only", action="store_true", help="skip the device-output floods")
    args = parser.parse_args()
    real = ProbeBuild(DEFAULT_BUILD_DIR)
    if not real.exists():
        real = build_probe(DEFAULT_BUILD_DIR)
    with tempfile.TemporaryDirectory(prefix="npuconf-bench-hostile-") as tmp:
        directory = Path(tmp)
        rows = [] if args.inputs_only else [
            measure(directory, standin(directory, real, "none", 0), "baseline (no hostile output)"),
            measure(directory, standin(directory, real, "line", args.line_mb), f"one {args.line_mb} MB line"),
            measure(directory, standin(directory, real, "flood", args.lines), f"{args.lines:,} lines"),
        ]
        inputs = input_cases(directory, real, args.digits, args.devices, args.file_bytes)
    worst = 0.0
    if rows:
        print(f"{'case':32} {'exit':>4} {'peak MB':>8} {'seconds':>8} {'results KB':>10}  verdicts")
        for row in rows:
            verdicts = "; ".join(f"{k}: {v[0]}" for k, v in row["verdicts"].items())  # type: ignore[attr-defined]
            print(f"{row['case']:32} {row['exit']:>4} {row['peak_mb']:>8.1f} {row['seconds']:>8.1f} "
                  f"{row['results_kb']:>10.1f}  {verdicts}")
        for row in rows[1:]:
            reasons = [v[1] for v in row["verdicts"].values() if v[0] == "ERROR"]  # type: ignore[attr-defined]
            print(f"{row['case']}: {reasons[0][:160] if reasons else 'no ERROR'}")
        worst = max(float(row["peak_mb"]) for row in rows)  # type: ignore[arg-type]
        print(f"peak host memory under device floods: {worst:.1f} MB (target < {LIMIT_MB:.0f} MB)")
    print()
    print(f"{'input':44} {'exit':>4} {'peak MB':>8} {'seconds':>8}  first line")
    ok = worst < LIMIT_MB
    for row in inputs:
        measured = row["peak_mb"] is not None
        peak = f"{row['peak_mb']:>8.1f}" if measured else f"{'-':>8}"
        seconds = f"{row['seconds']:>8.1f}" if measured else f"{'-':>8}"
        print(f"{row['case']:44} {row['exit']!s:>4} {peak} {seconds}  {row['said']}")
        if not measured or float(row["peak_mb"]) >= LIMIT_MB or float(row["seconds"]) >= LIMIT_S:  # type: ignore[arg-type]
            ok = False
    print(f"every input under {LIMIT_MB:.0f} MB and {LIMIT_S:.0f} s: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

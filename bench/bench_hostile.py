"""Peak host memory and time of the kit against hostile device output and hostile inputs.

    python bench/bench_hostile.py [--line-mb 100] [--lines 3000000] [--digits 1000000]
                                  [--devices 100000] [--file-bytes 3221225472]

A stand-in probe wraps the real one (build/probe) and, just before the `exit` event of the first
scenario, prints either one line of --line-mb megabytes or --lines short trace lines; the other
scenario runs for real. Each case is a fresh `npuconf run` in its own interpreter; the figure is that
interpreter's peak resident memory (ru_maxrss, the stand-in probe not counted), next to a run with
no hostile output. Default limits apply (docs/hostile.md, "Limits"): the flooded scenario is ERROR
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
  as accepted, unmeasured; the same for 48 `file_new` steps of 64 MiB each;
- **results.jsonl at and past its limits**: a results.jsonl of whole-corpus traces just under
  `results_bytes` (through `report` and `verify`); one of tiny result records at `result_records`; a
  plan of `plan_entries` pairs and no result (a bundle of a few hundred KB); a results.jsonl past
  `results_bytes` that compresses to a small bundle (refused at its header);
- **bundle members**: a junit.xml entity bomb; a trusted key that is /dev/zero, a waiver file that is a
  FIFO;
- **the adb client**: a shell v2 frame announcing 1.4 GB, from a stand-in adb server;
- **store rows**: a duration of 1e308 and JSON nested 200 000 deep, through `dashboard`.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _bundle_with(original: Path, results: Path, target: Path) -> Path:
    """The bundle `original` with the results.jsonl at `results`, its manifest listing the new hash (so verify
    reads it). Made in a child process: this one stays small (see input_cases)."""
    code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "import bench_hostile as b; b._make_bundle_with(*map(Path, sys.argv[2:]))")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(original), str(results),
                           str(target)],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False, capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"cannot make {target}:\n{done.stderr[-2000:]}")
    return target


def _make_bundle_with(original: Path, results_path: Path, target: Path) -> None:
    _replace_member(original, "results.jsonl", results_path.read_bytes(), target)


def _replace_member(original: Path, name: str, data: bytes, target: Path) -> None:
    """A copy of the bundle `original` at `target` whose member `name` holds `data`, its manifest hash
    updated to match (what a forger who knows the format would do)."""
    with tarfile.open(original, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    members[name] = data
    manifest = json.loads(members["manifest.json"])
    manifest["files"][name] = hashlib.sha256(data).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member, content in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    target.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))


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
                            str(_bundle_with(bundle, long_dir / "results.jsonl", directory / "long.tar.gz"))))

    # device records for devices the plan never named (each as small as a device record can be)
    end = next((i for i, r in enumerate(records) if r.get("kind") == "end"), len(lines))
    many_path = directory / "many-devices.jsonl"
    with many_path.open("w") as handle:
        handle.writelines(line + "\n" for line in lines[:end])
        for i in range(devices):
            ghost = {"kind": "device", "device": f"ghost-{i}", "info": {"serial": f"ghost-{i}"}}
            handle.write(json.dumps(ghost) + "\n")
        handle.writelines(line + "\n" for line in lines[end:])
    rows.append(measure_cli(directory, f"{devices:,} device records: verify", "verify",
                            str(_bundle_with(bundle, many_path, directory / "devices.tar.gz"))))

    # measured before anything below loads the corpus in this process (a child starts from its size)
    rows.extend(results_cases(directory, real, bundle))
    rows.extend(member_cases(directory, bundle))
    rows.append(adb_frame_case(directory))
    rows.extend(store_cases(directory, base))

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
    many_files = directory / "many-files"
    (many_files / "loading").mkdir(parents=True)
    steps = "".join(f"      - file_new: {{file: f{i}, size: 67108864, seed: {i}}}\n" for i in range(48))
    (many_files / "loading" / "many.yaml").write_text(
        "scenarios:\n  - id: loading.many_files\n    title: 48 files of 64 MiB\n"
        f"    clauses: [req-create-returns-request]\n    steps:\n{steps}"
    )
    try:
        load_corpus(many_files, known_clauses=load_catalogue().ids())
    except KitError:
        rows.append(measure_cli(directory, "48 file_new of 64 MiB: run", "run", "--target", "local", "--build-dir",
                                str(build), "--scenarios", str(many_files), "--out", str(directory / "many-run"), "-q"))
    else:
        rows.append({"case": "48 file_new of 64 MiB: run", "exit": None, "peak_mb": None, "seconds": None,
                     "said": "ACCEPTED by the scenario loader: not run (the probe would fill 3 GiB)"})
    return rows


def _limit(name: str) -> int:
    from floor.limits import limit

    return limit(name)


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open() as handle:
        for line in handle:
            yield json.loads(line)


def results_cases(directory: Path, real: ProbeBuild, bundle: Path) -> list[dict[str, object]]:
    """results.jsonl at its limits: real traces up to results_bytes, tiny records up to result_records, a plan
    of plan_entries pairs with no result, and a file past results_bytes in a small bundle. Every input is
    written record by record: this process stays small (see input_cases)."""
    rows = []
    full = directory / "full-run"
    rows.append(measure_cli(directory, "the whole corpus, one device: run", "run", "--target", "local", "--out",
                            str(full), "-q", "--store", str(directory / "full.sqlite")))
    source = full / "results.jsonl"
    plan = next(_records(source))
    result = next(r for r in _records(source) if r["kind"] == "result")
    device = next(r for r in _records(source) if r["kind"] == "device")
    per_device = sum(len(json.dumps(r)) + 1 for r in _records(source) if r["kind"] in ("device", "result"))
    copies = max(1, (_limit("results_bytes") - len(json.dumps(plan)) - 4096) // per_device)
    big = directory / "big-results"
    big.mkdir()
    with (big / "results.jsonl").open("w") as handle:
        handle.write(json.dumps({**plan, "devices": [f"d{i}" for i in range(copies)]}) + "\n")
        for i in range(copies):
            handle.writelines(json.dumps({**r, "device": f"d{i}"}) + "\n" for r in _records(source)
                              if r["kind"] in ("device", "result"))  # fmt: skip
    size = (big / "results.jsonl").stat().st_size
    label = f"{size / 1e6:.0f} MB of real traces ({copies} devices)"
    rows.append(measure_cli(directory, f"{label}: report", "report", str(big)))
    big_bundle = directory / "big.tar.gz"
    rows.append(measure_cli(directory, f"{label}: bundle", "bundle", str(big), "--out", str(big_bundle)))
    rows.append(measure_cli(directory, f"{label}: verify", "verify", str(big_bundle)))

    tiny = directory / "tiny-records"
    tiny.mkdir()
    devices = _limit("plan_entries") // max(1, len(plan["scenarios"]))
    ids = [s["id"] for s in plan["scenarios"]]
    with (tiny / "results.jsonl").open("w") as handle:
        handle.write(json.dumps({**plan, "devices": [f"d{i}" for i in range(devices)]}) + "\n")
        for i in range(devices):
            handle.write(json.dumps({**device, "device": f"d{i}"}) + "\n")
            handle.writelines(json.dumps({**result, "device": f"d{i}", "scenario": sid, "trace": []}) + "\n"
                              for sid in ids)  # fmt: skip
    label = f"{devices * len(ids):,} traceless results ({devices} devices)"
    rows.append(measure_cli(directory, f"{label}: report", "report", str(tiny)))
    tiny_bundle = _bundle_with(bundle, tiny / "results.jsonl", directory / "tiny.tar.gz")
    rows.append(measure_cli(directory, f"{label}: verify", "verify", str(tiny_bundle)))

    unplanned = directory / "unplanned"
    unplanned.mkdir()
    with (unplanned / "results.jsonl").open("w") as handle:
        handle.write(json.dumps(plan) + "\n" + json.dumps(device) + "\n")
        handle.writelines(json.dumps({**result, "scenario": f"x.s{i}", "trace": []}) + "\n"
                          for i in range(_limit("result_records")))  # fmt: skip
    rows.append(measure_cli(directory, f"{_limit('result_records'):,} results for unplanned pairs: report",
                            "report", str(unplanned)))

    empty = directory / "planned-only"
    empty.mkdir()
    info = {k: device["info"][k] for k in ("serial", "fingerprint", "abis", "sdk") if k in device["info"]}
    with (empty / "results.jsonl").open("w") as handle:
        handle.write(json.dumps({**plan, "devices": [f"d{i}" for i in range(devices)]}) + "\n")
        handle.writelines(json.dumps({**device, "device": f"d{i}", "info": info}) + "\n" for i in range(devices))
    kb = (empty / "results.jsonl").stat().st_size // 1024
    label = f"{devices} devices x {len(plan['scenarios'])} planned, no result ({kb} KB)"
    rows.append(measure_cli(directory, f"{label}: report", "report", str(empty)))
    small = _bundle_with(bundle, empty / "results.jsonl", directory / "planned.tar.gz")
    rows.append(measure_cli(directory, f"{label}: verify ({small.stat().st_size // 1024} KB bundle)", "verify",
                            str(small)))

    over = directory / "over.jsonl"
    shutil.copy(empty / "results.jsonl", over)
    with over.open("ab") as handle:
        block = b"\n" * (1 << 20)
        for _ in range(3 * (_limit("results_bytes") >> 20)):
            handle.write(block)
    huge = _bundle_with(bundle, over, directory / "over.tar.gz")
    rows.append(measure_cli(directory, f"results.jsonl of {over.stat().st_size >> 20} MiB in a "
                                       f"{huge.stat().st_size // 1024} KB bundle: verify", "verify", str(huge)))
    return rows


BOMB = (
    '<?xml version="1.0"?><!DOCTYPE lol [<!ENTITY a "aaaaaaaaaa">'
    + "".join(f'<!ENTITY {chr(98 + i)} "' + f"&{chr(97 + i)};" * 10 + '">' for i in range(8))
    + ']><testsuites><testsuite name="&i;"/></testsuites>'
)


def member_cases(directory: Path, bundle: Path) -> list[dict[str, object]]:
    """A junit.xml entity bomb; a trusted key that is /dev/zero; a waiver file that is a FIFO."""
    bomb = directory / "bomb.tar.gz"
    _replace_member(bundle, "junit.xml", BOMB.encode(), bomb)
    fifo = directory / "waivers.fifo"
    os.mkfifo(fifo)
    return [
        measure_cli(directory, "junit.xml entity bomb: verify", "verify", str(bomb)),
        measure_cli(directory, "/dev/zero as --trusted-key: verify", "verify", str(bundle), "--trusted-key",
                    "/dev/zero"),
        measure_cli(directory, "a FIFO as --waivers: verify", "verify", str(bundle), "--waivers", str(fifo)),
    ]


ADB_FRAME = """import resource, socket, struct, sys, threading, time
from host.targets.adb.transport import shell_v2
from host.targets.adb_host import AdbServerAddress
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
def device():
    conn, _ = server.accept()
    for _ in range(2):  # host:transport:SERIAL, then the service
        conn.recv(int(conn.recv(4), 16))
        conn.sendall(b"OKAY")
    conn.sendall(struct.pack("<BI", 1, 1_400_000_000) + b"y" * 65536)
    time.sleep(30)
threading.Thread(target=device, daemon=True).start()
started = time.monotonic()
code = 0
try:
    shell_v2(AdbServerAddress("127.0.0.1", server.getsockname()[1]), "hostile", "getprop", 5.0)
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
    code = 2
print("BENCH", code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.monotonic() - started, file=sys.stderr)
"""


def adb_frame_case(directory: Path) -> dict[str, object]:
    """The kit's adb client against a device whose shell v2 frame announces 1.4 GB and sends 64 KiB."""
    done = subprocess.run([sys.executable, "-c", ADB_FRAME], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False, timeout=120)
    line = next((x for x in done.stderr.splitlines() if x.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"adb frame: no measurement\n{done.stderr[-2000:]}")
    _, code, rss_kb, seconds = line.split()
    return {"case": "a 1.4 GB shell v2 frame: adb client", "exit": int(code), "peak_mb": int(rss_kb) / 1024,
            "seconds": float(seconds), "said": done.stdout.strip()[:150]}


def store_cases(directory: Path, base: Path) -> list[dict[str, object]]:
    """Store rows another lab wrote: a duration of 1e308 and JSON nested 200 000 deep, through dashboard."""
    import sqlite3

    store = directory / "hostile.sqlite"
    rows = [measure_cli(directory, "store import (for the hostile rows)", "store", "import", str(base), "--store",
                        str(store))]
    nested = "[" * 200_000 + "]" * 200_000
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE verdicts SET duration_ms = 1e308")
        conn.execute("UPDATE runs SET partial = ?", (nested,))
        conn.execute("UPDATE atlas_entries SET choices = ?", (nested,))
    rows.append(measure_cli(directory, "1e308 durations, nested JSON: dashboard", "dashboard", "--store", str(store),
                            "--out", str(directory / "dash")))
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

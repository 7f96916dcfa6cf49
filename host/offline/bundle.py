"""Submission bundles: `npuconf bundle DIR` packs a run (`npuconf verify BUNDLE` checks one: verify.py).

A bundle is a tar.gz holding results.jsonl, junit.xml, report.html, summary.json, atlas.json and
manifest.json (and manifest.sig when signed). The manifest lists the SHA-256 of every other file, the tree hashes
of the kit that made it (kit, model, probe sources, suite), the run id, each device's build fingerprint and
the run's claim (reports/answers/claim.py). What `verify` checks is in verify.py and docs/reports.md.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from floor.safe_io import atomic_output, checked_name, read_unfollowed
from reference_model.errors import KitError
from reports.answers.claim import claim_of
from reports.recorded.outputs import ATLAS_FILE, HTML_FILE, JUNIT_FILE, RESULTS_FILE, SUMMARY_FILE
from reports.recorded.results import RunResults, read_results_bytes
from reports.renderers.run_reports import write_run_reports

from .. import KIT_VERSION
from ..suite import checkout_tree_hashes
from . import signing
from .run_dir import load_planned_run

# 2: `tree_hashes` (suite) replaced `hashes` (corpus), which verify still reads
BUNDLE_SCHEMA: Final = 2
MANIFEST: Final = "manifest.json"
BUNDLE_FILES: Final = (RESULTS_FILE, JUNIT_FILE, HTML_FILE, SUMMARY_FILE)
# Files a bundle holds that bundles made before them lack: verify checks them when present.
LATER_FILES: Final = (ATLAS_FILE,)


class BundleUnreadable(KitError):
    """The bundle cannot be read at all (not a tar.gz, no manifest): exit 3."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class BundleOutcome:
    path: Path
    run_id: str
    files: tuple[str, ...]


def device_fingerprints(run: RunResults) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for serial in run.device_serials:
        value = run.devices.get(serial, {}).get("fingerprint")
        out[serial] = value if isinstance(value, str) else None
    return out


def make_bundle(run_dir: Path, out: Path | None = None, sign_key: Path | None = None) -> BundleOutcome:
    """Regenerate the run's reports and pack them with results.jsonl and a manifest into a tar.gz;
    with `sign_key` (Ed25519), also manifest.sig (signing.py)."""
    key = signing.load_private_key(sign_key) if sign_key is not None else None
    path, run, plan = load_planned_run(run_dir, "a bundle")
    default_name = f"{checked_name(plan.run_id, 'run_id')}.bundle.tar.gz" if out is None else ""
    reports = write_run_reports(run, path.parent)  # the run as loaded: read once, rendered once
    contents = {RESULTS_FILE: read_results_bytes(path)}
    contents.update({p.name: read_unfollowed(p) for p in reports.values() if p.name in (*BUNDLE_FILES, *LATER_FILES)})
    manifest: dict[str, Any] = {
        "kind": "npuconf-bundle",
        "schema": BUNDLE_SCHEMA,
        "run_id": plan.run_id,
        "profile": plan.profile,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "kit_version": KIT_VERSION,
        "tree_hashes": checkout_tree_hashes(),
        "plan": {
            "kit_version": plan.kit_version,
            "vocabulary": plan.vocabulary,
            "model_hash": plan.model_hash,
            "corpus_hash": plan.corpus_hash,
        },
        "devices": device_fingerprints(run),
        "claim": claim_of(run).to_json(),
        "files": {name: sha256_hex(data) for name, data in sorted(contents.items())},
    }
    contents[MANIFEST] = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    if key is not None:
        contents[signing.SIGNATURE] = signing.sign(contents[MANIFEST], key)
    target = out if out is not None else path.parent / default_name
    _write_tar(target, contents)
    return BundleOutcome(target, plan.run_id, tuple(contents))


def _write_tar(target: Path, contents: Mapping[str, bytes]) -> None:
    """A reproducible tar.gz: fixed order, times, owners and modes."""
    with (
        atomic_output(target) as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name in (MANIFEST, *sorted(n for n in contents if n != MANIFEST)):
            data = contents[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))

"""bench/mutation.py: the mutants it makes of C and of the model, the equivalents file, and a 20-mutant sample
of the virtual NPU run through the corpus (the campaign's figures are in bench/README.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import mutation  # noqa: E402
import mutation_c  # noqa: E402
import mutation_model  # noqa: E402

# What a sampled mutant may end as: told apart by the corpus (killed, or incomplete naming a clause it kept
# from being demonstrated), allowed by the text and named by a WARN or explained as legal, explained in
# bench/mutation_equivalent.yaml, or refused by gcc; or unjudged (TIMEOUT, ERROR: the kit says incomplete)
# where an entry says why no scenario can make it a FAIL.
ANSWERED = {"killed", "incomplete", "legal", "warned", "equivalent", "uncompiled"}


def _answered(outcome: dict) -> bool:
    return outcome["status"] in ANSWERED or (outcome["status"] == "unjudged" and bool(outcome["explained"]))

C_SAMPLE = """\
#include <errno.h>
/* a comment with a < b */
static int f(int a, int b) {
    if (a < b && !b)
        return -1;
#ifdef VNPU_DEFECT_SOMETHING
    if (a == 3) return 7;
#endif
    const char *s = "x > y";
    g(s);
    return a + 1 == 2 ? EINVAL : 0;
}
static const int table[] = {1, 2};
"""


def changes(text):
    return {(m.line, m.operator, m.change) for m in mutation_c.mutants_of("t.c", text)}


def test_c_mutants_leave_comments_strings_defect_switches_and_globals_alone():
    found = changes(C_SAMPLE)
    assert (4, "relational", "< -> <=") in found
    assert (4, "logical", "&& -> ||") in found
    assert (4, "logical", "! -> ") in found
    assert (4, "negate", "a < b && !b -> !(...)") in found
    assert (5, "return", "-1 -> 0") in found
    assert (10, "delete", "g(s); -> ;") in found
    assert (11, "errno", "EINVAL -> ENOENT") in found
    assert (11, "arithmetic", "+ -> -") in found
    assert (11, "constant", "1 -> 2") in found and (11, "constant", "1 -> 0") in found
    assert not [c for c in found if c[0] in (2, 7, 9, 13)]  # comment, defect switch, string, global initialiser
    assert (5, "constant", "1 -> 0") not in found  # `return -1` -> 0 is the return mutant already


def test_a_c_mutant_changes_only_its_own_characters():
    for m in mutation_c.mutants_of("t.c", C_SAMPLE):
        mutated = m.apply(C_SAMPLE)
        assert mutated[: m.start] == C_SAMPLE[: m.start]
        assert mutated[m.start + len(m.replacement) :] == C_SAMPLE[m.end :]


def test_every_vnpu_mutant_has_its_own_key():
    keys = [m.key for m in mutation.all_mutants()]
    assert len(keys) == len(set(keys)) > 1000


def test_every_equivalents_entry_still_explains_a_mutant_of_the_sources():
    """An entry written for code that changed since explains nothing: it must be rewritten or dropped."""
    mutants = mutation.all_mutants()
    stale = [e for e in mutation.load_equivalents() if not any(e.covers(m) for m in mutants)]
    assert not stale
    model = mutation_model.all_mutants()
    stale_model = [e for e in mutation_model.load_equivalents() if not any(e.covers(m) for m in model)]
    assert not stale_model


def test_a_legal_entry_explains_only_an_incomplete_run_and_leaves_it_out_of_the_score():
    m = next(m for m in mutation.all_mutants(["vnpu_victim.c"]) if m.function == "pick")
    legal = mutation.Equivalent(file="vnpu_victim.c", kind="legal", reason="r", function="pick")
    same = mutation.Equivalent(file="vnpu_victim.c", kind="same-behaviour", reason="s", function="pick")
    assert mutation.explained(m, [legal, same], "incomplete") is legal
    assert mutation.explained(m, [legal, same], "survived") is same
    assert mutation.explained(m, [legal], "survived") is None
    assert mutation.explained(m, [legal], "unjudged") is None
    outcomes = [mutation.Outcome(m, s) for s in ("killed", "killed", "killed", "incomplete", "legal", "warned")]
    totals = mutation.totals(outcomes)
    assert totals["legal"] == 1 and totals["score"] == 0.75  # 3 killed of 4: the legal and the warned are out


def test_model_list_lists_without_judging(capsys):
    assert mutation.main(["--model", "--list", "--module", "priority"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("mutants") and "priority:" in out and "stored results" not in out


def test_a_model_mutant_is_swapped_in_and_put_back():
    from reference_model import priority

    m = next(m for m in mutation_model.all_mutants(["priority"]) if m.operator == "constant")
    fn = mutation_model.live_function(m)
    before = fn.__code__
    with mutation_model.swapped(m):
        assert fn.__code__ is not before
        assert getattr(priority, m.target.split(".")[0]).__code__ is fn.__code__
    assert fn.__code__ is before


def test_failures_of_a_defect_are_kept_per_clause_and_kind_of_event():
    def failing(clause, event, line=2):
        trace = [json.dumps({"ev": "begin"}), json.dumps(event)]
        return {"verdict": "FAIL", "divergence": {"clause": clause, "event": line}, "trace": trace}

    at_teardown = failing("load-fd-ownership", {"ev": "ret", "op": "await_closed", "closed": False})
    at_check = failing("load-fd-ownership", {"ev": "ret", "op": "fd_check", "closed": False})
    assert mutation_model.failure_kind(at_teardown) == ("load-fd-ownership", "ret await_closed")
    assert mutation_model.failure_kind(at_check) == ("load-fd-ownership", "ret fd_check")
    settle = failing("preempt-onpreempt-purpose", {"ev": "settle", "what": "deleters"})
    assert mutation_model.failure_kind(settle) == ("preempt-onpreempt-purpose", "settle deleters")
    assert mutation_model.failure_kind(failing("free-returns", {"ev": "ret"}, line=9)) == ("free-returns", "")


@pytest.mark.slow
def test_a_sample_of_twenty_vnpu_mutants_is_each_answered(tmp_path, probe_build):
    out = tmp_path / "sample.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mutation.py"), "--sample", "20", "--seed", "1", "--jobs", "2",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mutants 20, compiled" in done.stdout and "score" in done.stdout, done.stdout[-2000:]
    data = json.loads(out.read_text())
    assert data["totals"]["mutants"] == 20
    unanswered = [f"{m['key']} {m['change']!r}: {m['status']} {m['detail']}" for m in data["mutants"]
                  if not _answered(m)]  # fmt: skip
    assert not unanswered, "\n".join(unanswered)

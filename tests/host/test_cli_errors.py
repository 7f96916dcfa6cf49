"""User errors: one line naming what is wrong, exit 3, never a traceback."""

import textwrap

from tests.conftest import npuconf


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_malformed_scenario_names_file_scenario_and_field(tmp_path):
    bad = write(
        tmp_path / "scenarios" / "cookies" / "bad.yaml",
        """\
        id: cookies.bad
        title: A scenario with a wrong argument
        clauses: [cookie-replace-deletes-previous]
        steps:
          - req_create: {req: r}
          - req_set_cookie: {req: r, cookie: null, deleter: maybe}
        """,
    )
    done = npuconf("run", "--scenarios", tmp_path / "scenarios", "--out", tmp_path / "out", "-q")
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(bad) in lines[0] or "bad.yaml" in lines[0]
    assert "cookies.bad" in lines[0]
    assert "steps[1].req_set_cookie.deleter" in lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_yaml_syntax_error_names_the_line(tmp_path):
    write(tmp_path / "scenarios" / "requests" / "broken.yaml", "id: x\nsteps: [\n")
    done = npuconf("run", "--scenarios", tmp_path / "scenarios", "--out", tmp_path / "out", "-q")
    assert done.returncode == 3
    assert "broken.yaml" in done.stderr and "line" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_clause_and_bad_keyword_are_usage_errors(tmp_path):
    done = npuconf("run", "--clause", "no-such-clause", "--out", tmp_path / "a", "-q")
    assert done.returncode == 3 and "no-such-clause" in done.stderr
    done = npuconf("run", "-k", "(cookie", "--out", tmp_path / "b", "-q")
    assert done.returncode == 3 and "-k" in done.stderr
    done = npuconf("run", "--target", "mars")
    assert done.returncode == 3 and "Traceback" not in done.stderr


def test_missing_impl_library_is_a_usage_error(tmp_path):
    done = npuconf("run", "--target", "local", "--impl", tmp_path / "nope.so", "--out", tmp_path / "o", "-q")
    assert done.returncode == 3
    assert "nope.so" in done.stderr and "Traceback" not in done.stderr


def test_an_output_path_that_is_a_file_names_the_option_that_gave_it(tmp_path):
    taken = write(tmp_path / "taken", "not a directory\n")
    for args in (["run", "--target", "local", "-k", "free.empty_list", "--out", taken, "-q"],
                 ["run", "--target", "local", "-k", "free.empty_list", "--out", taken / "below", "-q"]):
        done = npuconf(*args)
        assert done.returncode == 3, done.stderr
        assert done.stderr.startswith(f"npuconf: --out {args[-2]}: ") and "not a directory" in done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
    assert taken.read_text() == "not a directory\n"


def test_a_clause_no_scenario_can_cite_says_why(tmp_path):
    done = npuconf("run", "--target", "local", "--clause", "req-device-opaque", "--out", tmp_path / "o", "-q")
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("npuconf: --clause req-device-opaque: no scenario cites it: the catalogue marks "
                                  "it not testable (informative: valid device numbers are vendor-specific")


def test_a_waiver_file_for_other_devices_says_it_waives_nothing(tmp_path):
    waivers = write(tmp_path / "w.yaml", """\
        waivers:
          - scenario: "free.empty_list*"
            device: "acme/falcon/*"
            reason: "for another product"
            expires: 2099-12-31
        """)
    done = npuconf("run", "--target", "local", "-k", "free.empty_list", "--waivers", waivers,
                   "--out", tmp_path / "o", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"npuconf: note: --waivers {waivers}: no entry's device glob matches a device of this run (local " \
        in done.stderr, done.stderr
    typo = write(tmp_path / "typo.yaml", """\
        waivers:
          - scenario: "free.empty_lst"
            device: "*"
            reason: "typo"
            expires: 2099-12-31
        """)
    done = npuconf("run", "--target", "local", "--waivers", typo, "--out", tmp_path / "t", "-q")
    assert done.returncode == 3 and "did you mean 'free.empty_list'" in done.stderr, done.stderr

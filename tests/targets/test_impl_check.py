"""--impl checking survives a library whose constructor prints invalid UTF-8 and unfinished lines."""

import subprocess

import pytest

from host.errors import UsageError
from host.targets.impl_check import check_impl
from tests.conftest import npuconf

pytestmark = pytest.mark.slow

# Invalid UTF-8, a terminal escape, a line without its newline, and something that looks like JSON:
# written both unbuffered (fd 1) and through stdio (flushed at exit, after the checker's answer).
NOISY_CONSTRUCTOR = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void noisy(void) {
    static const char junk[] = "\xff\xfe\xc3(\x1b[2J{\"found\": [\"x\"]";
    (void)!write(1, junk, sizeof junk - 1);
    printf("\x80\x81 no newline {\"error\": \"fake\"}");
}
"""

EXPORTS_ONE = """
extern int ANpuBuffer_free(void *b);
__attribute__((visibility("default"))) int ANpuBuffer_free(void *b) { (void)b; return 0; }
"""


def _library(directory, name, source):
    c_file = directory / f"{name}.c"
    c_file.write_text(source)
    library = directory / f"lib{name}.so"
    subprocess.run(
        ["cc", "-std=c11", "-shared", "-fPIC", "-fvisibility=hidden", "-o", str(library), str(c_file)],
        check=True,
        capture_output=True,
    )
    return library


def test_noisy_library_that_exports_a_function_is_answered(tmp_path):
    library = _library(tmp_path, "noisy_one", NOISY_CONSTRUCTOR + EXPORTS_ONE)
    assert check_impl(library) == ("ANpuBuffer_free",)


def test_noisy_library_that_exports_nothing_is_a_clear_usage_error(tmp_path):
    library = _library(tmp_path, "noisy_none", NOISY_CONSTRUCTOR)
    with pytest.raises(UsageError, match="exports none of the 18 functions"):
        check_impl(library)


def test_noisy_library_on_the_command_line_is_one_line_and_exit_3(tmp_path):
    library = _library(tmp_path, "noisy_none", NOISY_CONSTRUCTOR)
    done = npuconf("run", "--target", "local", "--impl", library, "--out", tmp_path / "out", "-q")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"npuconf: --impl {library}: exports none"), line

"""The probe seen from the host: building it (host, sanitizer, cross and NDK builds), compiling scenarios
into probe programs, running it as a local process, the one reader that splits a batch's output into
per-scenario traces (for every transport), and the trace types a probe run hands back."""

from .batch_reader import BatchReader as BatchReader
from .batch_reader import Finished as Finished
from .batch_reader import ProbeEnded as ProbeEnded
from .batch_reader import Silent as Silent
from .build import DEFAULT_BUILD_DIR as DEFAULT_BUILD_DIR
from .build import PROBE_NAME as PROBE_NAME
from .build import PROBE_SOURCE as PROBE_SOURCE
from .build import VNPU_NAME as VNPU_NAME
from .build import ProbeBuild as ProbeBuild
from .build import build_probe as build_probe
from .build import current_build as current_build
from .output import BatchOutcome as BatchOutcome
from .output import BoundedBytes as BoundedBytes
from .output import LineSplitter as LineSplitter
from .output import RawLine as RawLine
from .output import ScenarioTrace as ScenarioTrace
from .output import api_missing_line as api_missing_line
from .output import check_listed_op_table as check_listed_op_table
from .output import exit_event_scenario as exit_event_scenario
from .output import host_exit_line as host_exit_line
from .process import check_op_table as check_op_table
from .process import run_batch as run_batch
from .program import CompiledScenario as CompiledScenario
from .program import CompileError as CompileError
from .program import Pairs as Pairs
from .program import compile_program as compile_program
from .program import compile_scenario as compile_scenario
from .program import program_header as program_header
from .reaping import RUNNING_PROBES as RUNNING_PROBES
from .reaping import run_contained as run_contained
from .toolchains import build_for as build_for
from .toolchains import cross_build_dir as cross_build_dir
from .toolchains import probe_build_command as probe_build_command
from .toolchains import qemu_prefix as qemu_prefix

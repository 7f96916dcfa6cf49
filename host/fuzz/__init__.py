"""Model-based fuzzing (`npuconf fuzz`): random API programs built from the caller's state, run on any
target through the run's own probe batches and judge, each divergence shrunk to a scenario YAML that
`npuconf run --scenarios DIR` replays. Above `run` in the layer order."""

from .campaign import Budget as Budget
from .campaign import FuzzOutcome as FuzzOutcome
from .campaign import FuzzRequest as FuzzRequest
from .campaign import fuzz as fuzz
from .command import fuzz_command as fuzz_command
from .execute import ProgramRunner as ProgramRunner
from .execute import Result as Result
from .generate import generate as generate
from .shrink import shrink as shrink
from .shrink import step_count as step_count

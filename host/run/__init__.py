"""A run, from request to results.jsonl: the plan, devices prepared and their pairs discovered, batches
executed on every target in parallel, traces judged as they arrive, records appended, reports written,
the store filled; `--resume` runs what an interrupted plan left. Exports what the CLI, the pytest layer
and the offline commands use."""

from .answer import print_answer as print_answer
from .command import run_command as run_command
from .decision import Decision as Decision
from .decision import DeviceFacts as DeviceFacts
from .decision import Judging as Judging
from .decision import NotRun as NotRun
from .decision import WhatHappened as WhatHappened
from .decision import decide as decide
from .decision import fingerprint_of as fingerprint_of
from .decision import missing_capability as missing_capability
from .decision import needs_discovery as needs_discovery
from .digests import load_digests as load_digests
from .digests import save_digests as save_digests
from .discovery import DISCOVERY_ID as DISCOVERY_ID
from .discovery import GRID as GRID
from .discovery import parse_discovery as parse_discovery
from .discovery import probed_pairs as probed_pairs
from .judging import MAX_ATTEMPTS as MAX_ATTEMPTS
from .judging import Outcome as Outcome
from .judging import allocation_refused as allocation_refused
from .judging import judge_lines as judge_lines
from .judging import not_run as not_run
from .lanes import deal_lanes as deal_lanes
from .plan import RunPlan as RunPlan
from .plan import RunRequest as RunRequest
from .plan import check_target_options as check_target_options
from .plan import new_run_id as new_run_id
from .prepared_device import PreparedDevice as PreparedDevice
from .prepared_device import caps_from_info as caps_from_info
from .prepared_device import pointer_bits as pointer_bits
from .prepared_device import prepare_device as prepare_device
from .results_writer import ResultsWriter as ResultsWriter
from .results_writer import now_iso as now_iso
from .results_writer import planned as planned
from .results_writer import result_record as result_record
from .resume import resume_run as resume_run
from .runner import DeviceRun as DeviceRun
from .shard import group_of as group_of
from .start import RunOutcome as RunOutcome
from .start import open_targets as open_targets
from .start import start_run as start_run
from .target_choice import TARGETS as TARGETS
from .target_choice import resolve_target as resolve_target

"""Commands on recorded runs, with no device: report (and merge), rejudge, bundle and verify, store import
and dashboard, and the clause catalogue with its coverage. They read run directories and bundles only;
`commands` is their console side."""

from .bundle import BundleUnreadable as BundleUnreadable
from .bundle import make_bundle as make_bundle
from .clauses import coverage as coverage
from .clauses import print_clauses as print_clauses
from .rejudge import rejudge as rejudge
from .run_dir import load_planned_run as load_planned_run
from .run_dir import run_results_path as run_results_path
from .verify import verify_bundle as verify_bundle

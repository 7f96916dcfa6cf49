"""What the kit runs and judges with, read from this checkout: the scenario corpus, the clause catalogue,
waiver files, and content hashes of the kit's parts (recorded in plans and bundles)."""

from reports.recorded.kit import provide_kit_facts

from .basis import DEVICE_TESTABLE as DEVICE_TESTABLE
from .basis import basis_of as basis_of
from .basis import claim_basis as claim_basis
from .basis import kit_facts as kit_facts
from .catalogue import Catalogue as Catalogue
from .catalogue import Clause as Clause
from .catalogue import load_catalogue as load_catalogue
from .checkout import BUILD_ROOT as BUILD_ROOT
from .checkout import CATALOGUE_PATH as CATALOGUE_PATH
from .checkout import REPO_ROOT as REPO_ROOT
from .checkout import SCENARIO_ROOT as SCENARIO_ROOT
from .corpus import check_scenario_ids as check_scenario_ids
from .corpus import corpus_hash as corpus_hash
from .corpus import keyword_matches as keyword_matches
from .corpus import load_corpus as load_corpus
from .corpus import select as select
from .hashes import HASHED_PARTS as HASHED_PARTS
from .hashes import checkout_tree_hashes as checkout_tree_hashes
from .hashes import model_hash as model_hash
from .hashes import part_tree_hash as part_tree_hash
from .safe_yaml import load_yaml_file as load_yaml_file
from .waivers import check_waiver_ids as check_waiver_ids
from .waivers import expiry_notes as expiry_notes
from .waivers import load_waiver_file as load_waiver_file
from .waivers import unmatched_devices_note as unmatched_devices_note
from .waivers import waivers_as_of as waivers_as_of

# The reports compute claims with the kit's own facts, never a record's (reports/recorded/kit.py).
provide_kit_facts(kit_facts)

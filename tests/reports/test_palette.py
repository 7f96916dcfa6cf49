"""The pages' one palette: every verdict has its colour in reports/renderers/html.py, and no template spells one."""

import re

from reference_model.verdicts import Verdict
from reports.renderers.html import TEMPLATES_DIR, VERDICT_COLOURS, colour_variables


def test_every_verdict_has_a_colour():
    assert set(VERDICT_COLOURS) == set(Verdict)


def test_the_templates_declare_their_colours_from_the_palette():
    declared = re.compile(r"--[A-Z_]+:\s*#")
    for template in sorted(TEMPLATES_DIR.glob("*.j2")):
        assert not declared.search(template.read_text(encoding="utf-8")), template.name
    assert colour_variables(("PASS", "REGRESSION")) == "--PASS: #2e7d32; --REGRESSION: #ffd600;"

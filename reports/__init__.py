"""Everything rendered from a run's results.jsonl and the results store: junit.xml, report.html,
summary.json and atlas.json (run_reports.py writes the four), the spec page, errata, fuzz reports,
runs merged, the store and its dashboard.

The package exports nothing: each module is imported by name, so a command that only needs the run
directory's file names (outputs.py) or the store loads no renderer."""

"""The files and pages the kit writes from a recorded run, its answers and the store: junit.xml,
report.html, summary.json and atlas.json (run_reports.py writes the four), the spec page, the errata
draft, fuzz reports and the dashboard, with their templates."""

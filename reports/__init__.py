"""Everything rendered from a run's results.jsonl and the results store: junit.xml, report.html,
summary.json and atlas.json, the spec page, errata, fuzz reports, runs merged, the store and its dashboard.

Rooms, lowest first (a room imports only from rooms below it; tests/host/test_layers.py checks it):
`recorded` (the recorded run: results.jsonl's records, a run as values, the plan's options, runs merged),
`answers` (what the records answer: the claim, each clause's answer, findings, the behaviour atlas, a
baseline comparison), `store` (runs kept in one database), `renderers` (the files and pages: junit.xml,
report.html, summary.json, atlas.json, the spec page, errata, fuzz reports, the dashboard).

The packages export nothing: each module is imported by name, so a command that only needs the run
directory's file names (recorded/outputs.py) or the store loads no renderer."""

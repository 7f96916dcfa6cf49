"""The recorded run: results.jsonl's records (one writer, one reader), a run as values, what the kit knows
that no record may say, the plan's options and filters, the files of a run directory, replay commands,
and runs merged into one results.jsonl. It imports nothing of reports' other rooms."""

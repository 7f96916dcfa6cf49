"""What a recorded run answers, as values: the claim, the answer of each clause on each device, the
failures a reader acts on first, the behaviour atlas, the comparison with a baseline run. Pure functions
over reports.recorded; nothing here writes a file."""

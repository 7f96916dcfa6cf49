"""The kit-wide floor every room stands on, whatever command runs: files written and read safely
(safe_io.py: no other user's symlink followed, atomic replacement, bounded reads, text made safe for a
console), the named bounds on what the kit holds (limits.py), one JSON object per line (jsonl.py), the
per-user cache of pure computations (user_cache.py), counts in words for every printed line (words.py),
the cross builds the kit knows (cross_targets.py).
It imports nothing of the kit but reference_model's errors, so every other room may use it."""

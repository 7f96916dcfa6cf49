"""The executable spec of android/npumanager/buffer.h (API 37): pure Python, no I/O."""

"""Publishing: what leaves the lab. Submissions trees (``submissions``: the tree's layout and
its check, loading a checked tree into the registry, filing runs into one) and the static
leaderboard (``leaderboard``).

Publishing reads the registry and the host's analysis; the registry knows nothing of it, and
only the CLI imports it (``tests/test_layering.py`` holds both rules).
"""

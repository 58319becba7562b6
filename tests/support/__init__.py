"""Helpers the tests share and that are not tests themselves: record factories, real
PostgreSQL and SLURM clusters, hostile servers and trees, machine-load probes. Tests import
them as ``support.<module>``; pytest puts ``tests/`` on ``sys.path`` because ``tests/`` has no
``__init__.py``."""

"""Submissions trees, MLPerf-like: ``tree`` (the layout, :func:`~.tree.check_tree` and
:func:`~.tree.import_tree`), ``writer`` (the one way a file is written into a tree) and
``filing`` (``perfsuite submit``: runs filed into a tree that still checks clean).
"""

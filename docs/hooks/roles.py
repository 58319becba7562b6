"""MkDocs hook: the Sphinx roles in perfsuite's docstrings (``:class:`Check```,
``:meth:`~perfsuite.Case.verify```) shown as the code they name on the pages mkdocstrings
builds from those docstrings, instead of a literal ``:meth:`` before it. A leading ``~``
keeps the last dotted part, as Sphinx does."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj):<code>(~)?([^<]*)</code>")


def _code(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def on_page_content(html: str, page, config, files) -> str:
    """Called by MkDocs with each page's HTML after its markdown is rendered."""
    return ROLE.sub(_code, html)

"""Sections of benchmarks/RESULTS.md that other benchmarks own.

The suite (`python -m benchmarks`) rewrites RESULTS.md as a whole; a benchmark that
records its own section there (`python -m benchmarks.sharding`) writes it between

    <!-- section: NAME -->
    ...
    <!-- end section: NAME -->

with `replace_section`, and the suite keeps every such section when it rewrites the
file (`kept_sections`).
"""
from __future__ import annotations

import re
from pathlib import Path


def _pattern(name: str = r"[\w.-]+") -> re.Pattern:
    return re.compile(rf"<!-- section: ({name}) -->\n.*?<!-- end section: \1 -->\n?", re.S)


def kept_sections(path: Path) -> list[str]:
    """The owned sections of the file at `path` (none if it does not exist)."""
    if not path.exists():
        return []
    return [m.group(0).rstrip("\n") for m in _pattern().finditer(path.read_text())]


def replace_section(path: Path, name: str, body: str) -> None:
    """Put `body` into section `name` of the file at `path`, replacing the section if
    there is one and appending it otherwise."""
    block = f"<!-- section: {name} -->\n{body.rstrip()}\n<!-- end section: {name} -->\n"
    text = path.read_text() if path.exists() else ""
    pattern = _pattern(re.escape(name))
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block
    path.write_text(text)

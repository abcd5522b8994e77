"""Print the config reference table of docs/configuration.md from the section dataclasses (the single source).

    python tools/config_table.py           # print the table
    python tools/config_table.py --write   # refresh the table between the markers in docs/configuration.md

A test (tests/test_docs_and_prompts.py) checks docs/configuration.md holds exactly this table, so the docs
cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rleif_kit.core.config import SECTIONS  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, list):
        return "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
    return f"`{value}`"


def config_table() -> str:
    lines = ["| section | key | default (7B recipe) | meaning |", "|---|---|---|---|"]
    for name, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            help_text = f.metadata.get("help", "").replace("|", "\\|")
            lines.append(f"| `[{name}]` | `{f.name}` | {_default(f)} | {help_text} |")
    return "\n".join(lines)


START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def doc_with_table(doc: str) -> str:
    """The page's text with the table between its markers replaced by the current one."""
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{config_table()}\n{END}{tail}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(doc_with_table(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        print(config_table())

"""Print the config reference table of docs/configuration.md from the section dataclasses (the single source).

    python tools/config_table.py           # print the table
    python tools/config_table.py --write   # refresh the table between the markers in docs/configuration.md
    python tools/config_table.py --world my_pkg.my_world   # the keys of the section a world outside the kit brings

A test (tests/test_docs_and_prompts.py) checks docs/configuration.md holds exactly this table, so the docs
cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rleif_kit.core.config import SECTIONS, world_section  # noqa: E402

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


def config_table(sections: dict[str, type] | None = None) -> str:
    """The table of ``sections`` (default: the kit's)."""
    lines = ["| section | key | default (7B recipe) | meaning |", "|---|---|---|---|"]
    for name, cls in (sections or SECTIONS).items():
        for f in dataclasses.fields(cls):
            help_text = f.metadata.get("help", "").replace("|", "\\|")
            lines.append(f"| `[{name}]` | `{f.name}` | {_default(f)} | {help_text} |")
    return "\n".join(lines)


START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def world_table(world: str) -> str:
    """The table of the section the world ``world`` (a module path) brings, for its own docs; one line when none."""
    found = world_section(world)
    if found is None:
        return (f"[base] world = {world!r}: no section of its own (World.config_section) from a world outside the "
                "kit; the kit's worlds' sections are in docs/configuration.md")
    return config_table(dict([found])).replace("default (7B recipe)", "default")


def doc_with_table(doc: str) -> str:
    """The page's text with the table between its markers replaced by the current one."""
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{config_table()}\n{END}{tail}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(doc_with_table(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    elif sys.argv[1:2] == ["--world"] and len(sys.argv) == 3:
        sys.path.insert(0, ".")  # a world module next to where it runs, as rleif finds it
        print(world_table(sys.argv[2]))
    else:
        print(config_table())

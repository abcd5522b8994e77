"""Every command the docs name (`rleif ...`, `hf ...`, `transformers serve`) exists: each runs with --help.

The commands are read from the docs' code blocks and inline code (docs/, docs/stages/, README.md), up to their
first argument that is not a word (`rleif run params/x.toml` -> `rleif run --help`). A tool that is not installed
is skipped with the reason. `huggingface-cli` is gone from the pinned huggingface_hub (its CLI is `hf`): no doc names
it. In-process for `rleif`; a subprocess (under a second) for `hf`, a few seconds for `transformers serve`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rleif_kit.pipeline.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "stages").glob("*.md")) + [ROOT / "README.md"]
TOOLS = ("rleif", "hf", "transformers")
# Commands a doc shows as a mistake, with the line that answers it
MISTAKES = {"rleif rnu": "rleif: unknown command 'rnu'; did you mean 'run'?"}
BIN = Path(sys.executable).parent


def _code(text: str) -> list[str]:
    """Lines of the fenced blocks (continuation lines joined) and the inline code spans outside them."""
    fenced = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
    lines = [line for block in fenced.findall(text) for line in block.replace("\\\n", " ").splitlines()]
    return lines + re.findall(r"`([^`\n]+)`", fenced.sub("", text))


def doc_commands() -> dict[str, list[str]]:
    """``"rleif eval gsm8k"`` -> the docs that name it."""
    found: dict[str, set[str]] = {}
    for doc in DOCS:
        for line in _code(doc.read_text(encoding="utf-8")):
            line = line.strip().removeprefix("$ ")
            tool = Path(line.split(" ", 1)[0]).name
            if tool not in TOOLS:
                continue
            try:
                tokens = shlex.split(line.split(" #")[0])
            except ValueError:  # an unbalanced quote in prose
                continue
            words = [tool]
            for token in tokens[1:]:
                if not re.fullmatch(r"[a-z][a-z0-9-]*", token):
                    break
                words.append(token)
            if tool != "rleif" and len(words) == 1:  # `hf` alone is [evol_instruct] backend = "hf", not a command
                continue
            found.setdefault(" ".join(words), set()).add(str(doc.relative_to(ROOT)))
    return {command: sorted(docs) for command, docs in sorted(found.items())}


COMMANDS = doc_commands()


def test_the_docs_name_the_commands_they_should():
    assert {"rleif run", "rleif check-api", "rleif evolve", "rleif build-tiny", "hf download",
            "transformers serve"} <= set(COMMANDS), sorted(COMMANDS)


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - set(MISTAKES)))
def test_each_command_the_docs_name_has_help(command, capsys):
    words = command.split()
    if words[0] == "rleif":
        with pytest.raises(SystemExit) as done:
            main(words[1:] + ["--help"])
        out = capsys.readouterr().out
        assert done.value.code == 0 and out.startswith("usage: rleif"), (COMMANDS[command], out)
        return
    tool = BIN / words[0]
    if not tool.exists():
        pytest.skip(f"{words[0]} is not installed beside {sys.executable} (named in {', '.join(COMMANDS[command])})")
    proc = subprocess.run([str(tool), *words[1:], "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (COMMANDS[command], proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Usage:" in proc.stdout or "usage:" in proc.stdout, proc.stdout[:500]


@pytest.mark.parametrize("command", sorted(MISTAKES))
def test_a_mistake_the_docs_show_is_answered_as_they_say(command, capsys):
    assert command in COMMANDS, f"{command} is no longer in the docs: drop it from MISTAKES"
    assert main(command.split()[1:]) == 2
    assert capsys.readouterr().err.strip() == MISTAKES[command]


def test_no_doc_names_the_hub_cli_the_pinned_client_no_longer_ships():
    """huggingface_hub 1.0 replaced `huggingface-cli` by `hf` (`hf download`, `hf auth login`)."""
    named = [str(p.relative_to(ROOT)) for p in DOCS + [ROOT / "rleif_kit" / "models" / "loading.py"]
             if "huggingface-cli" in p.read_text(encoding="utf-8")]
    assert named == []
    assert not (BIN / "huggingface-cli").exists() or (BIN / "hf").exists()

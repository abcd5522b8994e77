"""What every model card the kit writes must hold, as helpers the training tests call on the model they trained
(tests/test_sft.py, test_reward_models.py, test_prm.py, test_ppo.py): the Hub's front matter, a usage snippet that
runs from the card's folder, and no absolute path of the test's temporary root."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from rleif_kit.models.cards import usage_code

INFO_FILES = ("README.md", "sft_info.json", "rm_info.json", "ppo_info.json", "adapter_config.json")


def front_matter(folder: Path):
    """The card's metadata as huggingface_hub reads it (``ModelCardData``)."""
    from huggingface_hub import ModelCard

    return ModelCard.load(Path(folder) / "README.md").data


def run_usage(folder: Path) -> dict:
    """Exec the card's usage snippet with ``folder`` as the working directory (as the card says to run it); its
    variables. Printing goes to a buffer (``ns["_printed"]``)."""
    code = usage_code((Path(folder) / "README.md").read_text())
    here, out, ns = os.getcwd(), io.StringIO(), {"__name__": "__card__"}
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(Path(folder) / "README.md"), "exec"), ns)
    finally:
        os.chdir(here)
    ns["_printed"] = out.getvalue()
    return ns


def absolute_paths_in(folder: Path, root: Path) -> list[str]:
    """The info files and card of ``folder`` that spell ``root`` (the test's temporary directory)."""
    spellings = {str(root), str(Path(root).resolve())}
    return [name for name in INFO_FILES if (Path(folder) / name).exists()
            and any(s in (Path(folder) / name).read_text() for s in spellings)]

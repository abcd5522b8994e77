"""How an info file (``sft_info.json``, ``rm_info.json``) names the model another one was built on, and back.

A run directory holds no absolute path, so that a moved or copied project loads where it lands
(DESIGN.md §3). An info file therefore names a local model by its path relative to the info file's own
folder (``"../../tiny-llama"``): the folder is all a reader has, and the reference stays right when the
run moves as a whole. A hub id stays a hub id. The one path kept as written is an absolute one that the
config gave for a model outside the run directory (``/models/Llama-2-7b-hf``): it was never part of the
run, so moving the run does not move it.

Relative references always start with ``./`` or ``../``, which no hub id does, so reading one back
needs no guess.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from rleif_kit.core.records import write_json_atomic

ADAPTER_CONFIG = "adapter_config.json"  # PEFT's: names the base by the path it was loaded from


def model_ref(location: str | Path, folder: Path, run_dir: Path, given: str | None = None) -> str:
    """What an info file in ``folder`` stores for the model at ``location`` (an absolute directory or a hub id).

    ``given`` is the name the config used for it, which decides only for a directory outside ``run_dir``:
    kept absolute when the config wrote an absolute path, else relative to ``folder`` like the rest.
    """
    loc = Path(location)
    if not loc.is_absolute():
        return str(location)  # a hub id (resolve_model_name gives local directories absolute)
    run_dir = Path(run_dir)
    if re.fullmatch(r"iter-\d+", run_dir.name):  # a loop iteration's base is the previous one's policy: the run's
        run_dir = run_dir.parent
    inside = loc.resolve().is_relative_to(run_dir.resolve())
    if not inside and given is not None and Path(given).expanduser().is_absolute():
        return str(location)
    rel = os.path.relpath(loc.resolve(), Path(folder).resolve())
    return rel if _relative(rel) else f"./{rel}"


def resolve_ref(ref: str, folder: str | Path) -> str:
    """Back from :func:`model_ref`: a relative reference against ``folder``; a hub id or absolute path as stored."""
    return str((Path(folder) / ref).resolve()) if _relative(ref) else ref


def is_local_ref(ref: str) -> bool:
    """Whether a stored reference names a directory (relative or absolute) rather than a hub id."""
    return _relative(ref) or Path(ref).expanduser().is_absolute()


def relink_adapter(folder: Path, ref: str) -> None:
    """Point a saved PEFT adapter's ``base_model_name_or_path`` at ``ref`` (what the info file stores): PEFT writes
    the absolute path the base was loaded from, which a moved run no longer has. A relative ``ref`` then loads
    from the adapter's folder, as the card's usage snippet does."""
    path = Path(folder) / ADAPTER_CONFIG
    if path.exists():
        config = json.loads(path.read_text())
        config["base_model_name_or_path"] = ref
        write_json_atomic(path, config)  # a full disk mid-write leaves the old config, not half of the new one


def _relative(ref: str) -> bool:
    return ref in (".", "..") or ref.startswith(("./", "../"))

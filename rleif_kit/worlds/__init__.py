"""One package per domain behind the ``World`` interface (``worlds/base.py``): ``arith/``, ``math/``, ``code/``.

The registry below is the one lookup by name the kit has: ``[base] world`` names a world here, or a module
path (``"my_pkg.my_world"``, a module defining ``WORLD``) for a world kept outside the kit. Adding a world is its
folder, its prompt files under ``params/prompts/<name>/`` and one line here (docs/worlds.md walks through it).
Shared by the worlds: the step format (``steps.py``), the published prompt formats (``prompts.py``), numbers as
people write them, the counterfactual edits of the probes, the data the stages hand each other (``data.py``).
"""

from __future__ import annotations

import importlib
from typing import Any

from rleif_kit.core.config import ConfigError
from rleif_kit.worlds.base import terms_problems

WORLDS = {  # name -> the module that defines WORLD
    "arith": "rleif_kit.worlds.arith.world",
    "math": "rleif_kit.worlds.math.world",
    "code": "rleif_kit.worlds.code.world",
    "tiny_code": "rleif_kit.worlds.tiny_code.world",
}


class UnknownWorld(ValueError):
    pass


_OUTSIDE: dict[str, Any] = {}  # worlds loaded by module path, so their benchmarks can be looked up by name too


def get_world(name: str) -> Any:
    """The world ``name`` names: a registered one, else a module (path) that defines ``WORLD``."""
    if name in WORLDS:  # the kit's own: an error inside one is a bug to see whole, not an unknown name
        return importlib.import_module(WORLDS[name]).WORLD
    if name in _OUTSIDE:
        return _OUTSIDE[name]
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not name.startswith(e.name):  # a module the world itself imports is missing
            raise
        raise UnknownWorld(f"[base] world = {name!r}: unknown world (worlds: {', '.join(WORLDS)}; or a module path "
                           f"whose module defines WORLD: {e})") from None
    except ValueError as e:  # importlib's own word on a malformed name
        raise UnknownWorld(f"[base] world = {name!r}: not a world's name nor a module path ({e})") from None
    if not hasattr(module, "WORLD"):
        raise UnknownWorld(f"[base] world = {name!r}: module {module.__name__} defines no WORLD (worlds: "
                           f"{', '.join(WORLDS)})")
    _OUTSIDE[name] = module.WORLD
    return module.WORLD


def world_for(cfg: Any) -> Any:
    """The run's world, with what it cannot do of what ``cfg`` asks raised as one ConfigError."""
    try:
        world = get_world(cfg.base.world)
    except UnknownWorld as e:
        raise ConfigError([f"{cfg.source or '<config>'}: {e}"]) from None
    problems = world.config_problems(cfg) + terms_problems(world, cfg)
    known = [b.name for w in all_worlds() for b in w.benchmarks]
    unknown = [b for b in cfg.eval.benchmarks if b not in known]
    if unknown:
        problems.append(f"[eval] benchmarks = {list(cfg.eval.benchmarks)!r}: unknown {', '.join(unknown)} "
                        f"(benchmarks: {', '.join(known)})")
    if problems:
        raise ConfigError([f"{cfg.source or '<config>'}: {p}" for p in problems])
    return world


def all_worlds() -> list[Any]:
    """The registered worlds, then those loaded by module path in this process."""
    return [get_world(name) for name in WORLDS] + list(_OUTSIDE.values())

"""``rleif doctor``'s data rows: every input file the configured stages read, and which step builds what is missing.

Why: a ten-hour run should not stop at stage 01 for a seed file nobody built. Each row is ok only when the
file is there and reads (or the raw data that stage 00 builds it from are there and read), fail when neither
is, warn where the check cannot be made here (a hub dataset, an eval set left to the hub).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rleif_kit.core.paths import RunPaths
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stages import SETUP
from rleif_kit.core.verdict import Verdict
from rleif_kit.worlds import world_for
from rleif_kit.worlds.benchmarks import benchmark as get_benchmark, benchmark_names
from rleif_kit.worlds.data import DataError, generated_size, load_instructions, load_seeds
from rleif_kit.worlds.math.data import load_gsm8k, load_math

BUILDS = f"{SETUP} (`rleif data`, or the first stage of `rleif run`) builds it"


def _raw(cfg: Any) -> tuple[list[Verdict], bool]:
    """Rows for ``[sft] gsm8k_train`` / ``math_train``, and whether at least one source is usable."""
    rows, usable = [], False
    for name, key, spec, loader, hub in (
            ("gsm8k", "[sft] gsm8k_train", cfg.sft.gsm8k_train, load_gsm8k, cfg.sft.gsm8k_hub),
            ("math", "[sft] math_train", cfg.sft.math_train, load_math, cfg.sft.math_hub)):
        if not spec:
            continue
        if spec == "hub":
            rows.append(Verdict(f"data_{name}_train", "warn", {"hub": hub}, source=key,
                                advice=f"loaded through datasets at {SETUP}; not checked here (offline it stops "
                                       "there: point the key at a local file)"))
            usable = True
            continue
        path = cfg.resolve(spec)
        try:
            n = len(loader(path))
        except FileNotFoundError:
            rows.append(Verdict(f"data_{name}_train", "fail", {"path": str(path)}, source=key,
                                advice=f"file not found: {path}"))
            continue
        except ValueError as e:
            rows.append(Verdict(f"data_{name}_train", "fail", {"path": str(path)}, source=key, advice=str(e)))
            continue
        rows.append(Verdict(f"data_{name}_train", "ok", {"records": n}, source=key))
        usable = True
    return rows, usable


def _built_file(cfg: Any, check: str, key: str, spec: str, read, buildable: bool) -> Verdict:
    path = cfg.resolve(spec)
    if path.exists():
        try:
            return Verdict(check, "ok", {"records": read(path)}, source=f"{key} = {spec}")
        except (DataError, ValueError) as e:
            return Verdict(check, "fail", {"path": str(path)}, source=f"{key} = {spec}", advice=str(e))
    world = world_for(cfg)
    if buildable and world.builds_from:
        return Verdict(check, "ok", {"built": False}, source=f"{key} = {spec}",
                       advice=f"not built yet: {BUILDS} from {world.builds_from}; run it before "
                              "`rleif evolve` on its own")
    if world.builds_from:
        return Verdict(check, "fail", {"path": str(path)}, source=f"{key} = {spec}",
                       advice=f"file not found, and {world.builds_from} are not usable: nothing builds it "
                              "(set them, or point the key at your file; docs/your-own-7b-run.md)")
    return Verdict(check, "fail", {"path": str(path)}, source=f"{key} = {spec}",
                   advice=f"file not found, and nothing in the {world.name} world builds it: point the key at your "
                          f"file ({world.data_format})")


def _eval_sets(cfg: Any, settings_path: str | None) -> list[Verdict]:
    settings = None
    if settings_path:
        try:
            settings = load_settings(settings_path)
        except Exception:  # noqa: BLE001 - the settings row says what is wrong with it
            settings = None
    rows = []
    for bench in cfg.eval.benchmarks:
        if bench not in benchmark_names() or get_benchmark(bench).default_source == "run":
            continue  # unknown (the config says so) or the run's own held-out split
        raw = getattr(settings.eval, f"{bench}_path", None) if settings is not None else None
        if raw:
            path = cfg.resolve(raw)
            rows.append(Verdict(f"eval_{bench}", "ok" if path.exists() else "fail", {"path": str(path)},
                                source=f"settings.json: eval.{bench}_path",
                                advice="" if path.exists() else f"file not found: {path}"))
        elif get_benchmark(bench).default_source != "hub":
            rows.append(Verdict(f"eval_{bench}", "ok", {"source": get_benchmark(bench).default_source},
                                source="[eval]"))
        else:
            rows.append(Verdict(f"eval_{bench}", "warn", {"source": "hub"}, source="[eval] benchmarks",
                                advice=f"no eval.{bench}_path in settings.json: 06_eval loads the test set from the "
                                       "hub and stops there when offline"))
    return rows


def check_data(cfg: Any, settings_path: str | None = None) -> list[Verdict]:
    """The data rows, in the order the stages read them (none for the arithmetic world's generated data)."""
    rows, buildable = _raw(cfg)
    ev = cfg.evol_instruct
    if generated_size(cfg, ev.seeds, "[evol_instruct] seeds") is None:
        every = dataclasses.replace(cfg, evol_instruct=dataclasses.replace(ev, max_seeds=0))
        paths = RunPaths(output_dir=cfg.output_dir)  # read only: 01's own reader, its checks (ids, text) included
        rows.append(_built_file(cfg, "data_seeds", "[evol_instruct] seeds", ev.seeds,
                                lambda p: sum(1 for _ in load_seeds(every, paths)), buildable))
    if generated_size(cfg, cfg.sft.dataset, "[sft] dataset") is None:
        rows.append(_built_file(cfg, "data_sft", "[sft] dataset", cfg.sft.dataset,
                                lambda p: len(load_instructions(p, "[sft] dataset")), buildable))
    if cfg.sft.open_domain_samples:
        path = cfg.resolve(cfg.sft.open_domain_path) if cfg.sft.open_domain_path else None
        key = f"[sft] open_domain_path = {cfg.sft.open_domain_path}"
        if path is None or not path.exists():
            rows.append(Verdict("data_open_domain", "fail", {"samples": cfg.sft.open_domain_samples}, source=key,
                                advice="file not found: point it at an instruction/response JSONL, or set [sft] "
                                       "open_domain_samples = 0"))
        else:
            try:
                rows.append(Verdict("data_open_domain", "ok", {"records": len(load_instructions(path, key))},
                                    source=key))
            except DataError as e:
                rows.append(Verdict("data_open_domain", "fail", {}, source=key, advice=str(e)))
    return rows + _eval_sets(cfg, settings_path)

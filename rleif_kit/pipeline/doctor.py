"""``rleif doctor PARAMS [--settings FILE]``: the ten-minute check before a ten-hour run.

In order: the config is valid; the settings file is valid, each API key the run needs is in the
environment and each configured role's endpoint answers one chat round trip (``check_api``); the base
models resolve (``models.loading.resolve_model_name``); the evolution temperature; every data file the
stages read, or the raw data stage 00 builds it from, and the evaluation sets (``data_checks``); a sample of the SFT
data has explicit steps; the trackers ``report_to`` names are installed (``check_trackers``); then every
reward-health check whose artifacts already exist (``diagnostics.stage.check_artifacts``).
Each is a :class:`Verdict`; any fail makes the command exit non-zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rleif_kit.checks import verdicts as dg
from rleif_kit.core.api_keys import known_secrets, read_api_key
from rleif_kit.core.config import ConfigError, load_config
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.settings import SettingsError, load_settings
from rleif_kit.core.stages import SETUP, SFT
from rleif_kit.core.verdict import Verdict
from rleif_kit.diagnostics.stage import Health, check_artifacts
from rleif_kit.llm.check_api import check_endpoint
from rleif_kit.models import trackers, trainer_logs
from rleif_kit.models.loading import ModelNotFound, resolve_model_name
from rleif_kit.pipeline.data_checks import check_data
from rleif_kit.rewards.irm_data import programmatic_judge
from rleif_kit.worlds import world_for
from rleif_kit.worlds.benchmarks import benchmark as get_benchmark, benchmark_names
from rleif_kit.worlds.data import DataError, generated_size, load_instructions


def needed_roles(cfg: Any) -> list[str]:
    """The settings.json roles this run will call (the tiny preset: none)."""
    ev, rm = cfg.evol_instruct, cfg.reward_model
    roles = []
    world = world_for(cfg)
    regenerated = cfg.sft.build == "regenerate" and generated_size(cfg, cfg.sft.dataset, "[sft] dataset") is None
    if ev.backend == "openai" or regenerated:
        roles.append("evolve")
    if not programmatic_judge(cfg, world):  # a programmatic world (arith) ranks IRM siblings itself
        roles.append("irm_judge")
    if rm.prm_step_label == "chatgpt_judged":
        roles.append("prm_judge")
    if "served" in cfg.eval.models:
        roles += sorted({get_benchmark(b).role for b in cfg.eval.benchmarks if b in benchmark_names()},
                        key=["math_eval", "code_eval"].index)
    return roles


def check_endpoints(cfg: Any, settings_path: str | None) -> list[Verdict]:
    """Settings valid, each key the roles need present, each configured role's endpoint answering."""
    needed = needed_roles(cfg)
    if not settings_path:
        if not needed:
            return []
        return [Verdict("settings", "fail", {"roles_needed": needed}, advice="this run calls an endpoint: pass "
                        "--settings settings.json with models." + ", models.".join(needed), source=cfg.source)]
    try:
        settings = load_settings(settings_path)
    except (SettingsError, FileNotFoundError) as e:
        return [Verdict("settings", "fail", advice="; ".join(str(e).splitlines()), source=settings_path)]
    missing = [r for r in needed if r not in settings.models]
    out = [Verdict("settings", "fail" if missing else "ok", {"roles": list(settings.models), "roles_needed": needed},
                   advice=f"add models.{', models.'.join(missing)}" if missing else "", source=settings_path)]
    secrets = known_secrets(settings)
    for role, endpoint in settings.models.items():
        needs = role in needed
        try:
            read_api_key(endpoint)
        except SettingsError as e:
            out.append(Verdict(f"key_{role}", "fail" if needs else "warn", {"variable": endpoint.api_key_env},
                               advice=str(e), source=settings_path))
            continue
        row = check_endpoint(endpoint, secrets=secrets)
        numbers = {"model": row.model, "mode": row.mode,  # the route the round trip took (llm/api_mode.py)
                   "latency_ms": None if row.latency_s is None else round(row.latency_s * 1000)}
        status = "ok" if row.ok else "fail" if needs else "warn"
        out.append(Verdict(f"endpoint_{role}", status, numbers, advice="" if row.ok else row.detail,
                           source=row.base_url))
    return out


def check_models(cfg: Any) -> list[Verdict]:
    """The base model and the reward models' bases resolve (a local directory, the HF cache or the hub)."""
    keys = [("base_model", "[base] model_name", cfg.base.model_name),
            ("irm_base", "[reward_model] irm_base", cfg.reward_model.irm_base),
            ("prm_base", "[reward_model] prm_base", cfg.reward_model.prm_base)]
    if cfg.evol_instruct.backend == "hf":
        keys.append(("evolve_model", "[evol_instruct] hf_model", cfg.evol_instruct.hf_model))
    out = []
    for check, key, name in keys:
        if name == "sft":
            out.append(Verdict(check, "ok", {"model": "sft"}, source=f"{key} (this run's SFT model, made by {SFT})"))
            continue
        try:
            out.append(Verdict(check, "ok", {"resolved": resolve_model_name(name, cfg, key=key)}, source=key))
        except ModelNotFound as e:
            out.append(Verdict(check, "fail", {"model": name}, advice=str(e), source=key))
    return out


def check_trackers(cfg: Any) -> list[Verdict]:
    """One row for ``report_to``, when it names any tracker: warn for a tracker whose package is not installed (the
    stages would train without it) and, with our PPO loop, for one accelerate has no tracker for."""
    wanted = list(dict.fromkeys(trainer_logs.requested(cfg, "sft") + trainer_logs.requested(cfg, "ppo")))
    if not wanted:
        return []
    missing = [trackers.missing_package(n) for n in wanted if trackers.missing_package(n)]
    no_ppo = [n for n in trainer_logs.requested(cfg, "ppo") if n not in trackers.PPO_TRACKERS] \
        if cfg.ppo.algorithm == "ppo" else []
    advice = [f"pip install {' '.join(missing)} (a stage trains without a tracker that is not installed)"] \
        if missing else []
    advice += [f"our PPO loop cannot log to {', '.join(no_ppo)} (accelerate has no tracker for it); 05_ppo/log.jsonl "
               "has its curves"] if no_ppo else []
    return [Verdict("report_to", "warn" if advice else "ok", {"trackers": ", ".join(wanted)}, advice="; ".join(advice),
                    source="[base] report_to, [sft] report_to")]


def step_format_sample(cfg: Any) -> Verdict | str:
    """The step-format check on a sample of ``[sft].dataset`` before SFT has run (a note when it cannot)."""
    d = cfg.diagnostics
    k = d.step_marker_sample or 10
    if generated_size(cfg, cfg.sft.dataset, "[sft] dataset") is not None:
        return dg.check_step_format(world_for(cfg).solution_sample(cfg, k), d, seed=cfg.base.seed,
                                    source=f"[sft] dataset = {cfg.sft.dataset}", world=world_for(cfg))
    try:
        rows = load_instructions(cfg.resolve(cfg.sft.dataset), "[sft] dataset")
    except DataError:
        return f"step_format: [sft] dataset {cfg.sft.dataset} is not built yet ({SETUP} builds it); checked after"
    return dg.check_step_format([r["response"] for r in rows], d, seed=cfg.base.seed,
                                source=f"[sft] dataset = {cfg.sft.dataset}", world=world_for(cfg))


def run_doctor(params_path: str, overrides: list[str] | tuple = (), settings_path: str | None = None,
               score: bool = True, workdir: str | Path | None = None) -> Health:
    """Every check, in the order a run would trip over them; a bad config stops after its own row."""
    wd = Path(workdir) if workdir else Path.cwd()
    report = Health()
    try:
        cfg = load_config(params_path, list(overrides), workdir=wd)
        world_for(cfg)  # what the run's world cannot do is a config error too
    except (ConfigError, FileNotFoundError) as e:
        report.verdicts.append(Verdict("config", "fail", advice="; ".join(str(e).splitlines()), source=params_path))
        return report
    report.verdicts.append(Verdict("config", "ok", {"run": cfg.run_name}, source=params_path))
    report.verdicts += check_endpoints(cfg, settings_path)
    report.verdicts += check_models(cfg)
    report.verdicts.append(dg.check_evolve_temperature(cfg.evol_instruct.temperature, cfg.diagnostics))
    report.verdicts += check_data(cfg, settings_path)
    report.verdicts += check_trackers(cfg)
    paths = RunPaths(output_dir=cfg.output_dir, report_dir=wd / "reports" / cfg.run_name)  # nothing is written
    sft_data = (paths.sft_data, paths.sft_rows)
    if not any(p.exists() for p in sft_data):  # else health's step_format reads them
        sample = step_format_sample(cfg)
        if isinstance(sample, Verdict):
            report.verdicts.append(sample)
        else:
            report.skipped.append(sample)
    health = check_artifacts(cfg, paths, score=score)  # reads only: 07's run_diagnostics writes verdicts.json
    report.verdicts += health.verdicts
    report.skipped += health.skipped
    return report

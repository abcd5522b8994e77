"""``rleif prm train | score | eval``: a PRM trained, scored and judged on step-labelled data without a run, and the
same calls from a notebook (plain functions returning dicts).

- :func:`train_file`: the kit's PRM trainer (``rewards/prm.train_prm``: the token-classification head or the
  generative "likelihood" head, full, LoRA or QLoRA as ``[reward_model]`` says) on a local base model and a
  step-label file of any format, its hyperparameters from a run config (a preset), its folder
  ``<out>/04_reward_models/prm`` with the model card and ``prm_steps.jsonl`` as a run writes them.

- :func:`score_file`: every step of a step-label file (``rewards/step_label_formats.py``, any format) scored by a PRM
  the kit trained (a folder with ``rm_info.json``: the token-classification head or the generative "likelihood"
  head, :func:`rleif_kit.rewards.reward.step_scores` reads either), written as a scores file.
- :func:`evaluate_file`: ProcessBench's and PRMBench's metrics (``rewards/prm_metrics.py``) of a model, or of a
  scores file made anywhere, so a PRM served elsewhere is judged by the same code.

A scores file is JSON Lines, one ``{"id": ..., "step_scores": [P(step right), ...]}`` per solution (null for a
solution the PRM could not score: steps not found, or cut off at ``max_len``). The kit's PRM reads a solution in its
world's step form: a row of the kit's own ``prm_steps.jsonl`` keeps the solution it was trained on; any other row is
written as ``Step 1: ... Step 2: ...``, the step-by-step form of the arith and math worlds (``--world`` names another
world whose solutions the steps are joined for; a row whose steps that world splits differently is left unscored). A
PRM inside a kit run's folder reads its run's world unless ``--world`` names one (:func:`run_world`).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core.config import load_config
from rleif_kit.core.jsonl import read_user_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.run_setup import apply_threads_and_seed
from rleif_kit.core.user_files import UserFileError
from rleif_kit.rewards.prm import train_prm
from rleif_kit.rewards.prm_metrics import evaluate_steps, format_metrics
from rleif_kit.rewards.reward import load_rm, step_scores
from rleif_kit.rewards.step_label_formats import dry_run, format_dry_run, read_step_labels
from rleif_kit.worlds import get_world
from rleif_kit.worlds.base import STEP_BY_STEP

_STEP_MARK = re.compile(r"^\s*Step\s*\d+\s*:\s*")  # a step that already starts "Step k:" (Math-Shepherd's)


def solution_text(record: dict) -> str:
    """The solution the PRM reads: the kit's own text when the row has it, else the steps as ``Step k: ...`` (a
    step's own leading ``Step k:`` dropped, so it is not written twice)."""
    if record.get("solution"):
        return record["solution"]
    return " ".join(f"Step {i}: {' '.join(_STEP_MARK.sub('', s, count=1).split())}"
                    for i, s in enumerate(record["steps"], 1))


def score_records(model: Any, tokenizer: Any, records: Sequence[dict], world: Any = STEP_BY_STEP,
                  batch_size: int = 16, max_len: int = 1024) -> list[list[float] | None]:
    """P(step right) per step of each record; None where the PRM finds another number of steps than are labelled."""
    scores = step_scores(model, tokenizer, [(r["question"], solution_text(r)) for r in records], batch_size=batch_size,
                         max_len=max_len, world=world)
    return [s if s is not None and len(s) == len(r["labels"]) else None for r, s in zip(records, scores)]


def score_file(model_dir: str | os.PathLike[str], data: str | os.PathLike[str], out: str | os.PathLike[str] | None,
               fmt: str | None = None, neutral: str = "right", world: Any = STEP_BY_STEP, batch_size: int = 16,
               max_len: int = 1024) -> dict:
    """Score ``data`` with the PRM in ``model_dir``; write the scores file to ``out`` when given. {records, scores}."""
    records = read_step_labels(data, fmt, neutral)
    model, tokenizer = load_rm(model_dir)
    scores = score_records(model, tokenizer, records, world, batch_size, max_len)
    if out is not None:
        write_jsonl(out, [{"id": r["id"], "step_scores": s} for r, s in zip(records, scores)])
    return {"records": records, "scores": scores}


def read_scores(path: str | os.PathLike[str]) -> dict[str, list[float] | None]:
    """A scores file: id -> step scores (None: unscored); one line naming the file, line and field when a row is
    not ``{"id", "step_scores": [numbers] | null}``."""
    out: dict[str, list[float] | None] = {}
    for where, row in read_user_jsonl(path, "step scores"):
        if "id" not in row:
            raise UserFileError(f"{where}: field 'id': missing")
        scores = row.get("step_scores", ...)
        if scores is ...:
            raise UserFileError(f"{where}: field 'step_scores': missing")
        if scores is not None and (not isinstance(scores, list) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in scores)):
            raise UserFileError(f"{where}: field 'step_scores': expected a list of numbers (or null), got "
                                f"{json.dumps(scores)[:60]}")
        if str(row["id"]) in out:
            raise UserFileError(f"{where}: field 'id': {row['id']!r} appears twice")
        out[str(row["id"])] = None if scores is None else [float(x) for x in scores]
    return out


def match_scores(records: Sequence[dict], scores: dict[str, list[float] | None], source: str = "scores"
                 ) -> list[list[float] | None]:
    """The scores of each record by id; a record with no scores, or as many scores as it has steps, is an error."""
    missing = [r["id"] for r in records if r["id"] not in scores]
    if missing:
        raise UserFileError(f"{source}: no step scores for {len(missing)} of {len(records)} solutions (first: "
                            f"{missing[0]!r}): the ids must be the data's")
    out = []
    for r in records:
        s = scores[r["id"]]
        if s is not None and len(s) != len(r["labels"]):
            raise UserFileError(f"{source}: solution {r['id']!r}: {len(s)} step scores for {len(r['labels'])} steps")
        out.append(s)
    return out


def evaluate_file(data: str | os.PathLike[str], scores: str | os.PathLike[str] | None = None,
                  model_dir: str | os.PathLike[str] | None = None, fmt: str | None = None, neutral: str = "right",
                  world: Any = STEP_BY_STEP, batch_size: int = 16, max_len: int = 1024) -> dict:
    """The metrics (``prm_metrics.evaluate_steps``) of ``data`` scored by a scores file or a model folder."""
    if (scores is None) == (model_dir is None):
        raise ValueError("give a model (--model PATH) or a scores file (--scores FILE), one of them")
    if scores is not None:
        records = read_step_labels(data, fmt, neutral)
        step = match_scores(records, read_scores(scores), str(scores))
    else:
        scored = score_file(model_dir, data, None, fmt, neutral, world, batch_size, max_len)
        records, step = scored["records"], scored["scores"]
    return {"data": str(data), "scored_by": str(scores if scores is not None else model_dir),
            **evaluate_steps(records, step)}


def training_examples(records: Sequence[dict]) -> tuple[list[dict], int]:
    """The PRM trainer's examples ({id, question, solution, labels}) from step-label records, and how many rows had
    no labelled step. The trainer needs a label on every step: a row keeps its steps up to its first unlabelled one
    (ProcessBench's steps after the first error; a neutral step read with ``skip``), written as
    :func:`solution_text` writes them; the kit's own rows, always labelled, keep their solution."""
    out, dropped = [], 0
    for r in records:
        n = next((i for i, v in enumerate(r["labels"]) if v is None), len(r["labels"]))
        if n == 0:
            dropped += 1
            continue
        kept = r if n == len(r["labels"]) else {**r, "steps": r["steps"][:n], "solution": None}
        out.append({"id": r["id"], "question": r["question"], "solution": solution_text(kept),
                    "labels": [bool(v) for v in r["labels"][:n]], "source": r.get("format")})
    return out, dropped


def train_file(params: str, data: str | os.PathLike[str], base: str, out: str | os.PathLike[str],
               overrides: Sequence[str] = (), fmt: str | None = None, neutral: str = "right") -> dict:
    """Train the kit's PRM on ``data`` from the local model ``base``, with ``params``' ``[reward_model]`` settings
    (and ``overrides``, ``--set`` style), into ``<out>/04_reward_models/prm``. {model_dir, examples, dropped, and
    the held-out measures of ``prm.PRMResult``}."""
    if not Path(base).is_dir():
        raise UserFileError(f"--base {base}: not a local model folder")
    examples, dropped = training_examples(read_step_labels(data, fmt, neutral))
    out = Path(out).resolve()
    cfg = load_config(params, [*overrides, f"reward_model.prm_base={json.dumps(str(Path(base).resolve()))}",
                               f"base.output_dir={json.dumps(str(out))}"])
    apply_threads_and_seed(cfg)
    _, _, result = train_prm(cfg, RunPaths(output_dir=cfg.output_dir, report_dir=out / "report"), examples)
    return {"model_dir": str(result.model_dir), "examples": len(examples), "dropped": dropped,
            "train_examples": result.train_examples, "heldout_examples": result.heldout_examples,
            "heldout_steps": result.heldout_steps, "step_accuracy": result.step_accuracy, "step_auc": result.step_auc,
            "runtime_s": result.runtime_s}


def run_world(model_dir: str | os.PathLike[str] | None) -> str | None:
    """The world of the run a kit PRM was trained in (``<run>/04_reward_models/prm``: ``[base] world`` of the run's
    ``config.resolved.toml``), so its solutions are read in that world's step form; None for a folder outside a run
    (a PRM trained elsewhere, or moved) or a file that does not say."""
    if model_dir is None:
        return None
    resolved = Path(model_dir).resolve().parent.parent / "config.resolved.toml"
    try:
        world = tomllib.loads(resolved.read_text(encoding="utf-8")).get("base", {}).get("world")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return world if isinstance(world, str) else None


def prm_command(args: Any) -> int:
    """``rleif prm train | score | eval`` (``pipeline/cli.py`` builds ``args``)."""
    world, name = STEP_BY_STEP, getattr(args, "world", None) or run_world(getattr(args, "model", None))
    if name:
        world = get_world(name)
    if args.dry_run:
        print(format_dry_run(dry_run(args.data, args.format, args.neutral)))
        return 0
    if args.action == "train":
        if not args.params or not args.base or not args.out:
            raise ValueError("train needs PARAMS (a run config for [reward_model]), --base (a local model folder) "
                             "and --out (a folder for the PRM)")
        r = train_file(args.params, args.data, args.base, args.out, args.overrides, args.format, args.neutral)
        measures = ("no held-out steps" if r["step_auc"] is None and r["step_accuracy"] is None else
                    f"held-out step accuracy {_num(r['step_accuracy'])}, AUC {_num(r['step_auc'])} on "
                    f"{r['heldout_steps']} steps")
        print(f"PRM trained on {r['train_examples']} solutions ({r['heldout_examples']} held out: {measures}) in "
              f"{r['runtime_s']:.0f}s: {r['model_dir']}" + (f"; {r['dropped']} row(s) without a labelled step left "
                                                             "out" if r["dropped"] else ""))
        return 0
    if args.action == "score":
        if not args.model or not args.out:
            raise ValueError("score needs --model (a PRM folder) and --out (the scores file to write)")
        result = score_file(args.model, args.data, args.out, args.format, args.neutral, world, args.batch_size,
                            args.max_len)
        unscored = sum(s is None for s in result["scores"])
        print(f"{len(result['scores'])} solutions scored by {args.model} into {args.out}"
              + (f" ({unscored} unscored: their steps were not found as labelled, or ran past --max-len)"
                 if unscored else ""))
        return 0
    result = evaluate_file(args.data, args.scores, args.model, args.format, args.neutral, world, args.batch_size,
                           args.max_len)
    print(format_metrics(result))
    if result["unscored"] and args.model:
        print(f"{result['unscored']} solutions unscored: the PRM found other steps than are labelled, or they ran past "
              f"--max-len; it read them in {'the world ' + repr(name) if name else 'the Step k: form'} (--world names "
              "the world it was trained in)")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"metrics written to {args.out}")
    return 0


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"

"""``rleif rm-check``: "is my reward model good enough?" for any reward model on held-out data, with the checks the
PPO gate runs on the run's own reward models (``ppo/stage.reward_gate``), so one trained with another tool (TRL's
RewardTrainer or PRMTrainer) is judged by the same code, thresholds and advice.

What it reads:

- **The model** (:func:`load_reward_model`): a folder the kit saved (``rm_info.json``: IRM, token PRM or generative
  PRM), or one without it, told by ``config.json``: a sequence classifier with one label (TRL's RewardTrainer: a
  reward per text), a token classifier with two (a PRM: P(step right) = label 1 at each step's last token), or a LoRA
  adapter of either (``adapter_config.json``'s task type and base). Anything else is one line naming the folder.
- **The data** (:func:`read_check_data`), told by its first row: instruction texts (``text``: the instruction RM's
  probes edit them), judged solutions (``question``, ``solution``, ``correct``), step-labelled solutions (any format
  ``rewards/step_label_formats.py`` reads: a solution is right when no step is labelled wrong, and the PRM's step
  metrics of ``rewards/prm_metrics.py`` come too), or TRL's preference pairs (``prompt``, ``chosen``, ``rejected``).
  Without data, a run's config (``cfg``, ``paths``) gives the gate's own: the instructions it sampled for the IRM's
  distribution and the world's held-out probe sets.

The checks (each a ``Verdict`` with its numbers, thresholds and what to do):

- ``<model>_distribution`` (check 1) on every score; ``low_ra_share`` (check 2) for a PRM;
- ``reward_truth``: the ROC AUC of the score over right vs wrong solutions (judged or step-labelled data);
- ``preference_accuracy``: the share of pairs scored chosen > rejected, held to the reward-vs-truth thresholds
  (both are the probability a better text is scored higher);
- the counterfactual probes ``<model>_probe_<edit>``: the world's solution edits (``World.solution_edits``: answer
  lines and numbers in the step-by-step worlds, programs in the code worlds) on the data's right solutions, and for
  an instruction RM the instruction edits (``number_removed`` on any text with a number; the run's held-out set adds
  its world's own, ``unsolvable`` and ``ambiguous``).

The model is ``IRM`` (a sequence RM on instructions), ``RM`` (a sequence RM on prompt + response, an outcome RM) or
``PRM`` (per-step scores aggregated to one rA). Pure of the CLI: :func:`rm_check` returns an :class:`RMCheck`;
``pipeline/rm_check_page.py`` writes its HTML page and runs the command.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rleif_kit.checks.probe_sets import NO_PROBE_SET, instruction_probe_pairs, probe_solutions
from rleif_kit.checks.probes import check_reward_truth, irm_probes, prm_probes
from rleif_kit.checks.verdicts import check_low_ra_share, check_score_distribution
from rleif_kit.core.config import DiagnosticsConfig
from rleif_kit.core.jsonl import read_user_jsonl
from rleif_kit.core.metrics import truth_figures
from rleif_kit.core.plots import plot_probes, plot_score_histograms, plot_split_histogram, save_figure
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.user_files import UserFileError
from rleif_kit.core.verdict import Verdict
from rleif_kit.models.loading import from_pretrained, load_tokenizer, use_bf16
from rleif_kit.rewards.prm_metrics import evaluate_steps
from rleif_kit.rewards.prm_toolkit import solution_text
from rleif_kit.rewards.reward import (RM_INFO, aggregate_steps, head_class, head_kwargs, irm_scorer, load_rm,
                                     step_scores)
from rleif_kit.rewards.step_label_formats import detect_format, read_step_labels
from rleif_kit.worlds import world_for
from rleif_kit.worlds.base import STEP_BY_STEP
from rleif_kit.worlds.counterfactuals import drop_number
from rleif_kit.worlds.data import instruction_pool

KINDS = ("auto", "irm", "rm", "prm")
RESULT = "rm_check.json"
PAGE = "rm_check.html"
DATA_SHAPES = ("instruction texts ({\"text\"}), judged solutions ({\"question\", \"solution\", \"correct\"}), "
               "step labels (PRM800K, Math-Shepherd, TRL's prompt/completions/labels, the kit's) or preference pairs "
               "({\"prompt\", \"chosen\", \"rejected\"})")


# ------------------------------------------------------------------ the model, with or without rm_info.json

@dataclass
class LoadedRM:
    """A reward model ready to score: ``head`` "sequence" (one score per text), "token" or "likelihood" (a PRM)."""

    model: Any
    tokenizer: Any
    head: str
    path: Path
    saved_by: str  # "the kit (rm_info.json)", "config.json", "adapter_config.json"


def model_head(path: str | Path) -> tuple[str, str]:
    """(head, how it was told) of a reward-model folder, from its files alone (nothing loaded): ``rm_info.json``'s
    head, else a LoRA adapter's task type, else ``config.json``'s architecture and number of labels. One line naming
    the folder for anything rm-check cannot read."""
    p = Path(path)
    if not p.is_dir():
        raise UserFileError(f"--model {p}: not a model folder")
    if (p / RM_INFO).exists():
        return json.loads((p / RM_INFO).read_text(encoding="utf-8"))["head"], f"the kit ({RM_INFO})"
    if (p / "adapter_config.json").exists():
        task = json.loads((p / "adapter_config.json").read_text(encoding="utf-8")).get("task_type")
        heads = {"SEQ_CLS": "sequence", "TOKEN_CLS": "token"}
        if task not in heads:
            raise UserFileError(f"--model {p}: a LoRA adapter of task type {task!r}; rm-check reads SEQ_CLS (a reward "
                                "per text) or TOKEN_CLS (a PRM) adapters")
        return heads[task], "adapter_config.json"
    if not (p / "config.json").exists():
        raise UserFileError(f"--model {p}: no config.json, adapter_config.json or {RM_INFO}: not a model folder")
    config = json.loads((p / "config.json").read_text(encoding="utf-8"))
    arch = (config.get("architectures") or ["?"])[0]
    labels = len(config["id2label"]) if isinstance(config.get("id2label"), dict) else config.get("num_labels", 2)
    if arch.endswith("ForSequenceClassification") and labels == 1:
        return "sequence", "config.json"
    if arch.endswith("ForTokenClassification") and labels == 2:
        return "token", "config.json"
    what = f"{arch} with {labels} label(s)" if arch.endswith("Classification") else arch
    raise UserFileError(f"--model {p}: config.json says {what}; rm-check reads a sequence "
                        "classifier with 1 label (a reward per text), a token classifier with 2 (a PRM) or a folder "
                        f"the kit saved ({RM_INFO})")


def load_reward_model(path: str | Path, bf16: bool = False) -> LoadedRM:
    """The folder's reward model for scoring (:func:`model_head` tells which): the kit's through ``load_rm``, a plain
    transformers folder or a LoRA adapter on its base (merged), in fp32 on a CPU."""
    import torch  # heavy: loaded on first use

    p = Path(path)
    head, told = model_head(p)
    if told.startswith("the kit"):
        model, tokenizer = load_rm(p, bf16=bf16)
        return LoadedRM(model, tokenizer, head, p, told)
    cls, _, _ = head_class(head)
    kwargs = {"dtype": torch.bfloat16 if use_bf16(bf16) else torch.float32, **head_kwargs(head)}
    if told == "adapter_config.json":
        from peft import PeftModel  # heavy: loaded on first use

        base = json.loads((p / "adapter_config.json").read_text(encoding="utf-8")).get("base_model_name_or_path")
        if not base:
            raise UserFileError(f"--model {p}: adapter_config.json names no base_model_name_or_path")
        base_path = (p / base) if (p / base).is_dir() else base
        model = PeftModel.from_pretrained(from_pretrained(cls.from_pretrained, str(base_path), **kwargs), p)
        model = model.merge_and_unload()
        tokenizer = load_tokenizer(str(p) if (p / "tokenizer_config.json").exists() else str(base_path))
    else:
        model = from_pretrained(cls.from_pretrained, str(p), **kwargs)
        tokenizer = load_tokenizer(str(p))
    model.config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    for q in model.parameters():
        q.requires_grad_(False)
    return LoadedRM(model, tokenizer, head, p, told)


# ------------------------------------------------------------------ the data, told by its first row

@dataclass
class CheckData:
    """What a data file held: ``shape`` "texts", "judged", "steps" or "preference", and its rows, each a dict:
    texts ``{"text"}``; judged and steps ``{"question", "solution", "correct"}`` (steps with ``labels`` too);
    preference ``{"prompt", "chosen", "rejected"}``."""

    shape: str
    rows: list[dict]
    source: str


def data_shape(row: dict) -> str | None:
    """Which of the shapes a row has (None: none of them)."""
    if "chosen" in row and "rejected" in row:
        return "preference"
    if "correct" in row and "solution" in row:
        return "judged"
    if detect_format(row) is not None:
        return "steps"
    if isinstance(row.get("text"), str) or isinstance(row.get("instruction"), str):
        return "texts"
    return None


def _field(row: dict, key: str, where: str, kinds: tuple = (str,), what: str = "a string") -> Any:
    if key not in row:
        raise UserFileError(f"{where}: field '{key}': missing")
    value = row[key]
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        raise UserFileError(f"{where}: field '{key}': expected {what}, got {json.dumps(value)[:60]}")
    return value


def read_check_data(path: str | Path, fmt: str | None = None, neutral: str = "right") -> CheckData:
    """The rows of ``path`` in the shape its first row has (:func:`data_shape`); a row of another shape or with a bad
    field is one line naming the file, the line and the field."""
    path = Path(path)
    rows: list[tuple[str, dict]] = list(read_user_jsonl(path, "rm-check data"))
    if not rows:
        raise UserFileError(f"{path}: no rows")
    shape = "steps" if fmt else data_shape(rows[0][1])
    if shape is None:
        raise UserFileError(f"{rows[0][0]}: no rm-check data shape has these fields ({', '.join(sorted(rows[0][1]))})"
                            f"; expected {DATA_SHAPES}")
    if shape == "steps":
        records = read_step_labels(path, fmt, neutral)
        return CheckData(shape, [{"id": r["id"], "question": r["question"], "solution": solution_text(r),
                                  "correct": not any(v is False for v in r["labels"]), "labels": r["labels"]}
                                 for r in records], str(path))
    out = []
    for where, row in rows:
        if data_shape(row) != shape:
            raise UserFileError(f"{where}: this row's fields ({', '.join(sorted(row))}) are not those of the first "
                                f"row ({shape}); expected {DATA_SHAPES}")
        if shape == "preference":
            prompt = row.get("prompt", "")
            if not isinstance(prompt, str):
                raise UserFileError(f"{where}: field 'prompt': expected a string, got {json.dumps(prompt)[:60]}")
            out.append({"prompt": prompt, "chosen": _field(row, "chosen", where),
                        "rejected": _field(row, "rejected", where)})
        elif shape == "judged":
            out.append({"question": _field(row, "question", where), "solution": _field(row, "solution", where),
                        "correct": _field(row, "correct", where, (bool,), "true or false")})
        else:
            out.append({"text": _field(row, "text" if "text" in row else "instruction", where)})
    return CheckData(shape, out, str(path))


# ------------------------------------------------------------------ the check

@dataclass
class RMCheck:
    """What rm-check found: the verdicts (the command exits 1 when one fails), the figures by name, the measures that
    have no verdict (the PRM's step metrics, counts) and notes on what was not checked, and why."""

    model: str
    head: str
    kind: str  # "IRM", "RM" or "PRM": the verdicts' names
    data: str
    world: str | None
    verdicts: list[Verdict]
    figures: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(v.status == "fail" for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "head": self.head, "kind": self.kind, "data": self.data, "world": self.world,
                "failed": self.failed, "verdicts": [v.to_dict() for v in self.verdicts], "metrics": self.metrics,
                "notes": self.notes, "figures": sorted(self.figures)}


def model_kind(head: str, kind: str, shape: str | None) -> str:
    """The verdicts' model name: a token or generative head is a PRM; a sequence head an IRM on instruction texts (or
    with ``kind="irm"``), else an RM of prompt + response. A PRM asked to be an IRM, or the reverse, is an error."""
    if kind not in KINDS:
        raise ValueError(f"--kind {kind!r}: expected one of {', '.join(KINDS)}")
    if head in ("token", "likelihood"):
        if kind in ("irm", "rm"):
            raise ValueError(f"--kind {kind}: the model is a PRM ({head} head), it scores steps, not whole texts")
        if shape in ("texts",):
            raise ValueError("a PRM scores solutions: give judged solutions or step labels, not instruction texts")
        return "PRM"
    if kind == "prm":
        raise ValueError("--kind prm: the model has a sequence head (one score per text), not a PRM's")
    return "IRM" if kind == "irm" or (kind == "auto" and shape in ("texts", None)) else "RM"


def joined(prompt: str, response: str) -> str:
    """A prompt and its response as one text for a sequence RM: TRL's prompt + completion, with a newline between when
    the prompt does not end in whitespace already."""
    return prompt + response if not prompt or prompt[-1:].isspace() else f"{prompt}\n{response}"


def _answer_scorer(rm: LoadedRM, kind: str, aggregate: str, world: Any, batch_size: int, max_len: int
                   ) -> Callable[[Sequence[dict], Sequence[str]], list]:
    """(records, solutions) -> one score each: a PRM's step scores aggregated (None where it finds no steps), an RM's
    score of the question and solution joined."""
    if kind == "PRM":
        def prm(records: Sequence[dict], solutions: Sequence[str]) -> list:
            steps = step_scores(rm.model, rm.tokenizer, [(r["text"], s) for r, s in zip(records, solutions)],
                                batch_size=batch_size, max_len=max_len, world=world)
            return [None if s is None else aggregate_steps(s, aggregate) for s in steps]
        return prm
    texts = irm_scorer(rm.model, rm.tokenizer, batch_size=batch_size, max_length=max_len)
    return lambda records, solutions: texts([joined(r["text"], s) for r, s in zip(records, solutions)])


def instruction_pairs(texts: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """(text, the text with its first number removed) for every text that has a number: the instruction edit that
    needs no world (the run's held-out set adds its world's own)."""
    pairs = [(t, d) for t in texts if (d := drop_number(t)) is not None and d != t]
    return {"number_removed": pairs} if pairs else {}


def rm_check(model: str | Path | LoadedRM, data: str | Path | CheckData | None = None, *, kind: str = "auto",
             world: Any = None, cfg: Any = None, paths: Any = None, diagnostics: DiagnosticsConfig | None = None,
             aggregate: str | None = None, seed: int | None = None, batch_size: int = 16, max_len: int | None = None,
             fmt: str | None = None, neutral: str = "right") -> RMCheck:
    """Every check that applies to ``model`` (a folder or a :class:`LoadedRM`) on ``data`` (a file or a
    :class:`CheckData`). ``cfg`` (a run config) gives the thresholds (``[diagnostics]``), the world, the PRM's
    aggregation, the seed and the longest input; with ``paths`` and no data, the gate's own data (see the module).
    ``world`` (a World) overrides the config's; without either, the step-by-step form's edits. ``diagnostics``,
    ``aggregate``, ``seed`` and ``max_len`` override the config's (or the defaults: min, 0, 1024)."""
    d = diagnostics or (cfg.diagnostics if cfg is not None else DiagnosticsConfig())
    if world is None and cfg is not None:
        world = world_for(cfg)
    how = aggregate or (cfg.reward_model.prm_aggregate if cfg is not None else "min")
    seed = seed if seed is not None else (cfg.base.seed if cfg is not None else 0)
    max_len = max_len or (cfg.reward_model.rm_max_len if cfg is not None else 1024)
    if isinstance(data, (str, Path)):
        data = read_check_data(data, fmt, neutral)
    if data is None and (cfg is None or paths is None):
        raise ValueError("rm-check needs data (--data FILE), or a run (--params of the run) whose probe sets it reads")
    head = model.head if isinstance(model, LoadedRM) else model_head(model)[0]
    name = model_kind(head, kind, data.shape if data is not None else None)
    rm = model if isinstance(model, LoadedRM) else load_reward_model(model, bf16=cfg.base.bf16 if cfg else False)
    edits = world.solution_edits if world is not None else None
    result = RMCheck(str(rm.path), head, name, data.source if data is not None else "the run's gate data",
                     getattr(world, "name", None), [])
    if data is None:
        _gate_data(result, rm, cfg, paths, d, world, how, seed, batch_size, max_len)
    elif name == "IRM":
        _instruction_checks(result, rm, data, d, seed, batch_size, max_len)
    else:
        _answer_checks(result, rm, data, d, world, how, seed, batch_size, max_len, edits)
    if any("_probe_" in v.check for v in result.verdicts):
        result.figures["probes"] = plot_probes(result.verdicts, d.probe_ok, d.probe_fail,
                                               title=f"Counterfactual probes of the {name}: share of pairs it moved "
                                                     "the right way")
    return result


def _instruction_checks(result: RMCheck, rm: LoadedRM, data: CheckData, d: DiagnosticsConfig, seed: int,
                        batch_size: int, max_len: int) -> None:
    """An instruction RM: its distribution on the texts (preference pairs: on both sides, and its accuracy) and the
    instruction probes on them (pairs: on the chosen)."""
    score = irm_scorer(rm.model, rm.tokenizer, batch_size=batch_size, max_length=max_len)
    src = f"rm-check: {data.source}"
    if data.shape == "preference":
        texts = [joined(r["prompt"], r["chosen"]) for r in data.rows]
        _preference(result, score(texts), score([joined(r["prompt"], r["rejected"]) for r in data.rows]), d, src)
    else:
        texts = [r.get("text") or r.get("question") for r in data.rows]
        scores = score(texts)
        result.verdicts.append(check_score_distribution("IRM", scores, d, f"{src}, {len(texts)} texts"))
        result.figures["scores"] = plot_score_histograms({"IRM": scores}, (d.score_mean_min, d.score_mean_max),
                                                         title="The IRM's scores on these texts")
    pairs = instruction_pairs(texts)
    if not pairs:
        result.notes.append("instruction probes: no text has a number to remove; the unsolvable and ambiguous edits "
                            "need a run's held-out set (--params of the run, without --data)")
    result.verdicts += irm_probes(score, pairs, d, src, seed=seed)


def _preference(result: RMCheck, chosen: Sequence[float | None], rejected: Sequence[float | None],
                d: DiagnosticsConfig, src: str) -> None:
    """Preference pairs' scores: the distribution on both sides (a PRM's unscored solutions as 0), the preference
    accuracy and the two sides' histogram."""
    both = [0.0 if s is None else s for s in [*chosen, *rejected]]
    what = f"{src}, {len(chosen)} pairs"
    result.verdicts.append(check_score_distribution(result.kind, both, d, f"{what}, both sides"))
    result.verdicts.append(check_preference(chosen, rejected, d, what))
    result.figures["scores"] = plot_split_histogram(both, [True] * len(chosen) + [False] * len(rejected),
                                                    ("chosen", "rejected"),
                                                    f"The {result.kind}'s scores: chosen vs rejected")


def check_preference(chosen: Sequence[float | None], rejected: Sequence[float | None], d: DiagnosticsConfig,
                     source: str = "") -> Verdict:
    """The share of pairs scored chosen > rejected (a tie counts half, as the AUC counts it), held to the
    reward-vs-truth thresholds: ok from ``truth_auc_ok``, fail below ``truth_auc_fail``."""
    pairs = [(c, r) for c, r in zip(chosen, rejected) if c is not None and r is not None]
    thresholds = {"ok_at": d.truth_auc_ok, "fail_below": d.truth_auc_fail}
    if not pairs:
        return Verdict("preference_accuracy", "fail", {"pairs": 0}, thresholds, "No pair was scored.", source)
    acc = sum(1.0 if c > r else 0.5 if c == r else 0.0 for c, r in pairs) / len(pairs)
    numbers = {"pairs": len(pairs), "accuracy": acc,
               "mean_margin": sum(c - r for c, r in pairs) / len(pairs)}
    if acc >= d.truth_auc_ok:
        return Verdict("preference_accuracy", "ok", numbers, thresholds, source=source)
    return Verdict("preference_accuracy", "fail" if acc < d.truth_auc_fail else "warn", numbers, thresholds,
                   f"The model scores the chosen response higher on {acc:.0%} of pairs (0.5 = chance): it does not "
                   "order these pairs as their labels do. Check that the pairs are from the distribution it was "
                   "trained on, then its training data (more, more varied pairs) and its held-out accuracy there.",
                   source)


def _answer_checks(result: RMCheck, rm: LoadedRM, data: CheckData, d: DiagnosticsConfig, world: Any, how: str,
                   seed: int, batch_size: int, max_len: int, edits: dict | None) -> None:
    """A PRM or an RM of responses: the distribution of its scores, check 2 (a PRM), reward against truth, the
    preference accuracy (pairs), the answer probes on the right solutions and, with step labels, the PRM's step
    metrics."""
    name = result.kind
    score = _answer_scorer(rm, name, how, world or STEP_BY_STEP, batch_size, max_len)
    src = f"rm-check: {data.source}"
    if data.shape == "preference":
        records = [{"text": r["prompt"]} for r in data.rows]
        chosen = score(records, [r["chosen"] for r in data.rows])
        rejected = score(records, [r["rejected"] for r in data.rows])
        _preference(result, chosen, rejected, d, src)
        right = [{"text": r["prompt"], "solution": r["chosen"]} for r in data.rows]
    else:
        records = [{"text": r["question"]} for r in data.rows]
        raw = score(records, [r["solution"] for r in data.rows])
        flagged = sum(s is None for s in raw)
        scores = [0.0 if s is None else s for s in raw]  # as PPO scores them: a solution without steps earns 0
        result.metrics.update(rows=len(raw), flagged=flagged, right=sum(r["correct"] for r in data.rows))
        if flagged:
            result.notes.append(f"{flagged} of {len(raw)} solutions had no steps the PRM could find: scored 0 (as PPO "
                                "scores them) and counted")
        what = f"{src}, {len(raw)} solutions"
        result.verdicts.append(check_score_distribution(name, scores, d, what))
        if name == "PRM":
            result.verdicts.append(check_low_ra_share(scores, d, what))
        correct = [r["correct"] for r in data.rows]
        result.verdicts.append(check_reward_truth(correct, scores, scores, d, what, "On these solutions"))
        truth = truth_figures(correct, scores)
        result.metrics["auc"] = truth["auc"]
        if truth["auc"] is not None:
            result.figures["scores"] = plot_split_histogram(scores, correct, ("right", "wrong"),
                                                            f"The {name}'s scores: right vs wrong solutions "
                                                            f"(AUC {truth['auc']:.2f})")
        else:
            result.figures["scores"] = plot_score_histograms({name: scores}, (d.score_mean_min, d.score_mean_max),
                                                             title=f"The {name}'s scores on these solutions")
        if data.shape == "steps" and name == "PRM":
            _step_metrics(result, rm, data, world or STEP_BY_STEP, batch_size, max_len)
        right = [{"text": r["question"], "solution": r["solution"]} for r in data.rows if r["correct"]]
    if not right:
        result.notes.append("answer probes: no right solution in the data to edit (they edit right solutions only)")
        return
    result.verdicts += prm_probes(score, right, d, f"{src}, right solutions", seed=seed, model=name, edits=edits)
    if not any("_probe_" in v.check for v in result.verdicts):
        result.notes.append("answer probes: no edit of the world applies to these solutions (is --world theirs?)")


def _step_metrics(result: RMCheck, rm: LoadedRM, data: CheckData, world: Any, batch_size: int, max_len: int) -> None:
    """ProcessBench's and PRMBench's metrics at 0.5 and swept (``prm_metrics.evaluate_steps``): a measure, not a
    verdict (no threshold says what is good enough across datasets)."""
    steps = step_scores(rm.model, rm.tokenizer, [(r["question"], r["solution"]) for r in data.rows],
                        batch_size=batch_size, max_len=max_len, world=world)
    steps = [s if s is not None and len(s) == len(r["labels"]) else None for r, s in zip(data.rows, steps)]
    m = evaluate_steps(data.rows, steps)
    result.metrics["steps"] = {"solutions": m["solutions"], "unscored": m["unscored"], "at_0.5": m["at_0.5"],
                               "best": m["best"]}


def _gate_data(result: RMCheck, rm: LoadedRM, cfg: Any, paths: Any, d: DiagnosticsConfig, world: Any, how: str,
               seed: int, batch_size: int, max_len: int) -> None:
    """The gate's own data: for an IRM the pool instructions the gate samples (check 1) and the world's instruction
    probes; for a PRM the world's answer probes on its held-out right solutions. Check 1 and 2 of a PRM read the SFT
    policy's samples, which rm-check has not: give them as judged data."""
    held = f"rm-check: {world.probe_source(paths)}"
    if result.kind == "PRM":
        solutions = probe_solutions(cfg, paths)
        result.notes.append("prm_distribution and low_ra_share read the SFT policy's own samples: give them as judged "
                            "solutions (--data) to check those")
        if not solutions:
            result.notes.append(f"answer probes: {NO_PROBE_SET}")
            return
        score = _answer_scorer(rm, "PRM", how, world, batch_size, max_len)
        result.verdicts += prm_probes(score, solutions, d, held, seed=seed, model="PRM", edits=world.solution_edits)
        return
    pool = instruction_pool(cfg, paths)
    sample = random.Random(cfg.base.seed + 7).sample(list(pool), min(cfg.ppo.gate_samples, len(pool)))
    score = irm_scorer(rm.model, rm.tokenizer, batch_size=batch_size, max_length=max_len)
    scores = score([r["text"] for r in sample])
    result.verdicts.append(check_score_distribution("IRM", scores, d, f"rm-check: {len(sample)} instructions of the "
                                                                      "run's pool, as the gate samples them"))
    result.figures["scores"] = plot_score_histograms({"IRM": scores}, (d.score_mean_min, d.score_mean_max),
                                                     title="The IRM's scores on the run's instructions")
    pairs = instruction_probe_pairs(cfg, paths)
    if not pairs:
        result.notes.append(f"instruction probes: {NO_PROBE_SET}")
    result.verdicts += irm_probes(score, pairs, d, held, seed=seed)


def save_check(result: RMCheck, out: str | Path) -> dict[str, Path]:
    """``out/rm_check.json`` and ``out/figures/<name>.png``; their paths by name."""
    out = Path(out)
    written = {name: save_figure(fig, out / "figures", f"rm_check_{name}") for name, fig in result.figures.items()}
    write_json_atomic(out / RESULT, result.to_dict())
    return {"json": out / RESULT, **written}

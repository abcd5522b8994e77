"""Stage 04 (second half): the process reward model (PRM) — is each step of this solution right?

With ``[reward_model] prm_head = "token"`` (the 7B recipe's) the PRM is a token classifier read at the LAST token
of each step (``worlds.steps.step_end_positions``): there the model has seen the whole step and nothing of the next.
With ``"likelihood"`` it is a language model of the run's right solutions, read by how likely it finds what each
step concludes and calibrated on the step labels (``rewards/prm_likelihood.py``). TRL no longer ships a PRM trainer,
so this is ``transformers.Trainer`` with our own collator: labels are -100 everywhere except the
step ends, so the loss is the cross-entropy of "this step is correct" at exactly those tokens.

Input text is the SFT prompt followed by the solution, exactly as the policy sees it in PPO, so the
PRM scores what the policy produces. ``rA`` is one number from the per-step scores
(``[reward_model].prm_aggregate``, :func:`rleif_kit.rewards.reward.aggregate_steps`). A solution whose steps
cannot be found gets ``None`` (flagged), never a silent one-step score.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, read_user_jsonl, write_jsonl
from rleif_kit.core.launch import load_result
from rleif_kit.core.metrics import roc_auc, threshold_accuracy
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.progress import Bar
from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.models import trainer_logs
from rleif_kit.models.generation import generate
from rleif_kit.models.loading import load_merged
from rleif_kit.models.refs import model_ref
from rleif_kit.rewards.launched import launch_training
from rleif_kit.rewards.prm_likelihood import calibrate, likelihood_rows
from rleif_kit.rewards.reward import StepLabelCollator, encode, load_rm, step_scores
from rleif_kit.rewards.rm_cards import prm_card, readme
from rleif_kit.rewards.rm_datasets import save_rows, split_by_question, step_rows
from rleif_kit.rewards.rm_training import loss_log, save_rm, start_training, timed_train, trainer_args_for
from rleif_kit.worlds import world_for
from rleif_kit.worlds.base import STEP_BY_STEP

# ------------------------------------------------------------------------------ data

def load_prm800k_style(path: Path) -> list[dict]:
    """Labelled steps from a JSONL of {question, steps: [str], labels: [bool | 1 | 0 | -1]}.

    PRM800K rates steps -1 (wrong), 0 (neutral) and 1 (right); only 1 (or true) counts as correct
    here, since a neutral step does not move a solution forward. Steps become 'Step k: ...' text,
    the format the SFT model writes, so the PRM sees one form.
    """
    out = []
    for where, r in read_user_jsonl(path, "[reward_model] prm_data"):
        missing = {"question", "steps", "labels"} - set(r)
        if missing:
            raise ValueError(f"{where}: expected question, steps and one label per step (missing {sorted(missing)})")
        steps, labels = r["steps"], r["labels"]
        if not isinstance(r["question"], str) or not isinstance(steps, list) or not isinstance(labels, list) \
                or not all(isinstance(x, str) for x in steps):
            raise ValueError(f"{where}: 'question' must be a string, 'steps' a list of strings, 'labels' a list")
        if len(steps) != len(labels) or not steps:
            raise ValueError(f"{where}: {len(steps)} steps but {len(labels)} labels")
        solution = " ".join(f"Step {i}: {s.strip()}" for i, s in enumerate(steps, 1))
        out.append({"id": str(r.get("id", f"{path.stem}-{where.rsplit(':', 1)[1]}")), "question": r["question"],
                    "solution": solution, "labels": [v is True or v == 1 for v in labels], "source": "prm_data"})
    return out


def sample_solutions(cfg: RunConfig, paths: RunPaths, instructions: Sequence[dict], n: int,
                     out_path: Path, progress: bool = True) -> list[dict]:
    """``n`` solutions sampled from the SFT model on ``instructions`` (round-robin over a seeded
    shuffle), appended per batch to ``out_path``; a rerun resumes after the last finished batch and
    draws the same samples (each batch reseeds from ``[base].seed`` and its index)."""
    import torch  # heavy: loaded on first use

    order = list(instructions)
    random.Random(cfg.base.seed).shuffle(order)
    picks = [order[i % len(order)] for i in range(n)] if order else []
    done = list(read_jsonl(out_path)) if out_path.exists() else []
    batch = cfg.eval.batch_size
    if len(done) >= len(picks):
        return done[:n]
    start = len(done) - len(done) % batch  # a part-written last batch is redone whole, same seed
    if start < len(done):
        done = done[:start]
        write_jsonl(out_path, done)
    model, tokenizer = load_merged(paths.sft_model)
    world = world_for(cfg)
    bar = Bar(len(picks), "sampling solutions", REWARD_MODELS, initial=start, disable=not progress)
    with JsonlWriter(out_path, fsync_every=batch) as writer:
        for b in range(start, len(picks), batch):
            torch.manual_seed(cfg.base.seed + b)
            chunk = picks[b:b + batch]
            texts = generate(model, tokenizer, [world.prompt_for(r, cot=cfg.eval.cot_prompt) for r in chunk],
                             cfg.eval.max_new_tokens, batch_size=batch, do_sample=True,
                             temperature=cfg.reward_model.prm_sample_temperature, progress=False)
            for j, (r, text) in enumerate(zip(chunk, texts)):
                row = {"id": f"{r['id']}-s{b + j}", "instruction_id": r["id"], "question": r["text"],
                       "solution": text.strip(), "problem": r.get("problem")}
                writer.write(row)
                done.append(row)
            bar.update(len(chunk))
    bar.close()
    return done


def verifier_examples(samples: Sequence[dict], world: Any) -> tuple[list[dict], int]:
    """Step labels from the world's step verifier; (examples, solutions flagged for having no steps)."""
    out, flagged = [], 0
    for s, labels in zip(samples, world.step_labels_batch(samples, [s["solution"] for s in samples])):
        labels = labels or []
        if len(labels) != len(world.steps.char_ends(s["solution"])) or not labels:
            flagged += 1
            continue
        out.append({"id": s["id"], "instruction_id": s.get("instruction_id"), "question": s["question"],
                    "solution": s["solution"], "labels": labels, "source": "verifier"})
    return out, flagged


# --------------------------------------------------------------------------- training

@dataclass
class PRMResult:
    model_dir: Path
    train_examples: int
    heldout_examples: int
    train_steps: int  # labelled steps
    heldout_steps: int
    correct_share: float  # share of labelled steps that are correct (train split)
    step_accuracy: float | None
    step_auc: float | None
    runtime_s: float
    log: list[dict] = field(default_factory=list)
    heldout_scores: list[float] = field(default_factory=list)
    heldout_labels: list[bool] = field(default_factory=list)
    calibration: list[float] | None = None  # a generative PRM's [a, b] (prm_likelihood.py)


def evaluate_prm(model: Any, tokenizer: Any, examples: Sequence[dict], max_len: int,
                 world: Any = STEP_BY_STEP) -> tuple[list[bool], list[float]]:
    """Flattened (step label, step score) over ``examples``, skipping flagged solutions."""
    scores = step_scores(model, tokenizer, [(e["question"], e["solution"]) for e in examples], max_len=max_len,
                         world=world)
    labels, flat = [], []
    for e, s in zip(examples, scores):
        if s is not None:
            labels += list(e["labels"])
            flat += s
    return labels, flat


def train_prm(cfg: RunConfig, paths: RunPaths, examples: Sequence[dict]) -> tuple[Any, Any, PRMResult]:
    """Train the PRM on ``examples`` ({question, solution, labels}) and save it with a model card, its data in
    ``prm_steps.jsonl``. Examples marked ``train_only`` (hard negatives) join the training side only, and only where
    their question is not held out: the held-out steps stay the sampled solutions' alone, whatever is added."""
    from transformers import Trainer, TrainingArguments  # heavy: loaded on first use

    rm, out_dir = cfg.reward_model, paths.prm_model
    if launch_training(cfg, paths, "prm", examples):  # [base].launcher = "accelerate"
        return *load_rm(out_dir, bf16=cfg.base.bf16), load_result(PRMResult, paths.rm_result("prm"))
    extra = [e for e in examples if e.get("train_only")]
    train, heldout = split_by_question([e for e in examples if not e.get("train_only")], rm.rm_heldout_share,
                                       cfg.base.seed)
    held_questions = {e["question"] for e in heldout}
    train += [e for e in extra if e["question"] not in held_questions]
    if not train:
        raise ValueError("no PRM training examples: every sampled solution was flagged or none were sampled")
    save_rows(paths, "prm", step_rows(train, heldout, world_for(cfg)))  # the dataset beside the model (rm_datasets.py)
    base, bf16, model, tokenizer = start_training(cfg, paths, rm.prm_base, "[reward_model] prm_base", rm.prm_head,
                                                  rm.prm_extra_layers)
    world = world_for(cfg)
    if rm.prm_head == "likelihood":  # a language model of the right solutions (prm_likelihood.py)
        rows = likelihood_rows(tokenizer, train, rm.rm_max_len, world, rm.prm_same_edits)
    else:
        rows = [r for r in (encode(tokenizer, e["question"], e["solution"], e["labels"], rm.rm_max_len, world)
                            for e in train) if r is not None]
    if not rows:
        raise ValueError("no PRM training rows: no training solution fits [reward_model] rm_max_len"
                         + (" with every step right" if rm.prm_head == "likelihood" else ""))
    args = trainer_args_for(TrainingArguments, cfg, out_dir, len(rows), bf16, "prm", remove_unused_columns=False,
                            warmup_steps=0.05)
    trainer = Trainer(model=model, args=args, train_dataset=[{k: r[k] for k in ("input_ids", "labels")} for r in rows],
                      data_collator=StepLabelCollator(tokenizer.pad_token_id),
                      callbacks=trainer_logs.callbacks(cfg, paths, "prm"))
    runtime = timed_train(trainer)
    calibration = None
    if rm.prm_head == "likelihood":  # on the sampled solutions of the training side, as PPO's will be
        calibration = calibrate(trainer.model, tokenizer, [e for e in train if not e.get("train_only")],
                                rm.rm_max_len, world)
    labels, scores = evaluate_prm(trainer.model, tokenizer, heldout, rm.rm_max_len, world)
    train_labels = [label for e in train for label in e["labels"]]
    result = PRMResult(out_dir, len(train), len(heldout), len(train_labels), len(labels),
                       sum(train_labels) / max(1, len(train_labels)), threshold_accuracy(labels, scores),
                       roc_auc(labels, scores), runtime, loss_log(trainer), scores, labels, calibration)
    ref = model_ref(base, out_dir, paths.output_dir, given=None if rm.prm_base == "sft" else rm.prm_base)
    info = {"head": rm.prm_head, "finetune": rm.rm_finetune, "base_model": ref,  # the calibration too: an adapter
            **({"calibration": calibration} if calibration is not None else {})}  # saves no config of its own
    save_rm(trainer, tokenizer, out_dir, info,
            readme(prm_card, cfg, paths, result, ref, base, train))
    return trainer.model, tokenizer, result


def fmt_score(x: float | None) -> str:
    """A score to 3 decimals, or "n/a" when there was nothing to measure it on (no held-out steps of a class)."""
    return "n/a" if x is None else f"{x:.3f}"

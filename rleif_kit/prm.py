"""Stage 04 (second half): the process reward model (PRM) — is each step of this solution right?

The PRM is a token classifier read at the LAST token of each step (``prm_labels.step_end_positions``):
there the model has seen the whole step and nothing of the next. TRL no longer ships a PRM trainer,
so this is ``transformers.Trainer`` with our own collator: labels are -100 everywhere except the
step ends, so the loss is the cross-entropy of "this step is correct" at exactly those tokens.

Input text is the SFT prompt followed by the solution, exactly as the policy sees it in PPO, so the
PRM scores what the policy produces. ``rA`` is one number from the per-step scores
(``[reward_model].prm_aggregate``, :func:`rleif_kit.rewards.aggregate_steps`). A solution whose steps
cannot be found gets ``None`` (flagged), never a silent one-step score.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rleif_kit import prm_labels
from rleif_kit.config import RunConfig
from rleif_kit.evaluation.prompts import math_prompt, sft_completion
from rleif_kit.metrics import roc_auc, threshold_accuracy
from rleif_kit.paths import RunPaths
from rleif_kit.rewards import aggregate_steps

IGNORE = -100  # label of every token that is not a step end (ignored by the loss)


class StepsNotFound(ValueError):
    """The solution has no step structure the PRM can score."""


def solution_step_ends(solution: str) -> list[int]:
    """Exclusive character end of each step: 'Step k:' markers, else one step per line (>= 2 lines).

    The final 'The answer is: X' line belongs to the last step (its label says whether the answer is
    right). [] when neither form is present: the caller flags the solution.
    """
    ends = prm_labels.step_char_ends(solution)
    if ends:
        return ends
    ends, pos = [], 0
    for line in solution.splitlines(keepends=True):
        body = line.rstrip()
        if body.strip() and not body.strip().lower().startswith("the answer is"):
            ends.append(pos + len(body))
        pos += len(line)
    return ends if len(ends) >= 2 else []


def prm_input(question: str, solution: str) -> tuple[str, str, int]:
    """(full text, the solution as placed in it, character offset of the solution in the text).

    The PRM always reads the chain-of-thought prompt form, in training and in scoring alike, whatever
    prompt the policy was given: its input format is its own, and one form keeps it consistent.
    """
    prompt = math_prompt(question, cot=True)
    completion = sft_completion(solution)  # " " + stripped solution, as in SFT
    return prompt + completion, completion[1:], len(prompt) + 1


def encode(tokenizer: Any, question: str, solution: str, labels: Sequence[bool] | None = None,
           max_len: int = 1024) -> dict | None:
    """Token ids, the token position of each step end (None where truncated), and token labels.

    None when the solution has no findable steps. ``labels`` must give one verdict per step.
    """
    text, placed, offset = prm_input(question, solution)
    ends = [offset + e for e in solution_step_ends(placed)]
    if not ends:
        return None
    enc = tokenizer(text, return_offsets_mapping=True)
    positions = prm_labels.step_end_positions(enc["offset_mapping"], ends, max_len)
    row = {"input_ids": list(enc["input_ids"][:max_len]), "positions": positions}
    if labels is not None:
        if len(labels) != len(ends):
            raise ValueError(f"{len(labels)} labels for {len(ends)} steps: {solution!r}")
        token_labels = [IGNORE] * len(row["input_ids"])
        for pos, label in zip(positions, labels):
            if pos is not None:
                token_labels[pos] = int(bool(label))
        row["labels"] = token_labels
    return row


class StepLabelCollator:
    """Right-pads a batch: pad id for inputs, 0 in the attention mask, IGNORE for labels."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, rows: Sequence[dict]) -> dict:
        import torch

        width = max(len(r["input_ids"]) for r in rows)
        pad = lambda seq, value: list(seq) + [value] * (width - len(seq))  # noqa: E731
        batch = {"input_ids": torch.tensor([pad(r["input_ids"], self.pad_token_id) for r in rows]),
                 "attention_mask": torch.tensor([pad([1] * len(r["input_ids"]), 0) for r in rows])}
        if "labels" in rows[0]:
            batch["labels"] = torch.tensor([pad(r["labels"], IGNORE) for r in rows])
        return batch


def step_scores(model: Any, tokenizer: Any, items: Sequence[tuple[str, str]], batch_size: int = 32,
                max_len: int = 1024) -> list[list[float] | None]:
    """P(step correct) per step of each (question, solution); None for a solution whose steps cannot
    be found or were cut off at ``max_len`` (flagged, not scored on a part)."""
    import torch

    encoded = [encode(tokenizer, q, s, max_len=max_len) for q, s in items]
    usable = [i for i, e in enumerate(encoded) if e is not None and None not in e["positions"]]
    out: list[list[float] | None] = [None] * len(items)
    collate = StepLabelCollator(tokenizer.pad_token_id)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    with torch.no_grad():
        for start in range(0, len(usable), batch_size):
            idx = usable[start:start + batch_size]
            batch = {k: v.to(device) for k, v in collate([encoded[i] for i in idx]).items()}
            probs = torch.softmax(model(**batch).logits.float(), dim=-1)[..., 1]
            for row, i in enumerate(idx):
                out[i] = probs[row, encoded[i]["positions"]].tolist()
    model.train(was_training)
    return out


def prm_score(model: Any, tokenizer: Any, question: str, solution: str, max_len: int = 1024) -> list[float]:
    """Per-step scores of one solution; raises StepsNotFound rather than scoring it as one step."""
    scores = step_scores(model, tokenizer, [(question, solution)], max_len=max_len)[0]
    if scores is None:
        raise StepsNotFound(f"no scorable steps in: {solution[:80]!r}")
    return scores


def answer_scores(model: Any, tokenizer: Any, items: Sequence[tuple[str, str]], how: str = "min",
                  batch_size: int = 32, max_len: int = 1024) -> list[float | None]:
    """rA per (question, solution): the PRM's step scores aggregated by ``how``; None when flagged."""
    return [None if s is None else aggregate_steps(s, how)
            for s in step_scores(model, tokenizer, items, batch_size, max_len)]


# ------------------------------------------------------------------------------ data

def load_prm800k_style(path: Path) -> list[dict]:
    """Labelled steps from a JSONL of {question, steps: [str], labels: [bool | 1 | 0 | -1]}.

    PRM800K rates steps -1 (wrong), 0 (neutral) and 1 (right); only 1 (or true) counts as correct
    here, since a neutral step does not move a solution forward. Steps become 'Step k: ...' text,
    the format the SFT model writes, so the PRM sees one form.
    """
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            missing = {"question", "steps", "labels"} - set(r)
            if missing or len(r["steps"]) != len(r["labels"]) or not r["steps"]:
                raise ValueError(f"{path}:{n}: expected question, steps and one label per step "
                                 f"(missing {sorted(missing)})" if missing else
                                 f"{path}:{n}: {len(r['steps'])} steps but {len(r['labels'])} labels")
            solution = " ".join(f"Step {i}: {s.strip()}" for i, s in enumerate(r["steps"], 1))
            out.append({"id": str(r.get("id", f"{path.stem}-{n}")), "question": r["question"],
                        "solution": solution, "labels": [v is True or v == 1 for v in r["labels"]],
                        "source": "prm_data"})
    return out


def sample_solutions(cfg: RunConfig, paths: RunPaths, instructions: Sequence[dict], n: int,
                     out_path: Path, progress: bool = True) -> list[dict]:
    """``n`` solutions sampled from the SFT model on ``instructions`` (round-robin over a seeded
    shuffle), appended per batch to ``out_path``; a rerun resumes after the last finished batch and
    draws the same samples (each batch reseeds from ``[base].seed`` and its index)."""
    import torch
    from tqdm.auto import tqdm

    from rleif_kit.evaluation.generate import generate
    from rleif_kit.jsonl import JsonlWriter, read_jsonl, write_jsonl
    from rleif_kit.sft import load_sft_model

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
    model, tokenizer = load_sft_model(paths.sft_model)
    bar = tqdm(total=len(picks), initial=start, desc="sampling solutions", disable=not progress)
    with JsonlWriter(out_path, fsync_every=batch) as writer:
        for b in range(start, len(picks), batch):
            torch.manual_seed(cfg.base.seed + b)
            chunk = picks[b:b + batch]
            texts = generate(model, tokenizer, [math_prompt(r["text"], cot=cfg.eval.cot_prompt) for r in chunk],
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


def verifier_examples(samples: Sequence[dict]) -> tuple[list[dict], int]:
    """Step labels from the arithmetic verifier; (examples, solutions flagged for having no steps)."""
    from rleif_kit import arith

    out, flagged = [], 0
    for s in samples:
        gold = arith.Problem.from_record(s["problem"]).answer() if s.get("problem") else None
        labels = prm_labels.verifier_labels(s["question"], s["solution"], gold) if gold is not None else []
        if len(labels) != len(solution_step_ends(s["solution"])) or not labels:
            flagged += 1
            continue
        out.append({"id": s["id"], "question": s["question"], "solution": s["solution"], "labels": labels,
                    "source": "verifier"})
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


def split_by_question(examples: Sequence[dict], heldout_share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out whole questions: a PRM must not be measured on a question it trained on."""
    from rleif_kit.reward_models import split_by_group

    return split_by_group([{**e, "group": e["question"]} for e in examples], heldout_share, seed)


def evaluate_prm(model: Any, tokenizer: Any, examples: Sequence[dict], max_len: int) -> tuple[list[bool], list[float]]:
    """Flattened (step label, step score) over ``examples``, skipping flagged solutions."""
    scores = step_scores(model, tokenizer, [(e["question"], e["solution"]) for e in examples], max_len=max_len)
    labels, flat = [], []
    for e, s in zip(examples, scores):
        if s is not None:
            labels += list(e["labels"])
            flat += s
    return labels, flat


def train_prm(cfg: RunConfig, paths: RunPaths, examples: Sequence[dict]) -> tuple[Any, Any, PRMResult]:
    """Train the PRM on ``examples`` ({question, solution, labels}) and save it with a model card."""
    import torch
    from transformers import Trainer, TrainingArguments

    from rleif_kit.reward_models import load_rm_for_training, loss_log, resolve_rm_base, rm_report_to, save_rm
    from rleif_kit.models import use_bf16

    from rleif_kit.reward_stage import launch_training

    rm = cfg.reward_model
    out_dir = paths.stage("04_reward_models") / "prm"
    if launch_training(cfg, paths, "prm", examples):  # [base].launcher = "accelerate"
        from rleif_kit.launch import load_result
        from rleif_kit.reward_models import load_rm

        return *load_rm(out_dir, bf16=cfg.base.bf16), load_result(PRMResult, out_dir / "result.json")
    train, heldout = split_by_question(examples, rm.rm_heldout_share, cfg.base.seed)
    if not train:
        raise ValueError("no PRM training examples: every sampled solution was flagged or none were sampled")
    base = resolve_rm_base(cfg, paths, rm.prm_base, "[reward_model] prm_base")
    bf16 = use_bf16(cfg.base.bf16)
    model, tokenizer = load_rm_for_training(base, "token", cfg, bf16)
    rows = [r for r in (encode(tokenizer, e["question"], e["solution"], e["labels"], rm.rm_max_len) for e in train)
            if r is not None]
    steps = int(rm.rm_epochs * -(-len(rows) // rm.rm_batch_size))
    args = TrainingArguments(output_dir=str(out_dir / "checkpoints"), learning_rate=rm.rm_lr,
                             num_train_epochs=rm.rm_epochs, per_device_train_batch_size=rm.rm_batch_size,
                             save_strategy="no", logging_steps=max(1, min(10, steps // 10)),
                             report_to=rm_report_to(cfg), use_cpu=not torch.cuda.is_available(), bf16=bf16,
                             seed=cfg.base.seed, remove_unused_columns=False, disable_tqdm=False,
                             warmup_steps=0.05)
    trainer = Trainer(model=model, args=args, train_dataset=[{k: r[k] for k in ("input_ids", "labels")} for r in rows],
                      data_collator=StepLabelCollator(tokenizer.pad_token_id))
    start = time.perf_counter()
    trainer.train()
    runtime = time.perf_counter() - start
    labels, scores = evaluate_prm(trainer.model, tokenizer, heldout, rm.rm_max_len)
    train_labels = [label for e in train for label in e["labels"]]
    result = PRMResult(out_dir, len(train), len(heldout), len(train_labels), len(labels),
                       sum(train_labels) / max(1, len(train_labels)), threshold_accuracy(labels, scores),
                       roc_auc(labels, scores), runtime, loss_log(trainer), scores, labels)
    card = (f"# Process reward model (PRM)\n\nBase: `{rm.prm_base}` ({rm.rm_finetune}). Token classification at the "
            f"last token of each step (label 1 = step correct). Trained on {result.train_steps} labelled steps "
            f"of {len(train)} solutions ({result.correct_share:.0%} correct; labels: {rm.prm_step_label}). "
            f"Held out: {len(heldout)} solutions of unseen questions, {len(labels)} steps — step accuracy "
            f"{fmt_score(result.step_accuracy)}, AUC {fmt_score(result.step_auc)}.\nlr {rm.rm_lr}, epochs {rm.rm_epochs}, "
            f"batch {rm.rm_batch_size}, max length {rm.rm_max_len}. rA = {rm.prm_aggregate} over steps.\n")
    save_rm(trainer, tokenizer, out_dir, {"head": "token", "finetune": rm.rm_finetune, "base_model": base},
            card)
    return trainer.model, tokenizer, result


def fmt_score(x: float | None) -> str:
    """A score to 3 decimals, or "n/a" when there was nothing to measure it on (no held-out steps of a class)."""
    return "n/a" if x is None else f"{x:.3f}"

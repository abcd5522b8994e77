"""The generative PRM (``[reward_model] prm_head = "likelihood"``): a language model that scores each step by how
likely it finds what the step concludes, and a calibration, learned from the run's step labels, that turns that
likelihood into P(step right).

Why: a step is right when the value it claims is the value its operands give, and a model that does the arithmetic
already holds that in its next-token probabilities — the SFT model writes step 1's result right 87% of the time on
the tiny preset. A token classifier started from it has to learn the check again from one bit per step, and on the
tiny preset it did not (a step's result +1 moved its score on half the pairs, chance). Read directly, the SFT
model's probability of the written result moves on 97-100% of them (benchmarks/bench_prm_levers.py).

Training, from the run's labels: the language model is fine-tuned on the right solutions of the training side
(every step labelled right; with ``prm_hard_negatives`` the right answers those edits came from), the loss on the
solution and its end of text; it learns what a right solution looks like, where it goes on and where it stops —
the SFT model itself copies its teacher's early stop, a model of right solutions does not. Then a logistic
calibration ``sigmoid(a * x + b)`` is fitted to the labelled steps of the training side, right and wrong, where x
is the step's lowest token log-probability over what it concludes (``rewards.reward.likelihood_features``); it
is saved in the model's config (``prm_calibration``), so the folder scores alone.
"""

from __future__ import annotations

from typing import Any, Sequence

from rleif_kit.rewards.reward import CALIBRATION, IGNORE, likelihood_features, prm_input


def likelihood_rows(tokenizer: Any, examples: Sequence[dict], max_len: int, world: Any,
                    same_edits: bool = False) -> list[dict]:
    """Language-model rows of the right solutions among ``examples``: the PRM's input text and an end of text, the
    loss on the solution's tokens only (the prompt's are -100); a row longer than ``max_len`` is left out. With
    ``same_edits`` each right solution also comes rewritten by each of the world's edits that keep its meaning
    (``World.solution_edits`` of direction "same"; arith: a step's operands of + or x swapped), so the model learns
    that these are right too."""
    solutions = []
    for e in examples:
        if e["labels"] and all(e["labels"]):
            solutions.append((e["question"], e["solution"]))
            if same_edits:
                solutions += [(e["question"], edited) for edit, direction in world.solution_edits.values()
                              if direction == "same" and (edited := edit(e["solution"])) is not None]
    rows = []
    for question, solution in solutions:
        text, _, offset = prm_input(question, solution, world)
        enc = tokenizer(text, return_offsets_mapping=True)
        ids = list(enc["input_ids"]) + [tokenizer.eos_token_id]
        if len(ids) > max_len:
            continue
        first = next(i for i, (a, b) in enumerate(enc["offset_mapping"]) if b > offset)
        rows.append({"input_ids": ids, "labels": [IGNORE] * first + ids[first:]})
    return rows


def fit_calibration(features: Sequence[float], labels: Sequence[bool]) -> list[float]:
    """[a, b] of the logistic regression P(right) = sigmoid(a * x + b) on the steps' features; [1, 0] when the
    steps hold one class only (nothing to separate: the raw likelihood's sigmoid)."""
    import torch  # heavy: loaded on first use

    if len(set(map(bool, labels))) < 2:
        return [1.0, 0.0]
    x = torch.tensor(features, dtype=torch.float64)
    y = torch.tensor([float(v) for v in labels], dtype=torch.float64)
    ab = torch.tensor([1.0, 0.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([ab], max_iter=200, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(ab[0] * x + ab[1], y)
        value.backward()
        return value

    opt.step(loss)
    return [round(v, 6) for v in ab.detach().tolist()]


def calibrate(model: Any, tokenizer: Any, examples: Sequence[dict], max_len: int, world: Any) -> list[float]:
    """Fit the calibration on ``examples``' labelled steps and store it in ``model.config`` (saved with it)."""
    features = likelihood_features(model, tokenizer, [(e["question"], e["solution"]) for e in examples],
                                   max_len=max_len, world=world)
    xs, ys = [], []
    for e, f in zip(examples, features):
        if f is not None and len(f) == len(e["labels"]):
            xs += f
            ys += list(e["labels"])
    calibration = fit_calibration(xs, ys)
    setattr(model.config, CALIBRATION, calibration)
    return calibration

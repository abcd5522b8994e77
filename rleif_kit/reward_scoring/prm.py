"""rA from the process reward model: P(step correct) per step, aggregated per solution.

A token-classifier PRM is read at the LAST token of each step (``worlds/steps.step_end_positions``):
there the model has seen the whole step and nothing of the next; a generative PRM by the likelihood of what each
step concludes (:func:`likelihood_features`, below). Input text is the SFT prompt followed by
the solution, exactly as the policy sees it in PPO. ``rA`` is one number from the per-step scores
(``[reward_model].prm_aggregate``, :func:`rleif_kit.core.reward_math.aggregate_steps`). A solution whose
steps cannot be found gets ``None`` (flagged), never a silent one-step score. Training (04) encodes its
examples with the same :func:`encode`, so training and scoring agree on where each label sits.
"""

from __future__ import annotations

from typing import Any, Sequence

from rleif_kit.core.reward_math import aggregate_steps
from rleif_kit.worlds.base import STEP_BY_STEP
from rleif_kit.worlds.steps import step_end_positions

IGNORE = -100  # label of every token that is not a step end (ignored by the loss)


class StepsNotFound(ValueError):
    """The solution has no step structure the PRM can score."""


def solution_step_ends(solution: str, world: Any = STEP_BY_STEP) -> list[int]:
    """Exclusive character end of each step as ``world`` splits its solutions (``World.steps``: 'Step k:'
    markers, else one step per line); the final 'The answer is: X' line belongs to the last step. [] when no
    step is found: the caller flags the solution. Training, scoring, the gate, PPO, GRPO and the judges all
    place labels here."""
    return world.steps.char_ends(solution)


def prm_input(question: str, solution: str, world: Any = STEP_BY_STEP) -> tuple[str, str, int]:
    """(full text, the solution as placed in it, character offset of the solution in the text): the world's
    PRM prompt (``World.prm_prompt``: the chain-of-thought form, whatever prompt the policy was given) and the
    solution as SFT trains it."""
    prompt = world.prm_prompt(question)
    completion = world.completion(solution)  # as in SFT: " " + the stripped solution (math), the output itself (code)
    placed = completion.lstrip()
    return prompt + completion, placed, len(prompt) + len(completion) - len(placed)


def encode(tokenizer: Any, question: str, solution: str, labels: Sequence[bool] | None = None,
           max_len: int = 1024, world: Any = STEP_BY_STEP) -> dict | None:
    """Token ids, the token position of each step end (None where truncated), and token labels.

    None when the solution has no findable steps. ``labels`` must give one verdict per step.
    """
    text, placed, offset = prm_input(question, solution, world)
    ends = [offset + e for e in solution_step_ends(placed, world)]
    if not ends:
        return None
    enc = tokenizer(text, return_offsets_mapping=True)
    positions = step_end_positions(enc["offset_mapping"], ends, max_len)
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
        import torch  # heavy: loaded on first use

        width = max(len(r["input_ids"]) for r in rows)
        pad = lambda seq, value: list(seq) + [value] * (width - len(seq))  # noqa: E731
        batch = {"input_ids": torch.tensor([pad(r["input_ids"], self.pad_token_id) for r in rows]),
                 "attention_mask": torch.tensor([pad([1] * len(r["input_ids"]), 0) for r in rows])}
        if "labels" in rows[0]:
            batch["labels"] = torch.tensor([pad(r["labels"], IGNORE) for r in rows])
        return batch


def step_scores(model: Any, tokenizer: Any, items: Sequence[tuple[str, str]], batch_size: int = 32,
                max_len: int = 1024, world: Any = STEP_BY_STEP) -> list[list[float] | None]:
    """P(step correct) per step of each (question, solution); None for a solution whose steps cannot
    be found or were cut off at ``max_len`` (flagged, not scored on a part). A generative PRM (a causal LM with
    its calibration in its config, ``rewards/prm_likelihood.py``) scores by what it expects each step to conclude:
    :func:`likelihood_step_scores`."""
    import torch  # heavy: loaded on first use

    if getattr(model.config, CALIBRATION, None) is not None:
        return likelihood_step_scores(model, tokenizer, items, batch_size, max_len, world)

    encoded = [encode(tokenizer, q, s, max_len=max_len, world=world) for q, s in items]
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


# ---------------------------------------------------------------- the generative PRM: the step's own likelihood

CALIBRATION = "prm_calibration"  # [a, b] in a generative PRM's config.json: P(step right) = sigmoid(a * x + b)


def conclusion_spans(text: str, offset: int, ends: Sequence[int]) -> list[tuple[int, int]]:
    """(start, end) in ``text`` of what each step concludes, for step ends ``ends`` of the solution placed at
    ``offset``: from after the step's last ``=`` to its end (its result, and for the last step the answer line too);
    the whole step when it has no ``=`` or nothing after it (a step that claims no value is read whole, never
    skipped). The operands are left out: which order a step writes them in is not a mistake (``3 + 5`` or
    ``5 + 3``), the value it claims is."""
    spans, start = [], offset
    for end in ends:
        eq = text.rfind("=", start, offset + end)
        concludes = eq >= 0 and text[eq + 1:offset + end].strip()
        spans.append((eq + 1 if concludes else start, offset + end))
        start = offset + end
    return spans


def _tokens_in(text: str, offsets: Sequence[tuple[int, int]], lo: int, hi: int) -> list[int]:
    """Indices of the tokens whose text (leading space aside) starts in [lo, hi) and ends by ``hi``."""
    out = []
    for i, (a, b) in enumerate(offsets):
        piece = text[a:b]
        first = a + len(piece) - len(piece.lstrip())
        if i > 0 and piece.strip() and lo <= first < hi and b <= hi:
            out.append(i)
    return out


def likelihood_features(model: Any, tokenizer: Any, items: Sequence[tuple[str, str]], batch_size: int = 32,
                        max_len: int = 1024, world: Any = STEP_BY_STEP) -> list[list[float] | None]:
    """Per step of each (question, solution): the lowest log-probability the model gives a token of what the
    step concludes (:func:`conclusion_spans`), the end of the text counted with the last step (a solution cut
    before its answer line ends where the model expects more). None where no step is found or the text is cut
    at ``max_len``."""
    import torch  # heavy: loaded on first use

    rows: list[tuple[list[int], list[list[int]]] | None] = []
    for question, solution in items:
        text, placed, offset = prm_input(question, solution, world)
        ends = solution_step_ends(placed, world)
        enc = tokenizer(text, return_offsets_mapping=True)
        ids = list(enc["input_ids"]) + [tokenizer.eos_token_id]
        if not ends or len(ids) > max_len:
            rows.append(None)
            continue
        spans = conclusion_spans(text, offset, ends)
        steps = zip([offset, *(offset + e for e in ends[:-1])], (offset + e for e in ends))
        # what a step concludes; the whole step where no token lies wholly in that (a token across the "="); the
        # end of text with the last step
        marks = [(_tokens_in(text, enc["offset_mapping"], lo, hi) or _tokens_in(text, enc["offset_mapping"], *step))
                 + ([len(ids) - 1] if k == len(spans) - 1 else []) for k, ((lo, hi), step) in enumerate(zip(spans, steps))]
        rows.append((ids, marks))
    out: list[list[float] | None] = [None] * len(items)
    usable = [i for i, r in enumerate(rows) if r is not None]
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id
    with torch.no_grad():
        for start in range(0, len(usable), batch_size):
            idx = usable[start:start + batch_size]
            width = max(len(rows[i][0]) for i in idx)
            ids = torch.tensor([rows[i][0] + [pad] * (width - len(rows[i][0])) for i in idx], device=device)
            mask = torch.tensor([[1] * len(rows[i][0]) + [0] * (width - len(rows[i][0])) for i in idx], device=device)
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            token_lp = logits.gather(-1, ids[:, 1:, None])[..., 0] - logits.logsumexp(-1)  # log p of token t+1
            for row, i in enumerate(idx):
                lp = token_lp[row]
                out[i] = [min((lp[t - 1].item() for t in toks), default=0.0) for toks in rows[i][1]]
    model.train(was_training)
    return out


def calibrated(x: float, calibration: Sequence[float]) -> float:
    """P(step right) from a step's feature: sigmoid(a * x + b)."""
    import math

    a, b = calibration
    z = a * x + b
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def likelihood_step_scores(model: Any, tokenizer: Any, items: Sequence[tuple[str, str]], batch_size: int = 32,
                           max_len: int = 1024, world: Any = STEP_BY_STEP) -> list[list[float] | None]:
    """A generative PRM's P(step right) per step: :func:`likelihood_features` through its calibration."""
    how = getattr(model.config, CALIBRATION)
    return [None if f is None else [calibrated(x, how) for x in f]
            for f in likelihood_features(model, tokenizer, items, batch_size, max_len, world)]


def prm_score(model: Any, tokenizer: Any, question: str, solution: str, max_len: int = 1024) -> list[float]:
    """Per-step scores of one solution; raises StepsNotFound rather than scoring it as one step."""
    scores = step_scores(model, tokenizer, [(question, solution)], max_len=max_len)[0]
    if scores is None:
        raise StepsNotFound(f"no scorable steps in: {solution[:80]!r}")
    return scores


def answer_scores(model: Any, tokenizer: Any, items: Sequence[tuple[str, str]], how: str = "min",
                  batch_size: int = 32, max_len: int = 1024, world: Any = STEP_BY_STEP) -> list[float | None]:
    """rA per (question, solution): the PRM's step scores aggregated by ``how``; None when flagged."""
    return [None if s is None else aggregate_steps(s, how)
            for s in step_scores(model, tokenizer, items, batch_size, max_len, world)]

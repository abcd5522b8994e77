"""The RLEIF reward, whole: a rollout (instructions and their responses) in, rI, rA, rV, rF and r out.

- **rI** — the instruction reward model (IRM, stage 04) scores the instruction: the sigmoid of its reward head, in
  [0, 1] (:func:`irm_score`).
- **rA** — the process reward model (PRM) scores each step of the response, P(step correct), read at the LAST token
  of each step (``worlds/steps.step_end_positions``: there the model has seen the whole step and nothing of the
  next), or for a generative PRM by the likelihood of what each step concludes (:func:`likelihood_features`);
  the step scores become one number by ``[reward_model].prm_aggregate`` (:func:`aggregate_steps`). A response
  whose steps cannot be found gets ``None`` (flagged, scored 0 and counted), never a silent one-step score. With
  ``answer_reward = "verifier"`` the world's step verifier plays a perfect PRM (arith).
- **rV**, **rF** — the world's verifier (gold answer, unit tests) and the format term, computed only when the
  formula uses them; a record the verifier cannot judge gets rV = 0 and is counted (``rV_missing``).
- **r** — ``[ppo].reward_formula`` over the four (``core/reward_formula.py`` parses it; it sits in ``core`` because
  config validation needs it before any stage runs).

:class:`RewardScorer` is what PPO and GRPO call once per batch. The same scorers as plain functions (an answer
scorer ``(records, solutions) -> rA`` such as :func:`prm_scorer`, an instruction scorer ``texts -> rI`` such as
:func:`irm_scorer`) serve the gate's probes and 07's checks, so a check sees exactly the reward PPO is given.
Loading a saved IRM or PRM back (:func:`load_rm`) and the PRM's input encoding, which 04's training shares
(:func:`encode`, so training and scoring agree on where each label sits), are here too.
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from rleif_kit.core.config import RunConfig
from rleif_kit.core.metrics import truth_figures
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.models.loading import from_pretrained, load_tokenizer, nf4_config, use_bf16
from rleif_kit.models.refs import resolve_ref
from rleif_kit.worlds import world_for
from rleif_kit.worlds.base import STEP_BY_STEP
from rleif_kit.worlds.steps import step_end_positions

# ------------------------------------------------------------------ rA from step scores: the aggregation

AGGREGATIONS = ("min", "prod", "last", "mean")


def aggregate_steps(scores: Sequence[float], how: str = "min") -> float:
    """One answer score rA from per-step PRM scores.

    ``min`` (the recipe's default) says "a solution is as good as its worst step", so one wrong
    step cannot be averaged away; ``prod`` reads the scores as independent step probabilities;
    ``last`` trusts the final step alone; ``mean`` is the lenient baseline. Empty scores raise:
    a solution whose steps cannot be found is flagged, not silently scored.
    """
    if how not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation '{how}' (expected one of {', '.join(AGGREGATIONS)})")
    values = [float(s) for s in scores]
    if not values:
        raise ValueError("no step scores: a solution whose steps cannot be found is flagged, "
                         "not silently scored")
    if how == "min":
        return min(values)
    if how == "prod":
        return math.prod(values)
    if how == "last":
        return values[-1]
    return sum(values) / len(values)


# ------------------------------------------------------------------ r over the steps: step-level credit

def step_credits(formula: Callable[..., float], ri: float, steps: Sequence[float] | None, how: str = "min",
                 rv: float = 0.0, rf: float = 0.0) -> tuple[list[float], float]:
    """r split over a response's steps: (the credit of each step, the credit left for the last token).

    With ``A_k`` the running aggregate of the first k step scores (``aggregate_steps(steps[:k], how)``) and
    ``g(a) = formula(rI, a, rV, rF)`` (r with rA = a), step k is credited ``g(A_k) - g(A_{k-1})``, step 1
    ``g(A_1) - g(0)``, and the last token ``g(0)`` (what r is without rA: the verifier's and the format's share of an
    additive formula, 0 for a product). The credits telescope, so they sum to ``g(A_K)`` = today's r exactly: the two
    granularities give every response the same total and differ only in where its parts are credited. A product
    formula survives the split as a scale: ``r = rI * rA`` gives step k ``rI * (A_k - A_{k-1})``, with ``min`` the
    drop a step makes to the worst step so far (0 for a step no worse than those before it, negative for the first
    wrong one). A response without steps (None or []) keeps all of r, rA = 0, at the end, as the solution level
    scores it.
    """
    def g(a: float) -> float:
        return formula(rI=ri, rA=a, rV=rv, rF=rf)

    at_end = g(0.0)
    if not steps:
        return [], at_end
    credits, before = [], at_end
    for k in range(1, len(steps) + 1):
        now = g(aggregate_steps(steps[:k], how))
        credits.append(now - before)
        before = now
    return credits, at_end


# ------------------------------------------------------------------ rI: the instruction reward model

def irm_score(model: Any, tokenizer: Any, instructions: Sequence[str], batch_size: int = 64,
              max_length: int = 512) -> list[float]:
    """rI for each instruction: the sigmoid of the reward head, in [0, 1], batched.

    Each text ends in EOS, as TRL's RewardTrainer trains on it: where the pad token differs from EOS
    (Llama-3, Qwen, WizardLM's ``[PAD]``) the head reads the EOS token in training, so it must read it here too.
    """
    import torch  # heavy: loaded on first use

    was_training = model.training
    model.eval()
    tokenizer.padding_side = "right"
    device = next(model.parameters()).device
    scores: list[float] = []
    eos = tokenizer.eos_token or ""
    with torch.no_grad():
        for i in range(0, len(instructions), batch_size):
            texts = [t if t.endswith(eos) else t + eos for t in instructions[i:i + batch_size]]
            enc = tokenizer(texts, return_tensors="pt", padding=True,
                            truncation=True, max_length=max_length).to(device)
            scores += torch.sigmoid(model(**enc).logits[:, 0].float()).tolist()
    model.train(was_training)
    return scores


# ------------------------------------------------------------------ rA: the process reward model, per step

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
        offsets = enc["offset_mapping"]
        marks = [(_tokens_in(text, offsets, lo, hi) or _tokens_in(text, offsets, *step))
                 + ([len(ids) - 1] if k == len(spans) - 1 else [])
                 for k, ((lo, hi), step) in enumerate(zip(spans, steps))]
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


# ------------------------------------------------------------------ a saved IRM or PRM back from disk

RM_INFO = "rm_info.json"  # what a saved reward model is: its head, fine-tuning and base


HEADS = {"sequence": ("AutoModelForSequenceClassification", 1, "SEQ_CLS"),  # IRM: one reward per text
         "token": ("AutoModelForTokenClassification", 2, "TOKEN_CLS"),  # PRM: correct / not, per token
         "likelihood": ("AutoModelForCausalLM", None, "CAUSAL_LM")}  # generative PRM (rewards/prm_likelihood.py)


# The PRM's two classes by name, in its config.json (not LABEL_0 / LABEL_1): scoring reads index 1 ("right"),
# P(step correct), and a reader of the saved model sees which index that is.
PRM_LABELS = {0: "wrong", 1: "right"}
LABELS = {"token": PRM_LABELS}


def head_labels(head: str) -> dict[str, dict]:
    """``id2label`` / ``label2id`` keyword arguments of a head's ``from_pretrained`` ({} for the IRM's one score)."""
    names = LABELS.get(head)
    return {} if names is None else {"id2label": dict(names), "label2id": {v: k for k, v in names.items()}}


def head_kwargs(head: str) -> dict[str, Any]:
    """A head's ``from_pretrained`` keyword arguments: its number of outputs (none for a language model, whose head is
    its vocabulary) and its label names (:func:`head_labels`)."""
    _, num_labels, _ = HEADS[head]
    return {**({} if num_labels is None else {"num_labels": num_labels}), **head_labels(head)}


def head_class(head: str):
    import transformers  # heavy: loaded on first use

    name, labels, task = HEADS[head]
    return getattr(transformers, name), labels, task


def load_rm(model_dir: str | Path, load_in_4bit: bool = False, bf16: bool = False) -> tuple[Any, Any]:
    """A saved IRM or PRM for scoring: full weights, or base + adapter (merged unless 4-bit); bf16 when
    asked and the GPU has it, else fp32."""
    import torch  # heavy: loaded on first use

    model_dir = Path(model_dir)
    info_path = model_dir / RM_INFO
    if not info_path.exists():
        raise FileNotFoundError(f"{model_dir} is not a saved reward model (no {RM_INFO}): run {REWARD_MODELS}")
    info = json.loads(info_path.read_text())
    base = resolve_ref(info.get("base_model", ""), model_dir)  # stored relative to the folder (models.refs)
    cls, _, _ = head_class(info["head"])
    tokenizer = load_tokenizer(str(model_dir))

    dtype = torch.bfloat16 if (load_in_4bit or use_bf16(bf16)) else torch.float32  # fp32 only on CPUs
    kwargs: dict[str, Any] = {"dtype": dtype, **head_kwargs(info["head"])}
    if load_in_4bit:
        kwargs["quantization_config"] = nf4_config(torch.bfloat16)
    if info["finetune"] == "full":
        model = cls.from_pretrained(model_dir, **kwargs)
    else:
        from peft import PeftModel  # heavy: loaded on first use

        # the base may be a hub id: out of reach and not cached, one line at once, not the library's retries
        model = PeftModel.from_pretrained(from_pretrained(cls.from_pretrained, base, **kwargs), model_dir)
        if not load_in_4bit:
            model = model.merge_and_unload()
    model.config.pad_token_id = tokenizer.pad_token_id
    if "calibration" in info:  # a generative PRM's (rewards/prm_likelihood.py): what scoring reads
        setattr(model.config, CALIBRATION, list(info["calibration"]))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, tokenizer


# ------------------------------------------------------------------ the scorers: plain functions over records

AnswerScorer = Callable[[Sequence[dict], Sequence[str]], list]  # (instruction records, solutions) -> rA or None
InstructionScorer = Callable[[Sequence[str]], list]  # instruction texts -> rI


def prm_scorer(model: Any, tokenizer: Any, how: str, batch_size: int = 32, max_len: int = 1024,
               world: Any = STEP_BY_STEP) -> AnswerScorer:
    """rA from a loaded PRM: its step scores aggregated by ``how``; None where it finds no steps."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return answer_scores(model, tokenizer, [(r["text"], s) for r, s in zip(records, solutions)], how,
                             batch_size=batch_size, max_len=max_len, world=world)
    return score


def step_verifier_scorer(world: Any) -> AnswerScorer:
    """rA from the world's step verifier (``answer_reward = "verifier"``): 1 when every step and the answer are
    right, else 0; None for a solution without steps (or a record the verifier cannot read)."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return [float(all(labels)) if labels else None for labels in world.step_labels_batch(records, solutions)]
    return score


def verifier_scorer(world: Any) -> AnswerScorer:
    """rV: the world's verifier on each response (gold-answer match, the step verifier, unit tests); None where a
    record cannot be verified (the caller counts those)."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return [v.rv for v in world.check_batch(records, solutions)]
    return score


def verifiable_terms(world: Any, terms: Any, records: Sequence[dict], solutions: Sequence[str],
                     checks: Sequence[Any] | None = None) -> dict[str, list]:
    """rV and rF of each response where ``terms`` (a formula's) names them: ``{"rV", "rV_missing", "rF"}``; a
    record the verifier cannot judge gets rV = 0 and is marked missing. ``checks``: the world's
    ``check_batch`` of these responses when the caller has it already. PPO, GRPO, the gate and 07 all use this."""
    out: dict[str, list] = {}
    if "rV" in terms:
        raw = [c.rv for c in checks] if checks is not None else verifier_scorer(world)(records, solutions)
        out["rV"], out["rV_missing"] = [0.0 if v is None else v for v in raw], [v is None for v in raw]
    if "rF" in terms:
        out["rF"] = format_scorer(world)(records, solutions)
    return out


def format_scorer(world: Any) -> AnswerScorer:
    """rF: the world's format term on each response (steps found and a final answer line)."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return [world.format_score(s) for s in solutions]
    return score


def irm_scorer(model: Any, tokenizer: Any, batch_size: int = 64, max_length: int = 512) -> InstructionScorer:
    def score(texts: Sequence[str]) -> list:
        return irm_score(model, tokenizer, list(texts), batch_size=batch_size, max_length=max_length)
    return score


# ------------------------------------------------------------------ r for a batch: what PPO and GRPO call

def term_log_fields(scores: dict) -> dict:
    """The verifiable terms' columns of a log row, where the formula uses them: mean rV, the share of responses
    the verifier could not judge (scored rV = 0), mean rF."""
    out = {}
    if "rV" in scores:
        out.update(rV_mean=statistics.fmean(scores["rV"]),
                   rV_missing_share=sum(scores["rV_missing"]) / len(scores["rV"]))
    if "rF" in scores:
        out["rF_mean"] = statistics.fmean(scores["rF"])
    return out


def step_log_fields(scores: dict) -> dict[str, float | None]:
    """At the step level (``[ppo] reward_granularity = "step"``), the log row's step columns: the mean number of steps
    scored per response with steps, the mean step score, the share of steps scored below 0.5, and
    ``early_credit_mean``, the mean part of r credited before the last step (where the two granularities differ);
    empty at the solution level."""
    if "step_credits" not in scores:
        return {}
    scored = [s for s in scores["step_scores"] if s]
    flat = [x for s in scored for x in s]
    early = [sum(c[:-1]) for c in scores["step_credits"] if c]
    return {"steps_mean": statistics.fmean(map(len, scored)) if scored else None,
            "step_score_mean": statistics.fmean(flat) if flat else None,
            "low_step_share": sum(x < 0.5 for x in flat) / len(flat) if flat else None,
            "early_credit_mean": statistics.fmean(early) if early else None}


def truth_log_fields(correct: Sequence[bool | None], scores: dict[str, Sequence[float]]) -> dict[str, Any]:
    """The reward-against-truth columns of a PPO log row for one rollout batch (empty when nothing was judged)."""
    if not any(c is not None for c in correct):
        return {}
    out: dict[str, Any] = {}
    for key, name in (("rA", "rA"), ("reward", "r")):
        f = truth_figures(correct, scores[key])
        out.update({f"{name}_truth_auc": f["auc"], f"{name}_right_mean": f["right_mean"],
                    f"{name}_wrong_mean": f["wrong_mean"]})
        out["truth_n"], out["right_share"] = f["n"], f["right"] / f["n"] if f["n"] else None
    return out


class RewardScorer:
    """rI, rA and r for (instruction, response) pairs, from the stage-04 reward models."""

    def __init__(self, cfg: RunConfig, paths: RunPaths, irm: tuple[Any, Any] | None = None,
                 prm: tuple[Any, Any] | None = None):
        quantized = cfg.reward_model.rm_finetune == "qlora"  # 7B recipe: the reward models sit in 4-bit
        self.cfg = cfg
        self.irm = irm or load_rm(paths.irm_model, load_in_4bit=quantized, bf16=cfg.base.bf16)
        self.prm = None
        if cfg.reward_model.answer_reward == "prm":
            self.prm = prm or load_rm(paths.prm_model, load_in_4bit=quantized, bf16=cfg.base.bf16)
        self.formula = parse_reward_formula(cfg.ppo.reward_formula)
        self.world = world_for(cfg)
        self._ri: dict[str, float] = {}
        self.timings: dict[str, float] = {}  # the last call's seconds per part (verify_s: the world's verifier)

    def instruction_scores(self, instructions: Sequence[dict]) -> list[float]:
        new = [r for r in {r["id"]: r for r in instructions}.values() if r["id"] not in self._ri]
        if new:
            scores = irm_score(self.irm[0], self.irm[1], [r["text"] for r in new], batch_size=self.cfg.ppo.gen_batch,
                               max_length=self.cfg.reward_model.rm_max_len)
            self._ri.update(zip((r["id"] for r in new), scores))
        return [self._ri[r["id"]] for r in instructions]

    @property
    def step_level(self) -> bool:
        """``[ppo] reward_granularity = "step"`` with a formula that reads rA: r is split over the steps."""
        return self.cfg.ppo.reward_granularity == "step" and "rA" in self.formula.terms

    @property
    def aggregation(self) -> str:
        """How the step scores become rA: ``[reward_model] prm_aggregate``; the step verifier's 1/0 labels by ``min``
        (1 when every step is right, as :func:`step_verifier_scorer` scores it)."""
        return self.cfg.reward_model.prm_aggregate if self.prm is not None else "min"

    def answer_steps(self, instructions: Sequence[dict], responses: Sequence[str]) -> list[list[float] | None]:
        """The step scores behind rA, per response: the PRM's P(step right), or the step verifier's labels as 1.0 /
        0.0; None where no steps are found (flagged, as :meth:`answer_scores` flags them)."""
        if self.prm is None:
            return [[float(x) for x in labels] if labels else None
                    for labels in self.world.step_labels_batch(instructions, responses)]
        rm = self.cfg.reward_model
        return step_scores(self.prm[0], self.prm[1], [(r["text"], s) for r, s in zip(instructions, responses)],
                           batch_size=self.cfg.ppo.gen_batch, max_len=rm.rm_max_len, world=self.world)

    def step_ends(self, instruction: dict, response: str) -> list[int]:
        """Exclusive character end of each step in ``response`` where the PRM read it (its steps as placed in the
        PRM's input, :func:`prm_input`); [] when the placed solution is not found in the response as sampled."""
        _, placed, _ = prm_input(instruction["text"], response, self.world)
        offset = response.find(placed)
        return [] if offset < 0 else [offset + e for e in solution_step_ends(placed, self.world)]

    def answer_scores(self, instructions: Sequence[dict], responses: Sequence[str]) -> list[float | None]:
        """rA per response; None where the PRM finds no steps (the caller scores those 0 and counts them)."""
        if self.prm is None:
            return step_verifier_scorer(self.world)(instructions, responses)
        rm = self.cfg.reward_model
        # scored gen_batch at a time, the micro-batch that already bounds rollout memory: on one H200 the
        # reward models' default batches (64 / 32) peaked at 28 GiB in the 24 GB preset
        return prm_scorer(self.prm[0], self.prm[1], rm.prm_aggregate, batch_size=self.cfg.ppo.gen_batch,
                          max_len=rm.rm_max_len, world=self.world)(instructions, responses)

    def verifiable_terms(self, instructions: Sequence[dict], responses: Sequence[str],
                         checks: Sequence[Any] | None = None) -> dict[str, list]:
        """rV and rF where the formula uses them: ``{"rV": [...], "rV_missing": [...], "rF": [...]}``."""
        return verifiable_terms(self.world, self.formula.terms, instructions, responses, checks)

    def check(self, instructions: Sequence[dict], responses: Sequence[str]) -> list[Any]:
        """The world's verdict on every response at once (the code world: all programs in the sandbox in
        parallel), timed into ``timings["verify_s"]``."""
        t0 = time.perf_counter()
        checks = self.world.check_batch(instructions, responses)
        self.timings["verify_s"] = time.perf_counter() - t0
        return checks

    def combine(self, ri: Sequence[float], ra: Sequence[float], terms: dict[str, list]) -> list[float]:
        """r per response from its terms by ``[ppo] reward_formula``."""
        n = len(ri)
        rv, rf = terms.get("rV", [0.0] * n), terms.get("rF", [0.0] * n)
        return [self.formula(rI=i, rA=a, rV=v, rF=f) for i, a, v, f in zip(ri, ra, rv, rf)]

    def instruction_texts(self, texts: Sequence[str]) -> list[float]:
        """rI of bare instruction texts (the probes' edited instructions, which have no ids to cache under)."""
        return irm_scorer(self.irm[0], self.irm[1], batch_size=self.cfg.ppo.gen_batch,
                          max_length=self.cfg.reward_model.rm_max_len)(texts)

    def close(self) -> None:
        """Free both reward models (before launched ranks load their own copies on the same GPUs)."""
        import torch  # heavy: loaded on first use

        self.irm = self.prm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def __call__(self, instructions: Sequence[dict], responses: Sequence[str]) -> dict[str, list]:
        t0 = time.perf_counter()
        ri = self.instruction_scores(instructions)
        steps = self.answer_steps(instructions, responses) if self.step_level else None
        if steps is not None:
            ra_raw = [None if s is None else aggregate_steps(s, self.aggregation) for s in steps]
        else:
            ra_raw = self.answer_scores(instructions, responses)
        ra = [0.0 if a is None else a for a in ra_raw]
        checks = self.check(instructions, responses)
        terms = self.verifiable_terms(instructions, responses, checks)
        out = {"rI": ri, "rA": ra, **terms, "flagged": [a is None for a in ra_raw],
               "reward": self.combine(ri, ra, terms),
               "correct": [c.correct for c in checks]}  # None: no verifier
        if steps is not None:
            out.update(self.split(instructions, responses, ri, steps, terms))
        self.timings["reward_s"] = time.perf_counter() - t0
        return out

    def split(self, instructions: Sequence[dict], responses: Sequence[str], ri: Sequence[float],
              steps: Sequence[list[float] | None], terms: dict[str, list]) -> dict[str, list]:
        """The step level's columns: each response's step scores, the credit of each step (:func:`step_credits`),
        the credit left for its last token, and where each step ends in the response (characters)."""
        n = len(ri)
        rv, rf = terms.get("rV", [0.0] * n), terms.get("rF", [0.0] * n)
        parts = [step_credits(self.formula, i, s, self.aggregation, v, f) for i, s, v, f in zip(ri, steps, rv, rf)]
        return {"step_scores": [s or [] for s in steps], "step_credits": [c for c, _ in parts],
                "end_credit": [e for _, e in parts],
                "step_ends": [self.step_ends(rec, resp) if s else [] for rec, resp, s in
                              zip(instructions, responses, steps)]}

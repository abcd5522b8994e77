"""Judge prompts and robust parsing of judge answers (pure; the backend calls come later).

Why parsing is strict: a mis-read ranking or step verdict becomes a wrong training label for the
instruction reward model (IRM) or the process reward model (PRM), and nothing downstream can
tell. So :func:`parse_ranking` and :func:`parse_step_labels` return ``None`` for any answer that
is malformed, incomplete or ambiguous, and the caller counts and drops it; they never guess.
"""
from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Sequence

__all__ = ["load_prompt", "format_variants", "parse_ranking", "parse_step_labels",
           "IRM_JUDGE_PROMPT", "PRM_JUDGE_PROMPT", "LETTERS"]

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "params" / "prompts" / "judges"
LETTERS = string.ascii_uppercase


def load_prompt(name: str) -> str:
    """The judge prompt template ``params/prompts/judges/<name>.txt`` (placeholders unfilled)."""
    return (PROMPTS_DIR / f"{name}.txt").read_text(encoding="utf-8")


IRM_JUDGE_PROMPT = load_prompt("irm_ranking")  # placeholders: {k}, {variants}
PRM_JUDGE_PROMPT = load_prompt("prm_steps")    # placeholders: {question}, {n_steps}, {solution}


def format_variants(texts: Sequence[str]) -> str:
    """'Variant A:\\n<text>' blocks separated by blank lines; the labels parse_ranking reads."""
    if len(texts) > len(LETTERS):
        raise ValueError(f"at most {len(LETTERS)} variants can be lettered, got {len(texts)}")
    return "\n\n".join(f"Variant {LETTERS[i]}:\n{t.strip()}" for i, t in enumerate(texts))


# ----------------------------------------------------------------------------- shared

JSON_LIST = re.compile(r"\[[^\[\]]*\]")


def _json_lists(text: str) -> list[list] | None:
    """Every distinct ``[...]`` in ``text`` that is a JSON list; None if they disagree."""
    found = []
    for m in JSON_LIST.finditer(text):
        try:
            value = json.loads(m.group())
        except ValueError:
            continue
        if isinstance(value, list) and value not in found:
            found.append(value)
    return None if len(found) > 1 else found


# ---------------------------------------------------------------------------- ranking

RANKING_MARK = re.compile(r"\branking\b\s*[:\-]", re.I)
WRAPPERS = re.compile(r"\b(?:variant|version|option|response|instruction)\b|[*\"'`()\[\]{}]", re.I)
SEPARATORS = re.compile(r"\s*(?:>+|,|;|\s)\s*")


def _label_index(token: str, k: int) -> int | None:
    """'B' / 'b' -> 1 for letters, '2' -> 1 for numbers; None if not one of the k labels."""
    if token.isdigit():
        i = int(token) - 1
    elif len(token) == 1 and token.upper() in LETTERS:
        i = LETTERS.index(token.upper())
    else:
        return None
    return i if 0 <= i < k else None


def _order(tokens: Sequence, k: int) -> list[int] | None:
    """Label indices best-first, or None unless every label appears exactly once, one style."""
    tokens = [str(t).strip() for t in tokens]
    if len({t.isdigit() for t in tokens}) > 1:  # "A > 2" mixes the two label styles
        return None
    order = [_label_index(t, k) for t in tokens]
    if None in order or sorted(order) != list(range(k)):
        return None
    return order


def _segment_order(segment: str, k: int) -> list[int] | None:
    """Parse 'B > A > D > C' / '2, 1, 4, 3' / '[B, A, C]'; ties ('=') and '<' are refused."""
    if re.search(r"[=<]", segment):
        return None
    body = WRAPPERS.sub(" ", segment).strip().rstrip(".").strip()
    return _order([t for t in SEPARATORS.split(body) if t], k) if body else None


def parse_ranking(text: str, ids: Sequence[str]) -> list[str] | None:
    """The ids best-first from a judge's ranking of variants labelled A, B, ... (or 1, 2, ...).

    Read in this order: the first line after the LAST 'Ranking:' (the form the prompt asks
    for); else a JSON list (``["B", "A"]`` or ``[2, 1]``); else the one line that is nothing but
    a complete ranking. Two different rankings, a tie, a repeated or missing label give None.
    """
    k = len(ids)
    marks = list(RANKING_MARK.finditer(text))
    lists = [] if marks else _json_lists(text)
    if marks:
        order = _segment_order(text[marks[-1].end():].strip().split("\n", 1)[0], k)
    elif lists is None:
        return None
    elif lists:
        order = _order(lists[0], k)
    else:
        orders = {tuple(o) for o in (_segment_order(line, k) for line in text.splitlines()) if o}
        order = list(orders.pop()) if len(orders) == 1 else None
    return [ids[i] for i in order] if order else None


# ------------------------------------------------------------------------- step labels

VERDICTS = {"correct": True, "right": True, "true": True, "yes": True, "valid": True,
            "+": True, "✓": True, "✔": True, "incorrect": False, "not correct": False,
            "wrong": False, "false": False, "no": False, "invalid": False, "-": False,
            "✗": False, "✘": False}
VERDICT = re.compile(r"(not\s+correct|incorrect|correct|right|true|yes|valid|invalid|wrong|"
                     r"false|no)\b|([+\-✓✔✗✘])(?![\d.])", re.I)
STEP_LINE = re.compile(r"^\s*[-*•]?\s*(?:\*\*)?(?:step\s*)?(\d+)\s*(?:\*\*)?\s*[:.)]\s*(?:\*\*)?"
                       r"\s*(.*)$", re.I | re.M)


TRAILING_VERDICT = re.compile(r"(?:(?:this|the)\s+step\s+is\s+(not\s+correct|incorrect|correct|wrong|right)"
                              r"|\\boxed\{(incorrect|correct)\})[.!]?\s*(?:\*\*)?\s*$", re.I)
STEP_IS = re.compile(r"^\s*[-*•]?\s*(?:\*\*)?(?:in\s+)?step\s*(\d+)\s*(?:\*\*)?\s+(?:is\s+(not\s+correct|incorrect|"
                     r"correct|wrong|right)\b|(contains|has|makes)\s+an?\s+(?:error|mistake)\b)", re.I | re.M)


CONTRAST = re.compile(r"\b(?:but|however|although|though|except|yet)\b|\b(?:in)?correct\b|\bwrong\b|\berror\b|"
                      r"\bmistake\b|\bright\b|\?", re.I)
CONFLICT = "conflict"  # a line that says two things about its step


def _verdict(rest: str) -> bool | str | None:
    """The verdict right after "Step k:" and/or the one the line ends with ("... This step is correct.", the
    ``\\boxed{correct}`` of ThinkPRM-style verifiers); :data:`CONFLICT` when they differ or the first is only
    asked ("correct? No, ..."); None when the line has neither."""
    body = rest.strip().strip("*_").strip()
    m = VERDICT.match(body)
    lead = None
    if m and not body[m.end():].lstrip().startswith("?"):
        lead = VERDICTS[re.sub(r"\s+", " ", m.group().lower())]
    elif m:
        return CONFLICT
    t = TRAILING_VERDICT.search(rest)
    trail = VERDICTS[re.sub(r"\s+", " ", (t.group(1) or t.group(2)).lower())] if t else None
    if lead is not None and trail is not None and lead != trail:
        return CONFLICT
    return lead if lead is not None else trail


def _json_labels(values: list, n_steps: int) -> list[bool] | None:
    """A JSON list of booleans or 0/1; anything else (2, 0.5, 'ok') is unreadable."""
    if len(values) != n_steps or not all(v in (0, 1) and not isinstance(v, float) for v in values):
        return None
    return [bool(v) for v in values]


def parse_step_labels(text: str, n_steps: int) -> list[bool] | None:
    """``n_steps`` verdicts (True = correct) from 'Step k: correct' / 'k: +' lines, 'Step k is correct' /
    'Step k contains an error' sentences, or a JSON list.

    Every line that opens with a step number must carry a verdict word or sign right after the
    colon, or end with one ('... This step is correct.'); a step numbered twice, missing, out of range, or with an unreadable verdict gives
    None, since a guessed label would train the PRM on noise.
    """
    lists = _json_lists(text)
    if lists is None:
        return None
    if lists:
        return _json_labels(lists[0], n_steps)
    labels: dict[int, bool] = {}
    for m in STEP_LINE.finditer(text):
        step, verdict = int(m.group(1)), _verdict(m.group(2))
        if verdict is None or verdict == CONFLICT or step in labels or not 1 <= step <= n_steps:
            return None
        labels[step] = verdict
    for m in STEP_IS.finditer(text):  # "Step 2 is correct." / "Step 3 contains an error."
        step = int(m.group(1))
        verdict = VERDICTS[re.sub(r"\s+", " ", m.group(2).lower())] if m.group(2) else False
        tail = text[m.end():].split("\n", 1)[0].split(".", 1)[0]
        if CONTRAST.search(tail) or not 1 <= step <= n_steps:  # "is correct in approach, but ...": unreadable
            return None
        if labels.get(step, verdict) != verdict:
            return None
        labels[step] = verdict  # the same verdict again ("Step 2: incorrect ... Step 2 is incorrect because") is fine
    if len(labels) != n_steps:
        return None
    return [labels[i] for i in range(1, n_steps + 1)]

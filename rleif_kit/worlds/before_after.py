"""One held-out item answered before and after training: the first thing a course shows of a training stage.

03_sft measures the untrained and the trained model on the world's held-out split (``03_sft/eval_before.jsonl``,
``eval_after.jsonl``), 05_ppo the SFT and the PPO policy (``05_ppo/eval_sft.jsonl``, ``eval_ppo.jsonl``):
the same items, greedy, checked by the world. This view picks one item from those files — the first the training
turned from not right to right, else the first right after it, else the first — and shows its text with both
answers, a program as code (``RunWords.code_language``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.tables import Note, text_table


def pick_before_after(before: Sequence[dict], after: Sequence[dict]) -> tuple[dict, dict] | None:
    """The (before, after) rows of one item both files hold: the first turned right by training, else the first
    right after it, else the first; None when they share no item."""
    by_id = {r["id"]: r for r in before}
    pairs = [(by_id[r["id"]], r) for r in after if r["id"] in by_id]
    for wanted in (lambda b, a: a["correct"] and not b["correct"], lambda b, a: a["correct"], lambda b, a: True):
        for b, a in pairs:
            if wanted(b, a):
                return b, a
    return None


def before_after_rows(item: dict, before: dict, after: dict, names: tuple[str, str], words: Any) -> list[dict]:
    """One row: the item's text, each model's answer and whether the world counted it ``words.right``."""
    def verdict(row: dict) -> str:
        return words.right if row["correct"] else f"not {words.right}"

    return [{words.task: item.get("question") or item.get("text") or item["id"],
             names[0]: before["response"], f"{names[0]}: {words.right}?": verdict(before),
             names[1]: after["response"], f"{names[1]}: {words.right}?": verdict(after)}]


def before_after_table(problems: Callable[[], Sequence[dict]], before_path: Path, after_path: Path,
                       names: tuple[str, str], words: Any, stage: str) -> Any:
    """The table of one held-out item and its two answers (:func:`before_after_rows`), or a Note saying which file
    is missing (``stage`` writes them). ``problems()`` gives the held-out items' texts (read only when needed)."""
    for path in (before_path, after_path):
        if not Path(path).exists():
            return Note(f"No answers before and after training to show: {Path(path).name} does not exist (written by "
                        f"{stage} where the world has a held-out split).")
    picked = pick_before_after(list(read_jsonl(before_path)), list(read_jsonl(after_path)))
    if picked is None:
        return Note(f"{Path(before_path).name} and {Path(after_path).name} share no item: nothing to compare.")
    items = {p["id"]: p for p in problems()}
    rows = before_after_rows(items.get(picked[0]["id"], {"id": picked[0]["id"]}), *picked, names, words)
    answers = [names[0], names[1]]
    return text_table(rows, wrap=[words.task, *answers], code=answers if words.code_language else (),
                      caption=f"One held-out {words.task}, greedy, the same for both: {names[0]} and {names[1]}")

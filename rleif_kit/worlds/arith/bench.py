"""The arithmetic world as a benchmark (name ``arith``): greedy exact-answer accuracy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.models.generation import generate
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.prompts import math_prompt


def evaluate_arith(model: Any, tokenizer: Any, problems: Sequence[dict], *, cot: bool = True,
                   max_new_tokens: int = 96, batch_size: int = 64, out_path: str | Path | None = None,
                   desc: str = "arith eval") -> dict[str, Any]:
    """Accuracy of the model's final answers on ``problems`` (arith records); per-item rows to ``out_path``."""
    prompts = [math_prompt(p["question"], cot=cot) for p in problems]
    responses = generate(model, tokenizer, prompts, max_new_tokens, batch_size=batch_size, desc=desc)
    rows = []
    for p, response in zip(problems, responses):
        answer = arith.extract_answer(response)
        rows.append({"id": p["id"], "response": response, "answer": answer, "gold": str(p["answer"]),
                     "correct": answer == str(p["answer"]),
                     "steps_ok": arith.verify_solution(p["question"], response, p["answer"]).all_ok})
    if out_path is not None:
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        with open(out_path, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    n = len(rows)
    correct = sum(r["correct"] for r in rows)
    return {"n": n, "correct": correct, "accuracy": correct / n if n else 0.0,
            "all_steps_ok": sum(r["steps_ok"] for r in rows) / n if n else 0.0, "rows": rows}

"""A world's held-out split as a benchmark: greedy answers of a model on the problems SFT and PPO never trained
on, checked by the world's own checker (the arithmetic world's: exact answer and every step right; a code world's:
the task's hidden tests in the sandbox)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core.jsonl import write_jsonl
from rleif_kit.models.generation import generate
from rleif_kit.worlds.benchmarks import benchmark


def evaluate_heldout(world: Any, model: Any, tokenizer: Any, problems: Sequence[dict], ev: Any, *,
                     out_path: str | Path | None = None, desc: str = "held-out eval") -> dict[str, Any]:
    """Accuracy of the model's final answers on ``problems`` (the world's held-out records, ``question`` and
    ``answer``), prompted as the world trains (``[eval] cot_prompt`` of ``ev``); per-item rows to ``out_path``."""
    bench = benchmark(world.heldout_benchmark)
    prompts = [world.train_prompt(p["question"], cot=ev.cot_prompt) for p in problems]
    responses = generate(model, tokenizer, prompts, ev.max_new_tokens, batch_size=ev.batch_size, desc=desc)
    if bench.runs_code:  # a code world's held-out tasks: their hidden tests in the sandbox, all at once
        checked = world.check_batch(problems, responses)
        rows = [{"id": p["id"], "response": response, "correct": bool(c.correct), "rV": c.rv}
                for p, response, c in zip(problems, responses, checked)]
    else:
        rows = [{"id": p["id"], "response": response,
                 **bench.check({"id": p["id"], "question": p["question"], "gold": str(p["answer"])}, response, ev)}
                for p, response in zip(problems, responses)]
    if out_path is not None:
        write_jsonl(Path(out_path), rows)
    n = len(rows)
    correct = sum(bool(r["correct"]) for r in rows)
    return {"n": n, "correct": correct, "accuracy": correct / n if n else 0.0,
            "all_steps_ok": sum(bool(r.get("steps_ok")) for r in rows) / n if n else 0.0, "rows": rows}

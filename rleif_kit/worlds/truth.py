"""Is a response right? The ground truth the reward-against-truth check compares the reward with.

One function for every place that has responses to instructions (the PPO rollouts, the gate's SFT samples,
the PRM's held-out samples): it judges the final answer as evaluation does, from what the instruction record
carries. The arithmetic world's records carry their ``problem`` (the answer follows from it); a record with a
gold answer (``gold``, or GSM8k's ``answer`` field with ``#### N``) is judged with the strict GSM8k/MATH
extraction. Anything else is None: no verifier, and the check then says so instead of guessing.
"""

from __future__ import annotations

from typing import Any, Mapping

from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.math.answers import check_gsm8k, check_math


def is_correct(record: Mapping[str, Any], response: str) -> bool | None:
    """True / False when the record's world can verify the response's final answer, else None."""
    problem = record.get("problem")
    if problem:
        answer = arith.extract_answer(response)
        return answer is not None and answer == str(arith.Problem.from_record(problem).answer())
    gold = record.get("gold")
    if gold is None and "####" in str(record.get("answer", "")):
        gold = record["answer"]
    if gold is None:
        return None
    if record.get("benchmark") == "math" or record.get("source") == "math":
        question = record.get("question", record.get("instruction"))
        return bool(check_math(response, str(gold), question=question if isinstance(question, str) else None)["correct"])
    return bool(check_gsm8k(response, str(gold))["correct"])

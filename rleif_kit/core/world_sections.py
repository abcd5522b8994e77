"""The sections of the offline worlds and the tiny model: ``[tiny]``, ``[arith]``, ``[tiny_code]``.

They sit apart from ``sections.py`` (the recipe's own sections) because they describe the CPU stand-ins only:
the tiny Llama the demo builds and the programmatic worlds that replace GSM8k and HumanEval on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from rleif_kit.core.fields import at_least, between, opt, positive, unit
from rleif_kit.core.sections import _Section


@dataclass(frozen=True)
class TinyConfig(_Section):
    build: bool = opt(False, "build the offline tiny Llama at [base].model_name when that directory is missing")
    vocab_size: int = opt(1000, "tokenizer vocabulary size (BPE trained on the arithmetic world)", at_least(300))
    hidden_size: int = opt(128, "hidden size", positive)
    layers: int = opt(2, "transformer layers", positive)
    heads: int = opt(4, "attention heads (must divide hidden_size)", positive)
    intermediate_size: int = opt(256, "MLP size", positive)
    corpus_problems: int = opt(3000, "arithmetic problems the tokenizer is trained on", positive)

    def cross_problems(self):
        return [] if self.heads <= 0 or self.hidden_size % self.heads == 0 else [("heads", f"a divisor of hidden_size ({self.hidden_size})")]


@dataclass(frozen=True)
class ArithConfig(_Section):
    min_steps: int = opt(1, "fewest steps of a generated problem", positive)
    max_steps: int = opt(3, "most steps of a generated problem", positive)
    max_operand: int = opt(20, "largest start quantity and add/subtract operand", at_least(2))
    heldout_size: int = opt(1000, "held-out problems kept out of every training set", positive)
    teacher_early_stop: float = opt(0.0, "share of the generated SFT solutions to `max_steps`-step problems whose "
                                         "teacher stops one step early and answers the intermediate result: a "
                                         "systematic teacher error, as GPT-written SFT data has, for the reward "
                                         "to unlearn (0 = a flawless teacher)", unit)


@dataclass(frozen=True)
class TinyCodeConfig(_Section):
    heldout_size: int = opt(300, "held-out tasks of the tiny code world, kept out of every training set", positive)
    max_ops: int = opt(2, "most arithmetic ops a task applies to its result (\"... plus 3 times b\")", between(0, 4))
    teacher_fault: float = opt(0.0, "share of the SFT solutions to tasks with a known pitfall (\"from a to b inclusive\", "
                                    "\"the last n items\") that the tiny teacher writes with its systematic fault (an "
                                    "off-by-one, a missed n = 0), for execution reward to unlearn", unit)

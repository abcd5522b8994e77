"""The exact prompt formats the published checkpoints were trained on.

Scores drop by several points when the prompt differs from the training one, so SFT and evaluation
share these functions and the strings are kept verbatim (tests pin them character by character):
- math (GSM8k, MATH, the arithmetic world): the Alpaca format, with WizardMath's chain-of-thought
  opener "Let's think step by step." after ``### Response:`` when CoT is on;
- code (HumanEval): WizardCoder's format.
"""

from __future__ import annotations

ALPACA_HEADER = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request.\n\n"
)
MATH_PROMPT_COT = ALPACA_HEADER + "### Instruction:\n{instruction}\n\n### Response: Let's think step by step."
MATH_PROMPT = ALPACA_HEADER + "### Instruction:\n{instruction}\n\n### Response:"
CODE_PROMPT = ALPACA_HEADER + "### Instruction:\nCreate a Python script for this problem:\n{prompt}\n\n### Response:"


def math_prompt(instruction: str, cot: bool = True) -> str:
    """The WizardMath / Alpaca prompt for one math instruction."""
    return (MATH_PROMPT_COT if cot else MATH_PROMPT).format(instruction=instruction)


def code_prompt(prompt: str) -> str:
    """The WizardCoder prompt for one HumanEval problem."""
    return CODE_PROMPT.format(prompt=prompt)


def sft_completion(response: str) -> str:
    """The training target that follows a prompt: one space, then the response (EOS is added by the trainer)."""
    return " " + response.strip()

"""The exact prompt formats the published checkpoints were trained on.

Scores drop by several points when the prompt differs from the training one, so SFT and evaluation
share these functions and the strings are kept verbatim (tests pin them character by character):
- math (GSM8k, MATH, the arithmetic world): the Alpaca format, with WizardMath's chain-of-thought
  opener "Let's think step by step." after ``### Response:`` when CoT is on;
- code (HumanEval, MBPP): WizardCoder's format, with its generation scripts' tab conversion: each run of
  four spaces in the prompt becomes a tab, and each tab in the output becomes four spaces again.

The code prompt has two published versions (``CODE_PROMPT_VERSIONS``; nlpxucan/WizardLM,
``WizardCoder/src/humaneval_gen.py``): ``wizardcoder-9bdbb46`` (June 2023, also d352ab0: one blank line after
the header; the script that produced the published 15B result) and ``wizardcoder-080166c`` (later, and every
``humaneval_gen_vllm.py``: two blank lines).
"""

from __future__ import annotations

ALPACA_HEADER = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request.\n\n"
)
MATH_PROMPT_COT = ALPACA_HEADER + "### Instruction:\n{instruction}\n\n### Response: Let's think step by step."
MATH_PROMPT = ALPACA_HEADER + "### Instruction:\n{instruction}\n\n### Response:"
# Alpaca's prompt_input, as train_wizardcoder.py has it: a record with an input gets its own header and section
ALPACA_PROMPT_INPUT = ("Below is an instruction that describes a task, paired with an input that provides further "
                       "context. Write a response that appropriately completes the request.\n\n"
                       "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:")
CODE_PROMPT = ALPACA_HEADER + "### Instruction:\nCreate a Python script for this problem:\n{prompt}\n\n### Response:"
CODE_PROMPT_VERSIONS = {"wizardcoder-9bdbb46": CODE_PROMPT, "wizardcoder-080166c": ALPACA_HEADER + "\n" + CODE_PROMPT[
    len(ALPACA_HEADER):]}


def math_prompt(instruction: str, cot: bool = True) -> str:
    """The WizardMath / Alpaca prompt for one math instruction."""
    return (MATH_PROMPT_COT if cot else MATH_PROMPT).format(instruction=instruction)


def wizardcoder_tabs(text: str) -> str:
    """What WizardCoder's generation scripts feed the model: every run of four spaces as a tab."""
    return text.replace("    ", "\t")


def wizardcoder_output(text: str) -> str:
    """What WizardCoder's scripts keep of the model's text: every tab as four spaces."""
    return text.replace("\t", "    ")


def code_prompt(prompt: str, version: str = "wizardcoder-9bdbb46") -> str:
    """The WizardCoder prompt for one HumanEval problem, four spaces as tabs (see ``CODE_PROMPT_VERSIONS``)."""
    if version not in CODE_PROMPT_VERSIONS:
        raise ValueError(f"unknown code prompt version {version!r}; expected one of {sorted(CODE_PROMPT_VERSIONS)}")
    return CODE_PROMPT_VERSIONS[version].format(prompt=wizardcoder_tabs(prompt))


def sft_completion(response: str) -> str:
    """The training target that follows a prompt: one space, then the response (EOS is added by the trainer)."""
    return " " + response.strip()

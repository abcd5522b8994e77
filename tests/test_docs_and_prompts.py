"""The config reference (docs/configuration.md) matches the code, and the published prompt formats are verbatim."""

from __future__ import annotations

import sys

from conftest import ROOT

from rleif_kit.worlds.prompts import code_prompt, math_prompt, sft_completion

sys.path.insert(0, str(ROOT / "tools"))
from config_table import config_table  # noqa: E402


def test_configuration_reference_table_is_current():
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert config_table() in doc, "run: python tools/config_table.py --write"


def test_readme_names_the_two_commands_and_ci_calls_make_test():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_wizardmath_cot_prompt_is_verbatim():
    assert math_prompt("What is 2+3?") == (
        "Below is an instruction that describes a task. Write a response that appropriately completes the request."
        "\n\n### Instruction:\nWhat is 2+3?\n\n### Response: Let's think step by step.")


def test_alpaca_prompt_without_cot_ends_at_the_response_header():
    assert math_prompt("Q", cot=False).endswith("### Instruction:\nQ\n\n### Response:")


def test_wizardcoder_prompt_is_verbatim():
    assert code_prompt("def f():") == (
        "Below is an instruction that describes a task. Write a response that appropriately completes the request."
        "\n\n### Instruction:\nCreate a Python script for this problem:\ndef f():\n\n### Response:")


def test_sft_completion_is_one_space_then_the_response():
    assert sft_completion("  Step 1: 1 + 1 = 2. The answer is: 2\n") == " Step 1: 1 + 1 = 2. The answer is: 2"

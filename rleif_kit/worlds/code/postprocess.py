"""WizardCoder's post-processing: how the code is cut out of the model's text, per benchmark, as its scripts do.

Why exact: a pass@1 depends on it as much as on the model (a response whose code block is followed by example
calls fails its tests if those calls are kept). Each function follows one script of nlpxucan/WizardLM:
- HumanEval (``WizardCoder/src/process_humaneval.py``): the first ```python block (up to the next ```), then
  cut at ``if __name__ == "__main__":`` and at ``# Example usage``;
- MBPP (``process_mbpp.py``): the first ```python block (up to the next line that starts with ```), then cut at
  ``if __name__ == "__main__":``, ``# Example usage`` and ``# Test examples``;
- MBPP+ (``mbppplus_process_preds.py``): carriage returns dropped, the same block, then cut at
  ``if __name__ == "__main__":``, ``# Example usage`` and the first ``assert``.
Before all of them, the generation scripts kept the text after the last ``### Response:`` and turned every tab
of the output into four spaces (``prompts.wizardcoder_output``); a ``completion`` field given by the user is code
already and is kept as it is.
"""

from __future__ import annotations

from typing import Callable

from rleif_kit.worlds.prompts import wizardcoder_output

MAIN_GUARD = 'if __name__ == "__main__":'


def _python_block(code: str, closing: str) -> str:
    if "```python" in code:
        code = code[code.index("```python"):].strip().replace("```python", "")
        if closing in code:
            code = code[:code.index(closing)].strip()
    return code


def _cut(code: str, markers: tuple[str, ...]) -> str:
    for marker in markers:
        if marker in code:
            code = code[:code.index(marker)].strip()
    return code


def _response(text: str) -> str:
    """What the generation scripts kept of the model's text: after the last "### Response:" (a model that runs on
    into a new turn), every tab as four spaces."""
    return wizardcoder_output(text.split("### Response:")[-1])


def looks_generated(text: str) -> bool:
    """Raw model text (a code block, a response header) rather than code already cut out of it."""
    return "```" in text or "### Response:" in text


def extract_code(response: str) -> str:
    """HumanEval: WizardCoder's process_humaneval.py."""
    code = _python_block(_response(response).replace("\r", ""), "```")
    return _cut(code, (MAIN_GUARD, "# Example usage"))


def extract_mbpp(response: str) -> str:
    """MBPP: WizardCoder's process_mbpp.py."""
    code = _python_block(_response(response), "\n```")
    return _cut(code, (MAIN_GUARD, "# Example usage", "# Test examples"))


def extract_mbppplus(response: str) -> str:
    """MBPP+: WizardCoder's mbppplus_process_preds.py."""
    code = _python_block(_response(response).replace("\r", ""), "\n```")
    return _cut(code, (MAIN_GUARD, "# Example usage", "assert"))


POSTPROCESS: dict[str, Callable[[str], str]] = {"humaneval": extract_code, "mbpp": extract_mbpp,
                                                "mbppplus": extract_mbppplus}

"""Library warnings and transformers' log become plain stdout lines: a notebook shows stderr as an error."""

from __future__ import annotations

import logging
import warnings

import pytest

from rleif_kit.core.library_output import PlainLines, load_report_line, plain_library_output, plain_line, show_warning

# transformers 5's report when 04 puts a new token-classification head on the SFT model (ANSI bold kept)
REPORT = ("\x1b[1mLlamaForTokenClassification LOAD REPORT\x1b[0m from: run/03_sft/model\n"
          "Key            | Status     | \n---------------+------------+-\n"
          "lm_head.weight | UNEXPECTED | \nscore.bias     | MISSING    | \nscore.weight   | MISSING    | \n\n"
          "Notes:\n- UNEXPECTED:\tcan be ignored when loading from different task/architecture.\n"
          "- MISSING:\tthose params were newly initialized because missing from the checkpoint.\n")


@pytest.fixture
def transformers_log():
    """transformers' logger, its handlers and ``warnings.showwarning`` restored after the test (setup changes them)."""
    root = logging.getLogger("transformers")
    handlers, shown = list(root.handlers), warnings.showwarning
    yield root
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    warnings.showwarning = shown


def test_a_load_report_is_one_line_of_keys_by_status():
    assert load_report_line(REPORT) == ("LlamaForTokenClassification from: run/03_sft/model: not used (UNEXPECTED): "
                                        "lm_head.weight; newly initialised (MISSING): score.bias, score.weight")
    assert plain_line("transformers", "\x1b[1mplain\x1b[0m text ") == "[transformers] plain text"


def test_a_warning_is_one_plain_stdout_line_naming_its_library(capsys):
    show_warning(FutureWarning("`gradient_checkpointing` is deprecated"), FutureWarning,
                 "/venv/lib/python3.11/site-packages/transformers/training_args.py", 1541)
    out, err = capsys.readouterr()
    assert (out, err) == ("[transformers] FutureWarning: `gradient_checkpointing` is deprecated\n", "")


def test_after_setup_transformers_logs_and_warnings_reach_stdout_not_stderr(capsys, transformers_log):
    from transformers.utils import logging as hf_logging

    plain_library_output()
    plain_library_output()  # twice: still one handler
    assert sum(isinstance(h, PlainLines) for h in transformers_log.handlers) == 1
    hf_logging.get_logger("transformers.modeling_utils").warning(REPORT)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show_warning  # catch_warnings restored the original: as setup leaves it
        warnings.warn("old name", FutureWarning)
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[0].startswith("[transformers] LlamaForTokenClassification from: run/03_sft/model")
    assert "FutureWarning: old name" in out


def test_every_notebooks_setup_installs_it(transformers_log):
    from rleif_kit.core.run_setup import quiet_harmless_noise

    quiet_harmless_noise()  # what setup() runs in every stage's kernel
    assert warnings.showwarning is show_warning and any(isinstance(h, PlainLines) for h in transformers_log.handlers)

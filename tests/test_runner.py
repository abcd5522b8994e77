"""The runner and CLI: stage selection, errors before any work, a failing stage's summary."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.models.loading import ModelNotFound
from rleif_kit.pipeline.runner import StageFailed, available_stages, run_pipeline, select_stages


def test_available_stages_are_in_pipeline_order():
    stages = available_stages()
    assert stages[:1] == ["00_setup"] and "03_sft" in stages
    assert stages == sorted(stages)


def test_select_stages_accepts_full_short_and_numeric_names():
    assert select_stages("sft") == ["03_sft"]
    assert select_stages("03_sft,00_setup") == ["00_setup", "03_sft"]  # pipeline order, not argument order
    assert select_stages("03") == ["03_sft"]
    with pytest.raises(ValueError, match="unknown stage 'ppp'"):
        select_stages("ppp")


def test_a_model_that_resolves_nowhere_fails_before_any_notebook(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ModelNotFound, match="resolves nowhere"):
        run_pipeline(str(TINY_PARAMS), "03_sft", [f'base.output_dir="{tmp_path}"', "tiny.build=false",
                                                 "base.model_name=./no-such-model"], report_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r" / "03_sft.ipynb").exists()


def _rleif(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rleif_kit.pipeline.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_cli_reports_config_errors_in_plain_lines(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[base]\nmodel_name = "x"\n[ppo]\nclip_range = -1\n[sft]\nlearning_rate = 1\n')
    out = _rleif("run", str(bad))
    assert out.returncode == 2
    assert "[ppo] clip_range = -1: expected a value > 0" in out.stderr
    assert "unknown key 'learning_rate' (did you mean 'lr'?)" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_a_failing_stage_names_the_notebook_cell_and_error(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    overrides = tiny_overrides(tmp_path / "run", 'sft.dataset="./missing.jsonl"')
    with pytest.raises(StageFailed) as err:
        run_pipeline(str(TINY_PARAMS), "03_sft", overrides, report_dir=str(tmp_path / "r"))
    message = str(err.value)
    assert message.startswith("03_sft failed in cell")
    assert "DataError" in message and "missing.jsonl" in message
    assert str(tmp_path / "r" / "03_sft.ipynb") in message

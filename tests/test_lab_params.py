"""`make lab PARAMS=params/tiny-code.toml`: the notebooks' parameters cells leave ``params_path`` empty, the
Makefile exports PARAMS to the kernels as RLEIF_PARAMS, and setup() runs that preset (papermill and ``rleif run``
still pass their own params_path, which wins)."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core import run_setup
from rleif_kit.core.run_setup import DEFAULT_PARAMS, PARAMS_ENV, params_for, setup

CODE = "params/tiny-code.toml"


def test_the_environment_chooses_when_no_path_is_given(monkeypatch):
    monkeypatch.setenv(PARAMS_ENV, CODE)
    assert params_for("") == (CODE, "$RLEIF_PARAMS")
    assert params_for(None) == (CODE, "$RLEIF_PARAMS")


def test_without_the_environment_the_tiny_cpu_preset_runs(monkeypatch):
    monkeypatch.delenv(PARAMS_ENV, raising=False)
    assert params_for("") == ("params/tiny-cpu.toml", "the default") and DEFAULT_PARAMS == "params/tiny-cpu.toml"
    monkeypatch.setenv(PARAMS_ENV, "  ")  # set but blank: as unset
    assert params_for("")[0] == "params/tiny-cpu.toml"


def test_an_explicit_path_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv(PARAMS_ENV, CODE)
    assert params_for("params/tiny-math.toml") == ("params/tiny-math.toml", "params_path")


@pytest.mark.parametrize("given, env, runs", [("", CODE, CODE), ("", None, "params/tiny-cpu.toml"),
                                               (str(TINY_PARAMS), CODE, str(TINY_PARAMS))],
                         ids=["env set", "env unset", "explicit path wins"])
def test_setup_runs_the_chosen_preset(given, env, runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_setup.run_lock, "LOCK_ON_SETUP", False)
    if env:
        monkeypatch.setenv(PARAMS_ENV, env)
    else:
        monkeypatch.delenv(PARAMS_ENV, raising=False)
    cfg, _ = setup(given, tiny_overrides(tmp_path / "run"), stage="00_setup", report_dir=str(tmp_path / "reports"),
                   workdir=str(ROOT))
    assert cfg.source == runs
    said = capsys.readouterr().out
    assert (f"params: {runs} (" in said) == (not given)  # a notebook opened by hand says which preset it runs


def test_the_notebooks_leave_the_choice_to_setup_and_make_lab_exports_params():
    import papermill as pm

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert pm.inspect_notebook(str(path))["params_path"]["default"] == '""', path.name
    rule = re.search(r"^lab:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "RLEIF_PARAMS=$(PARAMS) " in rule and "jupyter lab" in rule

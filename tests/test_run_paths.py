"""Issue 42, item 4: where a run writes. A report folder is ``reports/<run_name>`` with a run_name that stays in
reports/ (the escaping names are in test_bad_inputs.py's override cases), and a folder holding another run's
report is refused with one line, before any work, never overwritten."""

from __future__ import annotations

import json

import pytest

from conftest import TINY_PARAMS, tiny_overrides
from rleif_kit.core.config import ConfigError, load_config
from rleif_kit.pipeline import cli, runner
from rleif_kit.core.run_setup import claim_report_folder


@pytest.fixture
def no_stages(monkeypatch):
    """``rleif run`` up to its first stage, which is never reached here: a call is recorded, not run."""
    calls = []
    monkeypatch.setattr(runner, "_run_steps", lambda cfg, ctx, report_dir, n, steps: calls.append(report_dir) or [])
    return calls


def _run(capsys, tmp_path, *extra):
    overrides = tiny_overrides(tmp_path / "run", *extra)
    code = cli.main(["run", str(TINY_PARAMS), "--stages", "01", *[a for o in overrides for a in ("--set", o)]])
    return code, capsys.readouterr().err


def test_a_report_folder_of_another_run_is_refused_and_kept(tmp_path, capsys, monkeypatch, no_stages):
    monkeypatch.chdir(tmp_path)
    theirs = tmp_path / "reports" / "shared"
    theirs.mkdir(parents=True)
    (theirs / "run.json").write_text(json.dumps({"run": "shared", "output_dir": "../../elsewhere"}))
    (theirs / "index.html").write_text("<p>their report</p>")
    code, err = _run(capsys, tmp_path, 'base.run_name="shared"')
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"report folder {theirs} holds the report of the run with output_dir {tmp_path / 'elsewhere'}" in err
    assert str(tmp_path / "run") in err and not no_stages  # this run's, named too; nothing ran
    assert (theirs / "index.html").read_text() == "<p>their report</p>"
    assert json.loads((theirs / "run.json").read_text())["output_dir"] == "../../elsewhere"


def test_a_folder_with_a_page_but_no_run_json_is_not_a_report_to_overwrite(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "index.html").write_text("<p>a web page</p>")
    with pytest.raises(ConfigError, match="holds a report .* this kit's run.json does not describe"):
        claim_report_folder(folder, tmp_path / "run")
    (folder / "run.json").write_text("[1, 2]")  # not the kit's run.json either
    with pytest.raises(ConfigError, match="does not describe"):
        claim_report_folder(folder, tmp_path / "run")


def test_the_same_run_rerun_and_a_new_folder_are_free(tmp_path, capsys, monkeypatch, no_stages):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "reports" / "mine"
    mine.mkdir(parents=True)
    (mine / "run.json").write_text(json.dumps({"run": "mine", "output_dir": "../../run"}))  # as runner writes it
    (mine / "index.html").write_text("old page")
    assert _run(capsys, tmp_path, 'base.run_name="mine"')[0] == 0
    assert _run(capsys, tmp_path, 'base.run_name="fresh"')[0] == 0
    assert [str(p) for p in no_stages] == [str(mine), str(tmp_path / "reports" / "fresh")]


def test_a_params_file_name_that_is_no_folder_name_reports_as_run(tmp_path):
    (tmp_path / "..toml").write_text(TINY_PARAMS.read_text())
    cfg = load_config(tmp_path / "..toml", tiny_overrides(tmp_path / "run"))
    assert cfg.run_name == "run"  # Path("..toml").stem is ".": reports/. would be reports/ itself
    assert load_config(TINY_PARAMS).run_name == "tiny-cpu"
    (tmp_path / "my exp (2).toml").write_text(TINY_PARAMS.read_text())  # a name with blanks keeps its own folder
    assert load_config(tmp_path / "my exp (2).toml", tiny_overrides(tmp_path / "run")).run_name == "my_exp__2_"


def test_a_stage_command_does_not_write_into_another_runs_report_folder(tmp_path):
    """``rleif evolve`` / ``python -m rleif_kit.<stage>`` / a notebook go through ``setup``, which writes metrics and
    figures into the report folder: the same claim as ``rleif run``'s, before anything is written."""
    from rleif_kit.core.run_setup import setup

    theirs = tmp_path / "reports" / "shared"
    theirs.mkdir(parents=True)
    (theirs / "run.json").write_text(json.dumps({"run": "shared", "output_dir": "../../elsewhere"}))
    with pytest.raises(ConfigError, match="holds the report of the run with output_dir"):
        setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", 'base.run_name="shared"'), stage="01_evolve",
              workdir=str(tmp_path))
    assert sorted(p.name for p in theirs.iterdir()) == ["run.json"]  # no metrics.json, no manifest


# --------------------------------------------------------------------- every path under base.output_dir

@pytest.mark.parametrize("preset", ["tiny-cpu", "tiny-code", "tiny-math"])
def test_the_tiny_model_follows_output_dir(preset, tmp_path):
    """The tiny presets build their model at "{output_dir}/tiny-llama": as shipped it is where it always was, and a
    --set base.output_dir moves it (and tiny-math's data files) with the run, no model_name of its own needed."""
    from rleif_kit.models.loading import tiny_build_target

    path = TINY_PARAMS.parent / f"{preset}.toml"
    shipped = load_config(path)
    assert shipped.base.model_name == f"./rleif_output/{preset}/tiny-llama"
    cfg = load_config(path, [f'base.output_dir="{tmp_path}/run"'])
    assert cfg.base.model_name == f"{tmp_path}/run/tiny-llama"
    assert tiny_build_target(cfg) == tmp_path / "run" / "tiny-llama"
    if preset == "tiny-math":
        assert (cfg.sft.dataset, cfg.sft.gsm8k_train, cfg.evol_instruct.seeds) == (
            f"{tmp_path}/run/stepwise.jsonl", f"{tmp_path}/run/raw/gsm8k_train.jsonl", f"{tmp_path}/run/seeds.jsonl")


def test_an_explicit_model_path_is_kept_and_the_placeholder_fills_any_value(tmp_path):
    cfg = load_config(TINY_PARAMS, [f'base.output_dir="{tmp_path}"', 'base.model_name="./models/my-llama"',
                                    'dedup.eval_paths=["{output_dir}/extra.jsonl", "./eval.jsonl"]'])
    assert cfg.base.model_name == "./models/my-llama" and cfg.base.output_dir == str(tmp_path)
    assert cfg.dedup.eval_paths == [f"{tmp_path}/extra.jsonl", "./eval.jsonl"]

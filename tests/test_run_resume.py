"""Run-level resume: a complete stage with an unchanged config is skipped, a changed key makes it and
every later stage stale, ``--force`` reruns. On disk under tmp_path; the slow test runs the cheap
notebooks (00_setup, 01_evolve) of the tiny preset with papermill, no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.pipeline import resume
from rleif_kit.pipeline.cli import _parser, main
from rleif_kit.core.config import load_config
from rleif_kit.core.records import read_records
from rleif_kit.pipeline.runner import run_pipeline


def _cfg(tmp_path, *extra):
    return load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", *extra), workdir=ROOT)


def test_a_stage_depends_on_its_own_and_earlier_sections_only(tmp_path):
    before, after = _cfg(tmp_path), _cfg(tmp_path, "ppo.lr=2e-5")
    # [ppo] is first read by 05_ppo: the SFT's keys are the same, PPO's differ
    assert resume.stage_config(before, "03_sft") == resume.stage_config(after, "03_sft")
    assert resume.stage_config(after, "05_ppo")["ppo.lr"] == 2e-5
    assert "ppo.lr" not in resume.stage_config(after, "04_reward_models")
    # [evol_instruct] from 01 on; eval.limit only from 06; where artifacts go and [loop] never count
    assert "evol_instruct.rounds" in resume.stage_config(before, "01_evolve")
    assert "evol_instruct.rounds" not in resume.stage_config(before, "00_setup")
    assert "eval.limit" not in resume.stage_config(before, "05_ppo")
    assert "eval.limit" in resume.stage_config(before, "06_eval")
    assert "eval.cot_prompt" in resume.stage_config(before, "02_dedup")  # the SFT rows use the prompt
    assert "arith.teacher_early_stop" not in resume.stage_config(before, "01_evolve")  # only the SFT rows
    assert "arith.teacher_early_stop" in resume.stage_config(before, "02_dedup")
    moved = _cfg(tmp_path, f'base.output_dir="{tmp_path / "elsewhere"}"', "loop.iterations=3")
    assert resume.stage_config(moved, "06_eval") == resume.stage_config(before, "06_eval")  # the tiny model moved
    # with it ({output_dir}/tiny-llama): the same under the run's folder; as given, output_dir itself never counts
    kept = _cfg(tmp_path, f'base.output_dir="{tmp_path / "elsewhere"}"', "loop.iterations=3",
                f'base.model_name="{tmp_path / "run" / "tiny-llama"}"')
    assert resume.stage_config(kept, "06_eval", as_given=True) == resume.stage_config(before, "06_eval",
                                                                                      as_given=True)


def test_marker_round_trip_names_the_changed_keys(tmp_path):
    cfg = _cfg(tmp_path, "evol_instruct.rounds=1")
    notebook = tmp_path / "reports" / "01_evolve.ipynb"
    assert resume.check_stage(cfg, "01_evolve", notebook) == (False, "not run yet")
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    marker = resume.mark_done(cfg, "01_evolve", notebook, seconds=3.0)
    assert marker == tmp_path / "run" / "01_evolve" / ".done.json"
    assert resume.recorded_seconds(cfg.output_dir, "01_evolve") == 3.0  # a skipped stage's wall time in the report
    assert resume.recorded_seconds(cfg.output_dir, "02_dedup") is None
    assert json.loads(marker.read_text())["config"]["evol_instruct.rounds"] == 1

    done, why = resume.check_stage(cfg, "01_evolve", notebook)
    assert done and why.startswith("complete and config unchanged")
    done, why = resume.check_stage(_cfg(tmp_path, "evol_instruct.rounds=2"), "01_evolve", notebook)
    assert not done and why == "config changed: evol_instruct.rounds 1 -> 2"
    done, why = resume.check_stage(cfg, "01_evolve", tmp_path / "other-reports" / "01_evolve.ipynb")
    assert not done and why == f"the stage reported into ../reports/01_evolve.ipynb (from {tmp_path / 'run'}), not " \
                               f"{tmp_path / 'other-reports' / '01_evolve.ipynb'}"
    notebook.unlink()
    assert resume.check_stage(cfg, "01_evolve", notebook) == (False, f"no executed notebook at {notebook}")
    notebook.write_text("{}")
    resume.invalidate(cfg.output_dir, "01_evolve")
    assert resume.check_stage(cfg, "01_evolve", notebook) == (False, "no completion marker")


def test_run_takes_a_force_flag():
    assert _parser().parse_args(["run", "p.toml", "--force"]).force is True
    assert _parser().parse_args(["run", "p.toml"]).force is False


def _lines(capsys) -> list[str]:
    """The runner's decision per stage: '[i/n] STAGE skipped (unchanged): why' or '[i/n] STAGE running (why)'."""
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("[") and " ok in " not in line]


@pytest.mark.slow
def test_rleif_run_skips_complete_stages_reruns_stale_ones_and_forced_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    reports, run = tmp_path / "reports", tmp_path / "run"
    base = tiny_overrides(run, 'evol_instruct.seeds="arith:20"', "evol_instruct.rounds=1", "tiny.corpus_problems=300")

    def go(*extra, stages="00_setup,01_evolve", force=False):
        runs = run_pipeline(str(TINY_PARAMS), stages, [*base, *extra], report_dir=str(reports), force=force)
        return [r.stage for r in runs], _lines(capsys)

    ran, _ = go()
    assert ran == ["00_setup", "01_evolve"]
    assert (run / "00_setup" / ".done.json").exists() and (run / "01_evolve" / ".done.json").exists()
    first = read_records(reports / "metrics.json")
    assert (reports / "index.html").exists()

    # 1. unchanged and complete: both skipped, saying so; their recorded figures stay
    ran, lines = go()
    assert ran == []
    assert all("skipped (unchanged): complete and config unchanged" in line for line in lines) and len(lines) == 2
    assert read_records(reports / "metrics.json") == first

    # 2. a key 00_setup reads changes: 00 reruns naming it, and 01 — not selected — loses its marker
    ran, lines = go("tiny.corpus_problems=301", stages="00_setup")
    assert ran == ["00_setup"]
    assert "config changed: tiny.corpus_problems 300 -> 301" in lines[0]
    assert not (run / "01_evolve" / ".done.json").exists()  # stale until it runs again
    ran, lines = go("tiny.corpus_problems=301")
    assert ran == ["01_evolve"]
    assert "00_setup skipped" in lines[0] and "01_evolve running (no completion marker)" in lines[1]

    # 3. a key only 01 reads: 00 is skipped, 01 reruns naming the key
    ran, lines = go("tiny.corpus_problems=301", "evol_instruct.rounds=2")
    assert ran == ["01_evolve"]
    assert "config changed: evol_instruct.rounds 1 -> 2" in lines[1]
    assert read_records(reports / "metrics.json")["01_evolve"]["kept"] > first["01_evolve"]["kept"]

    # 4. a change at 00 makes the later selected stage stale in the same run
    ran, lines = go()
    assert ran == ["00_setup", "01_evolve"]
    assert "tiny.corpus_problems 301 -> 300" in lines[0] and "running (00_setup reran before it)" in lines[1]

    # 5. --force (the CLI flag) reruns what is complete
    args = ["run", str(TINY_PARAMS), "--stages", "00_setup,01_evolve", "--report-dir", str(reports), "--force"]
    assert main([*args[:2], *sum((["--set", o] for o in base), []), *args[2:]]) == 0
    out = capsys.readouterr().out
    assert "00_setup running (--force)" in out and "01_evolve running (--force)" in out
    assert "done: 2 stage(s) run" in out


def test_a_run_folder_moved_with_its_reports_keeps_its_markers(tmp_path):
    """Markers hold no absolute path: the run and its reports copied elsewhere, with the overrides naming the new
    place, resume; a marker records the notebook relative to the run folder."""
    import shutil

    cfg = _cfg(tmp_path / "a")
    notebook = tmp_path / "a" / "reports" / "02_dedup.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    marker = resume.mark_done(cfg, "02_dedup", notebook, seconds=1.0)
    text = marker.read_text()
    assert str(tmp_path) not in text and json.loads(text)["notebook"] == "../reports/02_dedup.ipynb"
    assert json.loads(text)["config"]["base.model_name"] == "<output_dir>/tiny-llama"
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    moved = _cfg(tmp_path / "b")
    done, why = resume.check_stage(moved, "02_dedup", tmp_path / "b" / "reports" / "02_dedup.ipynb")
    assert done, why
    # a path outside both anchors stays as given, so pointing it elsewhere is a change
    changed = _cfg(tmp_path / "b", 'sft.dataset="/elsewhere/sft.jsonl"')
    done, why = resume.check_stage(changed, "02_dedup", tmp_path / "b" / "reports" / "02_dedup.ipynb")
    assert not done and why == 'config changed: sft.dataset "arith:30000" -> "/elsewhere/sft.jsonl"'


def test_portable_writes_paths_under_an_anchor_relative():
    anchors = {"output_dir": Path("/runs/x"), "workdir": Path("/src/kit")}
    assert resume.portable("/runs/x/tiny-llama", anchors) == "<output_dir>/tiny-llama"
    assert resume.portable("/src/kit/data/a.jsonl", anchors) == "<workdir>/data/a.jsonl"
    assert resume.portable("/runs/x/../y/m", anchors) == "/runs/x/../y/m"  # outside once normalised: as given
    assert resume.portable(["/runs/x/a", "rel/b", 3], anchors) == ["<output_dir>/a", "rel/b", 3]
    assert resume.portable("gpt2", anchors) == "gpt2"

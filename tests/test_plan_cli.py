"""``rleif plan``: the planner's table on the command line (the arithmetic itself: test_planner.py)."""

from __future__ import annotations

from conftest import ROOT


def test_cli_prints_the_table_and_exits_1_when_a_stage_does_not_fit(capsys):
    from rleif_kit.pipeline.cli import main

    assert main(["plan", str(ROOT / "params" / "wizardmath-7b-24gb.toml"), "--card", "24"]) == 0
    out = capsys.readouterr().out
    assert "PPO" in out and "24 GB (23.6 GiB usable): SFT batch_size" in out
    assert main(["plan", str(ROOT / "params" / "wizardmath-7b.toml"), "--card", "24"]) == 1
    assert main(["plan", str(ROOT / "params" / "wizardmath-7b.toml")]) == 0  # every card, no verdict
    assert "80 GB (79.1 GiB usable)" in capsys.readouterr().out
    assert main(["plan", str(ROOT / "params" / "wizardmath-7b.toml"), "--set", 'base.model_name="x"']) == 2

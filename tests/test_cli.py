"""The ``rleif`` command's own behaviour: --version, "did you mean" for a mistyped command, and ``rleif plan``
naming the shipped preset that fits a card. In-process (``main([...])``), no network, nothing trained."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import metadata

import pytest
from conftest import ROOT

from rleif_kit.pipeline import cli
from rleif_kit.pipeline.cli import HANDLERS, main

# ------------------------------------------------------------------------------ --version

def test_version_prints_the_installed_version_and_the_commit_and_exits_0(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"rleif-kit \S+( \(commit [0-9a-f]{4,40}\))?\n", out), out
    assert out.startswith(f"rleif-kit {metadata.version('rleif-kit')}")  # `make install` installs the kit
    if (ROOT / ".git").exists() and shutil.which("git"):
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=False).stdout.strip()
        assert out.endswith(f" (commit {commit})\n")


def test_version_falls_back_to_pyproject_and_skips_the_commit_outside_git(tmp_path, monkeypatch, capsys):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "rleif-kit"\nversion = "9.8.7"\n')
    monkeypatch.setattr(metadata, "version", not_installed)
    monkeypatch.setattr(cli, "ROOT", tmp_path)  # no .git here: the version alone
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == "rleif-kit 9.8.7\n"


def test_building_the_parser_runs_no_git(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("a process was started before --version was asked for")

    monkeypatch.setattr(subprocess, "run", boom)
    assert cli._parser().parse_args(["config", "x.toml"]).params == "x.toml"


# ------------------------------------------------------------------------------ did you mean

@pytest.mark.parametrize("typed, line", [
    ("rnu", "rleif: unknown command 'rnu'; did you mean 'run'?"),  # r, u match: 2 * 2 / 6 = 0.67 >= 0.6
    ("chek-api", "rleif: unknown command 'chek-api'; did you mean 'check-api'?"),
    ("Plan", "rleif: unknown command 'Plan'; did you mean 'plan'?"),
    ("xyz", ("rleif: unknown command 'xyz'; the commands are run, evolve, data, check-api, doctor, eval, prm, "
             "rm-check, config, plan, build-tiny")),
])
def test_a_mistyped_command_gets_one_line_and_exit_2(capsys, typed, line):
    assert main([typed, "params/x.toml"]) == 2
    captured = capsys.readouterr()
    assert captured.err == line + "\n" and captured.out == ""


def test_other_usage_errors_stay_argparse_s(capsys):
    with pytest.raises(SystemExit) as e:
        main(["config"])
    assert e.value.code == 2
    assert "rleif config: error: the following arguments are required: params" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2 and "required: command" in capsys.readouterr().err


def test_the_command_list_is_the_parser_s_in_its_order():
    assert "{" + ",".join(HANDLERS) + "}" in cli._parser().format_usage()


# ------------------------------------------------------------------------------ rleif plan: the preset that fits

def test_plan_names_the_shipped_preset_that_fits_the_card(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    # wizardmath-7b's PPO update at mini_batch 8 x 768 tokens peaks at 68.18 GiB > 23.6 usable; the 24gb preset's
    # largest stage is PPO at 20.48 GiB; the tiny presets fit too, but are not the same model
    assert main(["plan", "params/wizardmath-7b.toml", "--card", "24"]) == 1
    out = capsys.readouterr().out
    assert "\n  24 GB: params/wizardmath-7b-24gb.toml (same model)\n" in out + "\n"
    assert "tiny" not in out.split("whose every stage fits:")[1]


def test_plan_says_when_no_preset_of_the_model_fits(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    # 8 GB (7.9 GiB usable): SFT alone needs 16.61 GiB in both 7B presets
    assert main(["plan", "params/wizardmath-7b.toml", "--card", "8"]) == 1
    assert capsys.readouterr().out.endswith("\n  8 GB: no shipped preset for Llama-2-7B fits\n")


def test_plan_of_a_model_with_no_preset_offers_the_others_that_fit(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    # no preset is for Llama-2-13B; of the GPU presets only the 24gb one fits (wizardmath-7b needs 68.18 GiB)
    assert main(["plan", "params/wizardmath-7b.toml", "--card", "24", "--set", 'base.model_name="Llama-2-13b-hf"']) == 1
    assert capsys.readouterr().out.endswith(
        "\n  24 GB: no shipped preset is for Llama-2-13B; these for other models fit, largest first: "
        "params/wizardmath-7b-24gb.toml (Llama-2-7B)\n")


def test_plan_that_fits_suggests_nothing(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "params/wizardmath-7b-24gb.toml", "--card", "24"]) == 0
    assert "shipped presets" not in capsys.readouterr().out


def test_plan_notes_a_preset_that_does_not_load_and_advises_from_the_others(tmp_path, monkeypatch, capsys):
    presets = tmp_path / "params"
    presets.mkdir()
    shutil.copy(ROOT / "params" / "wizardmath-7b-24gb.toml", presets / "small-card.toml")
    (presets / "broken.toml").write_text("[base\n")
    monkeypatch.setattr(cli, "PRESETS", presets)
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(ROOT / "params" / "wizardmath-7b.toml"), "--card", "24"]) == 1
    out = capsys.readouterr().out
    assert "the shipped presets (params/*.toml) whose every stage fits:\n  24 GB: params/small-card.toml (same model)\n" \
           "  (params/broken.toml not considered: not valid TOML: Expected ']'" in out


def test_plan_without_a_presets_folder_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "PRESETS", tmp_path / "params")  # a wheel install: no params/ beside the package
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(ROOT / "params" / "wizardmath-7b.toml"), "--card", "24"]) == 1
    assert capsys.readouterr().out.endswith(
        "whose every stage fits:\n  (none: no params/*.toml here; a kit installed without its checkout has none)\n")

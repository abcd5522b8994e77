"""A world's own config section: a world kept outside the kit declares one (``World.config_section`` and
``config_class``), and it is validated like the kit's sections, with help text, type and range checks and "did you
mean" — here ``[toy_world] max_terms`` of the test world (tests/toy_world.py, on the path as tests/ is)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from conftest import ROOT, TINY_PARAMS
from rleif_kit.core.config import KIT_WORLDS, ConfigError, config_changes, load_config, to_toml, world_section
from rleif_kit.core.paths import RunPaths

TOY = ['base.world="toy_world"']


def errors_of(*overrides: str, path=TINY_PARAMS) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, list(overrides))
    return info.value.errors


def test_the_world_brings_its_section_with_its_defaults():
    import toy_world

    assert world_section("toy_world") == ("toy_world", toy_world.ToyOptions)
    cfg = load_config(TINY_PARAMS, TOY)
    assert cfg.world_section == "toy_world" and cfg.section("toy_world").max_terms == 4  # the world's default
    assert cfg.section("toy_world") is cfg.world_options and cfg.section("ppo") is cfg.ppo
    assert load_config(TINY_PARAMS, [*TOY, "toy_world.max_terms=3"]).section("toy_world").max_terms == 3


def test_a_kit_world_brings_none_and_asking_for_another_section_says_which_exist():
    cfg = load_config(TINY_PARAMS)
    assert cfg.world_section == "" and cfg.world_options is None and world_section("arith") is None
    with pytest.raises(KeyError, match=r"no config section \[toy_world\] in this run"):
        cfg.section("toy_world")


def test_the_kit_worlds_core_skips_are_the_registry():
    from rleif_kit.worlds import WORLDS

    assert set(KIT_WORLDS) == set(WORLDS)  # core never imports these by name (they are not module paths)


def test_an_out_of_range_value_is_one_line_naming_the_key():
    assert errors_of(*TOY, "toy_world.max_terms=12") == [
        "--set toy_world.max_terms=12: [toy_world] max_terms = 12: expected a value from 2 to 9"]
    assert errors_of(*TOY, 'toy_world.max_terms="two"') == [
        "--set toy_world.max_terms=\"two\": [toy_world] max_terms = 'two': must be an integer from 2 to 9"]


def test_an_unknown_key_or_a_misspelt_section_gets_did_you_mean(tmp_path):
    assert errors_of(*TOY, "toy_world.max_term=3") == [
        "--set toy_world.max_term=3: [toy_world] unknown key 'max_term' (did you mean 'max_terms'?)"]
    path = tmp_path / "run.toml"
    path.write_text('[base]\nmodel_name = "m"\nworld = "toy_world"\n\n[toy_wrld]\nmax_terms = 3\n')
    assert errors_of(path=path) == [f"{path}: unknown section [toy_wrld] (did you mean [toy_world]?)"]


def test_the_section_of_a_world_the_run_does_not_use_is_refused(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[base]\nmodel_name = "m"\nworld = "toy_world"\n\n[toy_world]\nmax_terms = 3\n')
    assert load_config(path).section("toy_world").max_terms == 3
    (error,) = errors_of('base.world="arith"', path=path)  # the preset moved to another world, its section left
    assert error.startswith(f"{path}: unknown section [toy_world] (known sections: base, tiny, arith, ")
    assert error.endswith("; a world's own section only where [base] world names that world: 'arith' brings none)")


def test_the_resolved_config_lists_the_worlds_keys_and_reads_back(tmp_path):
    cfg = load_config(TINY_PARAMS, [*TOY, "toy_world.max_terms=3"])
    text = to_toml(cfg)
    assert "\n[toy_world]\nmax_terms = 3\n" in text  # rleif config prints it; config.resolved.toml keeps it
    (tmp_path / "resolved.toml").write_text(text)
    again = load_config(tmp_path / "resolved.toml")
    assert again.to_dict() == cfg.to_dict() and again.section("toy_world").max_terms == 3
    moved = {c["key"]: c for c in config_changes(cfg)}["toy_world.max_terms"]
    assert (moved["value"], moved["default"], moved["override"]) == (3, 4, True)  # the world's default, not the kit's


def test_a_reason_may_name_a_world_key(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[base]\nmodel_name = "m"\nworld = "toy_world"\n\n[toy_world]\nmax_terms = 2\n\n[reasons]\n'
                    '"toy_world.max_terms" = "pairs only, for a quick demo"\n')
    cfg = load_config(path)
    assert {c["key"]: c["reason"] for c in config_changes(cfg)}["toy_world.max_terms"] == "pairs only, for a quick demo"


def test_rleif_config_and_the_docs_tool_list_the_worlds_keys_with_their_help(capsys):
    from rleif_kit.pipeline.cli import main

    fan_out = "reward_model.irm_samples_per_instruction=2"  # the toy world has two operators
    assert main(["config", str(TINY_PARAMS), "--set", TOY[0], "--set", fan_out]) == 0
    assert "\n[toy_world]\nmax_terms = 4\n" in capsys.readouterr().out
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin"}
    table = subprocess.run([sys.executable, "tools/config_table.py", "--world", "toy_world"], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=120).stdout
    assert "| `[toy_world]` | `max_terms` | `4` | most numbers a sum adds (generated problems and 'more_steps' " \
           "evolutions) |" in table


def test_the_world_reads_its_setting(tmp_path):
    """max_terms = 2: every generated problem, seed and 'more_steps' evolution adds two numbers (4 by default)."""
    from toy_world import WORLD

    paths = RunPaths(output_dir=tmp_path / "run")
    two = load_config(TINY_PARAMS, [*TOY, "toy_world.max_terms=2", f'base.output_dir="{tmp_path / "run"}"'])
    seeds = WORLD.seeds(two, paths, 30)
    assert {len(s["problem"]["numbers"]) for s in seeds} == {2}
    grown = WORLD.evolve(two, seeds[0], WORLD.operators[0], random.Random(0))  # more_steps
    assert len(grown["extra"]["problem"]["numbers"]) == 2
    four = load_config(TINY_PARAMS, [*TOY, f'base.output_dir="{tmp_path / "run4"}"'])
    sizes = {len(s["problem"]["numbers"]) for s in WORLD.seeds(four, RunPaths(output_dir=tmp_path / "run4"), 30)}
    assert sizes == {2, 3, 4}


def test_a_world_whose_section_is_no_section_class_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "odd_world.py").write_text("class W:\n    config_section = 'odd'\n    config_class = dict\n\n"
                                           "WORLD = W()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (error,) = errors_of('base.world="odd_world"')
    assert error == (f"{TINY_PARAMS}: [base] world = 'odd_world': its config_class must be a dataclass deriving "
                     "rleif_kit.core.config.Section (got <class 'dict'>)")

"""Issue 30's smaller lines, each answered with one clear line: an offline hub load (a tokenizer's and a model's),
check-api's missing key, the
prompts of a run config kept outside the repo, a preset named bare, a bad --set, a word for a count, help on every
argument, garbled evolved text, and the notebooks' formulas without MathJax.

In-memory or loopback; the hub is a closed local port, never the network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from rleif_kit.core.config import KIT_ROOT, ConfigError, _type_error, load_config
from rleif_kit.core.run_setup import check_prompts_root
from rleif_kit.core.stage_args import stage_parser
from rleif_kit.core.stages import EVOLVE
from rleif_kit.evolve.elimination import answer_elimination_reason, elimination_reason
from rleif_kit.pipeline import cli
from loopback import unused_port

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "params" / "tiny-cpu.toml"
PARENT = "Tom has 3 apples and buys 5 more. How many apples does he have?"
CHILD = "Tom has 3 apples and buys 5 more pears. How many fruits does he have now?"


def _rleif(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- an offline hub load: one line, at once

OFFLINE_SCRIPT = """
import json, os, sys, time
from transformers import AutoTokenizer  # imported before the clocks start: only the loads are timed
from rleif_kit.models.loading import ModelNotFound, load_tokenizer
out = {}
for case in ("no network", "HF_HUB_OFFLINE"):
    if case == "HF_HUB_OFFLINE":
        os.environ["HF_HUB_OFFLINE"] = "1"
    start = time.perf_counter()
    try:
        load_tokenizer("someorg/not-cached")
        out[case] = ["loaded", time.perf_counter() - start]
    except ModelNotFound as e:
        out[case] = [str(e), time.perf_counter() - start]
start = time.perf_counter()
tok = load_tokenizer("someorg/tiny")  # in the cache: loads from it, hub or no hub
out["cached"] = [type(tok).__name__, time.perf_counter() - start]
print(json.dumps(out))
"""


def test_an_offline_hub_load_is_one_line_at_once(small_model_dir, tmp_path):
    """Without a network the library retries each file for 23 s (1 + 2 + 4 + 8 + 8 s) and prints every retry; the
    kit asks the hub once, without retries, then loads from the cache alone."""
    snapshot = tmp_path / "hf" / "hub" / "models--someorg--tiny" / "snapshots" / "abc123"
    shutil.copytree(small_model_dir, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc123")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=f"http://127.0.0.1:{unused_port()}")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", OFFLINE_SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    took = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for case, why in (("no network", "the hub does not answer"), ("HF_HUB_OFFLINE", "HF_HUB_OFFLINE is set")):
        line, seconds = out[case]
        assert line.startswith("'someorg/not-cached' is not a local directory, " + why), line
        assert "hf download" in line and "\n" not in line
        assert seconds < 10, (case, seconds)  # under 1 s idle; it was 48 s for a tokenizer (two files, 23 s each)
    assert out["cached"][0] != "loaded" and out["cached"][1] < 10
    assert "Retrying" not in proc.stderr and "thrown while requesting" not in proc.stderr, proc.stderr
    assert took < 60


MODEL_LOADS_SCRIPT = """
import json, os, sys, time
import peft, torch, transformers  # imported before the clocks start: only the loads are timed
transformers.AutoModelForCausalLM, transformers.AutoModelForSequenceClassification
from rleif_kit.models.loading import ModelNotFound, load_causal_lm
from rleif_kit.rewards.reward import load_rm
out = {}
start = time.perf_counter()
model = load_causal_lm("someorg/tiny")  # in the cache: loads from it, hub or no hub
out["cached"] = [type(model).__name__, time.perf_counter() - start]
for case in ("no network", "HF_HUB_OFFLINE"):
    if case == "HF_HUB_OFFLINE":
        os.environ["HF_HUB_OFFLINE"] = "1"
    for name, load in (("reward model's base", lambda: load_rm(sys.argv[1])),  # rewards' scoring
                       ("causal LM", lambda: load_causal_lm("someorg/not-cached"))):  # SFT's, the hf backend's
        start = time.perf_counter()
        try:
            load()
            got = "loaded"
        except ModelNotFound as e:
            got = str(e)
        out[f"{case}: {name}"] = [got, time.perf_counter() - start]
print(json.dumps(out))
"""


def test_the_model_loads_that_may_name_a_hub_id_are_one_line_at_once_offline(small_model_dir, tmp_path):
    """The model loads beside the tokenizer's: a reward model's adapter base (here a hub id the cache lacks), the
    causal LM that SFT measures before training and the hf evolve backend loads. They called ``from_pretrained``
    directly, so without a network each printed 23 s of retries before the library's own error."""
    snapshot = tmp_path / "hf" / "hub" / "models--someorg--tiny" / "snapshots" / "abc123"
    shutil.copytree(small_model_dir, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc123")
    rm_dir = tmp_path / "irm"
    shutil.copytree(small_model_dir, rm_dir)  # its tokenizer loads from here; the base does not
    (rm_dir / "rm_info.json").write_text(json.dumps({"head": "sequence", "finetune": "lora",
                                                     "base_model": "someorg/not-cached"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=f"http://127.0.0.1:{unused_port()}")
    proc = subprocess.run([sys.executable, "-c", MODEL_LOADS_SCRIPT, str(rm_dir)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out.pop("cached")[0] == "LlamaForCausalLM" and len(out) == 4
    for case, (line, seconds) in out.items():
        why = "HF_HUB_OFFLINE is set" if case.startswith("HF_HUB_OFFLINE") else "the hub does not answer"
        assert line.startswith("'someorg/not-cached' is not a local directory, " + why), (case, line)
        assert "hf download" in line and "\n" not in line
        assert seconds < 5, (case, seconds)  # under 1 s idle; 23 s of retries before
    assert "Retrying" not in proc.stderr and "thrown while requesting" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------- check-api: the whole missing-key message

def test_check_api_shows_the_whole_missing_key_message(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RLEIF_SMALL_LINES_KEY", raising=False)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"api": {"base_url": "http://127.0.0.1:9/v1",
                                            "api_key_env": "RLEIF_SMALL_LINES_KEY"},
                                    "models": {"evolve": "m"}}))
    code, out, _ = _rleif(capsys, "check-api", "--settings", settings)
    assert code == 1
    (row,) = out.splitlines()[1:]
    assert row.endswith(f"environment variable RLEIF_SMALL_LINES_KEY is not set ({settings}: api.api_key_env); "
                        "export it in the shell that runs rleif")  # was cut at 60 characters, before the fix


# ---------------------------------------------------------------- a run config kept outside the repository

def test_a_config_outside_the_repo_finds_the_kits_prompts(tmp_path):
    cfg = load_config(TINY, ["evol_instruct.backend=openai"], workdir=tmp_path)  # tmp_path has no params/prompts
    assert cfg.resolve(cfg.evol_instruct.prompts_dir) == KIT_ROOT / "params" / "prompts"
    check_prompts_root(cfg, EVOLVE)  # found: no error
    (tmp_path / "params" / "prompts").mkdir(parents=True)  # a copy beside the run wins, as any relative path
    assert cfg.resolve(cfg.evol_instruct.prompts_dir) == tmp_path / "params" / "prompts"


def test_a_prompts_dir_that_is_not_there_names_its_key(tmp_path):
    cfg = load_config(TINY, ["evol_instruct.backend=openai", "evol_instruct.prompts_dir=./my-prompts"],
                      workdir=tmp_path)
    with pytest.raises(ConfigError) as info:
        check_prompts_root(cfg, EVOLVE)
    assert str(info.value) == (f"--set evol_instruct.prompts_dir=./my-prompts: [evol_instruct] prompts_dir = "
                               f"'./my-prompts': no directory {tmp_path / 'my-prompts'} (a relative path resolves "
                               f"against {tmp_path}, where rleif runs; the kit's templates are in "
                               f"{KIT_ROOT / 'params' / 'prompts'})")
    world = load_config(TINY, ["evol_instruct.prompts_dir=./my-prompts"], workdir=tmp_path)
    check_prompts_root(world, EVOLVE)  # the world's own evolver reads no template


# ---------------------------------------------------------------- a preset named bare

@pytest.mark.parametrize("name", ["tiny-cpu", "tiny-cpu.toml", "tiny_cpu"])
def test_a_bare_preset_name_is_told_its_path(name, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, _, err = _rleif(capsys, "config", name)
    assert code == 2
    assert err == (f"rleif config: error: {name}: config file not found (looked in {ROOT / name}); "
                   f"did you mean params/tiny-cpu.toml?\n")


def test_run_names_the_preset_too_and_elsewhere_its_full_path(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    code, _, err = _rleif(capsys, "run", "tiny-cpu")
    assert code == 2 and err.rstrip().endswith("did you mean params/tiny-cpu.toml?")
    monkeypatch.chdir(tmp_path)
    _, _, err = _rleif(capsys, "config", "tiny-cpu")
    assert err.rstrip().endswith(f"did you mean {KIT_ROOT / 'params' / 'tiny-cpu.toml'}?")
    _, _, err = _rleif(capsys, "config", "nothing-like-a-preset")
    assert "did you mean" not in err


# ---------------------------------------------------------------- a bad --set is blamed on the --set

def test_a_bad_set_names_the_set_not_the_file(capsys):
    code, _, err = _rleif(capsys, "config", TINY, "--set", "sft.learnin_rate=3", "--set", "nosuch.x=1",
                          "--set", "ppo.lr=-1")
    assert code == 2
    lines = err.splitlines()[1:]
    assert sorted(lines) == sorted([
        "--set sft.learnin_rate=3: [sft] unknown key 'learnin_rate' (did you mean 'lr'?)",
        "--set nosuch.x=1: unknown section [nosuch] (known sections: base, tiny, arith, tiny_code, sft, "
        "evol_instruct, dedup, reward_model, ppo, eval, diagnostics, loop; a world's own section only where [base] "
        "world names that world: 'arith' brings none)",
        "--set ppo.lr=-1: [ppo] lr = -1: expected a value > 0"])
    assert not any(line.startswith(str(TINY)) for line in lines)


def test_the_files_own_mistakes_still_name_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[base]\nmodel_name = "m"\n[sft]\nlearning_rat = 1.0\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, ["ppo.lr=2"])
    assert info.value.errors == [f"{path}: [sft] unknown key 'learning_rat' (did you mean 'lr'?)"]


# ---------------------------------------------------------------- a word for a count

def test_a_word_for_a_count_must_be_an_integer_in_its_range(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[base]\nmodel_name = "m"\nseed = "x"\n[evol_instruct]\nrounds = "two"\n[sft]\nmax_steps = 1.5\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.errors == [f"{path}: [base] seed = 'x': must be an integer >= 0",
                                 f"{path}: [sft] max_steps = 1.5: must be an integer (-1 = use epochs, or > 0)",
                                 f"{path}: [evol_instruct] rounds = 'two': must be an integer from 1 to 1,000"]
    assert _type_error("two", int) == "must be an integer"  # no range configured: none made up (was ±9e15)
    assert _type_error(7, int) is None


# ---------------------------------------------------------------- help on every argument

def _actions(parser: argparse.ArgumentParser, name: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from _actions(sub, f"{name} {command}")
        elif not isinstance(action, argparse._HelpAction):
            yield name, action


def test_every_argument_of_every_command_has_help():
    parsers = [(cli._parser(), "rleif")] + [(stage_parser(s, "d", settings=True), s) for s in ("sft", "evolve")]
    missing = [f"{name} {action.option_strings or action.dest}" for parser, name in parsers
               for name, action in _actions(parser, name) if not action.help or action.help == argparse.SUPPRESS]
    assert missing == []
    commands = {name for parser, _ in parsers[:1] for name, _ in _actions(parser, "rleif")}
    assert {name.split(" ")[1] for name in commands if " " in name} == set(cli.HANDLERS)  # it reached every command
    assert {"rleif prm score", "rleif prm eval"} <= commands  # and every action of a command that has actions


# ---------------------------------------------------------------- garbled evolved text

@pytest.mark.parametrize("child", [CHILD.replace("pears", "pe\ufffdrs"), CHILD.replace(" and", "\x07 and"),
                                   CHILD + "\x00", "\ufffd\ufffd\ufffd"])
def test_garbled_evolved_text_is_eliminated_with_its_reason(child):
    assert elimination_reason(PARENT, child) == "garbled"


def test_tabs_and_newlines_are_text_and_garbled_answers_go_too():
    assert elimination_reason(PARENT, CHILD.replace(" How", "\n\tHow").replace(".", ".\r")) is None
    assert elimination_reason(PARENT, CHILD) is None
    assert answer_elimination_reason("Step 1: 3 + 5 = 8. The answer is: \ufffd8") == "answer_garbled"
    assert answer_elimination_reason("Step 1: 3 + 5 = 8. The answer is: 8") is None


# ---------------------------------------------------------------- the notebooks' formulas without MathJax

@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_notebook_text_needs_no_mathjax(path):
    """Rendered offline (nbconvert, an editor's preview) $$…$$ stays raw: the formulas are plain text."""
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    assert "$" not in text and "\\frac" not in text and "\\mathcal" not in text

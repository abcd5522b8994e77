"""Every bad input a clear line (issue 17): the file, line or key and what was expected; no traceback, no hang,
no silent drop, existing data untouched. Cases by class: TOML and overrides, settings, seed files, SFT / PRM /
GSM8k / MATH data files, samples files, and the kit's own checkpoints and caches (edited or damaged by hand).
Each case's input is written fresh; the command runs in-process (``rleif ...`` through ``cli.main``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.pipeline.cli import main

GOOD_TOML = TINY_PARAMS.read_text()
MINIMAL = '[base]\nmodel_name = "./model"\n'


def _with(section: str, line: str) -> bytes:
    """A minimal valid config plus one ``line`` in ``[section]``."""
    return (MINIMAL + (f"[{section}]\n" if section != "base" else "") + line + "\n").encode()


def _rleif(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.err


def _one_line_error(code: int, err: str, expected: str, command: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines[0].startswith(f"rleif {command}: error"), err
    assert expected in err, err


# ---------------------------------------------------------------- TOML files and overrides (rleif config)

TOML_CASES = {
    "empty file": (b"", "missing required key 'model_name'"),
    "binary file": (bytes(range(256)), "not a text file (invalid UTF-8"),
    "latin-1 text": ("[base]\nmodel_name = 'caf\xe9'\n".encode("latin-1"), "not a text file"),
    "not TOML": (b"this is = = not toml", "not valid TOML"),
    "JSON instead of TOML": (b'{"base": {"model_name": "x"}}', "not valid TOML"),
    "unknown section": (GOOD_TOML.encode() + b"\n[nope]\nx = 1\n", "[nope]"),
    "unknown key with a near miss": (_with("sft", "learning_rate = 1e-3"),
                                     "did you mean 'lr'?"),
    "string for a number": (_with("ppo", "kl_coef = 'high'"),
                            "kl_coef = 'high': expected a finite number"),
    "inf temperature": (_with("evol_instruct", "temperature = inf"),
                        "temperature = inf: expected a finite number"),
    "nan learning rate": (_with("ppo", "lr = nan"), "lr = nan"),
    "a huge integer": (_with("sft", "batch_size = 100000000000000000"),
                       "must be an integer of at most 9,007,199,254,740,992"),
    "a float for an integer": (_with("sft", "batch_size = 4.5"),
                               "batch_size = 4.5: must be an integer > 0"),
    "a word for a count": (_with("evol_instruct", "rounds = 'two'"),
                           "rounds = 'two': must be an integer from 1 to 1,000"),
    "a list for a string": (_with("base", "run_name = ['a']"),
                            "run_name = ['a']: expected a string"),
    "rounds past any run": (_with("evol_instruct", "rounds = 5000"),
                            "rounds = 5000: expected a value from 1 to 1,000"),
    "max_new_tokens past any model": (_with("eval", "max_new_tokens = 50000000"),
                                      "max_new_tokens = 50000000: expected a value from 1 to 1,000,000"),
    "a key twice": (_with("ppo", "lr = 1e-5\nlr = 2e-5"), "not valid TOML: Cannot overwrite a value"),
    "an array nested 50,000 deep": (MINIMAL.encode() + b"[sft]\nx = " + b"[" * 50_000 + b"]" * 50_000 + b"\n",
                                    "bad.toml: TOML nested deeper than 64 levels"),
    "a run_name that climbs out of reports/": (_with("base", "run_name = '../../x'"), ("run_name = '../../x': "
                                               "expected a plain folder name for reports/<run_name>")),
}


@pytest.mark.parametrize("name", sorted(TOML_CASES))
def test_a_bad_toml_file_is_one_clear_line(name, tmp_path, capsys):
    content, expected = TOML_CASES[name]
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    code, err = _rleif(capsys, "config", path)
    _one_line_error(code, err, expected, "config")
    assert path.read_bytes() == content  # untouched


OVERRIDE_CASES = {
    "no equals sign": ("ppo.lr", "expected section.key=value"),
    "no section": ("lr=1e-5", "expected section.key=value"),
    "unknown section": ("nosuch.lr=1", "nosuch"),
    "unknown key": ("ppo.learning_rate=1e-5", "learning_rate"),
    "inf": ("ppo.lr=inf", "expected a finite number"),
    "negative count": ("ppo.total_steps=-5", "total_steps = -5"),
    "a huge count": ("evol_instruct.rounds=10000000000000", "rounds = 10000000000000: expected a value from 1 to 1,000"),
    "an integer past 2**53": ("ppo.total_steps=100000000000000000000", "must be an integer of at most"),
    "a boolean for a number": ("ppo.lr=true", "lr = True: expected a finite number"),
    "a bad reward formula": ("ppo.reward_formula=__import__('os')", "reward_formula"),
    "a reward formula of 5,000 terms": ("ppo.reward_formula=" + "+".join(["rA"] * 5000), "reward_formula"),
    **{f"a run_name {what}": (f"base.run_name={json.dumps(name)}", "expected a plain folder name for reports/")
       for what, name in [("that climbs out", "../../x"), ("that is absolute", "/tmp/elsewhere"),
                          ("with a separator", "a/b"), ("of '..'", ".."), ("of '.'", "."), ("with a NUL", "a\0b"),
                          ("of blanks", "  "), ("of a hidden folder", ".x"), ("with a backslash", "a\\b")]},
}


@pytest.mark.parametrize("name", sorted(OVERRIDE_CASES))
def test_a_bad_override_is_one_clear_line(name, capsys):
    override, expected = OVERRIDE_CASES[name]
    code, err = _rleif(capsys, "config", TINY_PARAMS, "--set", override)
    _one_line_error(code, err, expected, "config")


def test_an_output_dir_where_a_file_stands_is_one_clear_line(tmp_path, capsys):
    afile = tmp_path / "taken"
    afile.write_text("mine")
    for given, expected in [(afile, "is a file, expected a directory"),
                            (afile / "run", f"has a file in its path ({afile})")]:
        code, err = _rleif(capsys, "config", TINY_PARAMS, "--set", f"base.output_dir={json.dumps(str(given))}")
        _one_line_error(code, err, f"[base] output_dir = '{given}': {expected}", "config")
    assert afile.read_text() == "mine"


def test_a_params_path_that_is_a_directory_or_missing(tmp_path, capsys):
    _one_line_error(*_rleif(capsys, "config", tmp_path), "is a directory, not a TOML config file", "config")
    _one_line_error(*_rleif(capsys, "config", tmp_path / "none.toml"), "config file not found", "config")


# ---------------------------------------------------------------- seed files (rleif evolve --dry-run)

SEED_CASES = {
    "empty file": (b"", "holds no seeds"),
    "only blank lines": (b"\n\n  \n", "holds no seeds"),
    "garbage last line": (b'{"instruction": "a"}\n{"instruction": "b"}\n{"instr', ":3: invalid JSON"),
    "invalid UTF-8 last line": (b'{"instruction": "a"}\n\xff\xfe\xfa\n', ":2: not UTF-8 text"),
    "binary file": (bytes(range(256)) * 4, "a binary file, not JSONL text"),
    "a JSON array instead of JSONL": (b'[{"instruction": "a"}]', "a JSON array is not JSONL"),
    "a line that is a string": (b'{"instruction": "a"}\n"just text"\n', ":2: expected a JSON object, got str"),
    "no instruction field": (b'{"instruction": "a"}\n{"prompt": "b"}\n', ":2: seed has no 'instruction'"),
    "an empty instruction": (b'{"instruction": "   "}\n', ":1: seed has no 'instruction'"),
    "a number for the instruction": (b'{"instruction": 42}\n', ":1: seed has no 'instruction'"),
    "duplicate ids": (b'{"id": "x", "instruction": "a"}\n{"id": "x", "instruction": "b"}\n',
                      ":2: seed id 'x' already used at line 1"),
    "an id that is a list": (b'{"id": [1], "instruction": "a"}\n', ":1: 'id' must be a string or an integer"),
    "a line of 70 MiB": (b'{"instruction": "' + b"a" * (70 << 20) + b'"}\n', "a line longer than 64 MiB"),
    "a lone surrogate": (b'{"instruction": "a"}\n{"instruction": "ab\\ud800c"}\n',
                         ":2: field 'instruction' (character 3): text that cannot be sent"),
    "a line nested 50,000 deep": (b'{"instruction": "a", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n",
                                  ":1: JSON nested deeper than 64 levels"),
}


def _evolve_dry(capsys, tmp_path, seeds: Path, *extra) -> tuple[int, str]:
    overrides = tiny_overrides(tmp_path / "run", f'evol_instruct.seeds="{seeds}"', 'evol_instruct.backend="openai"',
                               *extra)
    return _rleif(capsys, "evolve", TINY_PARAMS, *[a for o in overrides for a in ("--set", o)], "--dry-run")


@pytest.mark.parametrize("name", sorted(SEED_CASES))
def test_a_bad_seed_file_is_one_clear_line(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    content, expected = SEED_CASES[name]
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_bytes(content)
    code, err = _evolve_dry(capsys, tmp_path, seeds)
    _one_line_error(code, err, expected, "evolve")
    assert seeds.read_bytes() == content


def test_a_seeds_path_that_is_a_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    _one_line_error(*_evolve_dry(capsys, tmp_path, tmp_path), "is a directory, not a JSONL file", "evolve")


def test_rounds_past_any_run_stop_the_dry_run_at_once(tmp_path, capsys, monkeypatch):
    """Issue 17: ``rounds = 1e13`` with --dry-run hung (it counted every request)."""
    monkeypatch.chdir(ROOT)
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"instruction": "a"}\n')
    _one_line_error(*_evolve_dry(capsys, tmp_path, seeds, "evol_instruct.rounds=10000000000000"),
                    "expected a value from 1 to 1,000", "evolve")


# ---------------------------------------------------------------- settings files (rleif evolve --settings)

SETTINGS_CASES = {
    "empty file": ("", "settings"),
    "not JSON": ("{models: evolve}", "settings"),
    "a JSON list": ("[1, 2]", "settings"),
    "no models": (json.dumps({"api": {"base_url": "http://127.0.0.1:9/v1"}}), "models"),
    "a key in the file": (json.dumps({"api": {"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-secret"},
                                      "models": {"evolve": "m"}}), "api_key"),
    "a negative timeout": (json.dumps({"api": {"base_url": "http://127.0.0.1:9/v1", "timeout": -1},
                                       "models": {"evolve": "m"}}), "timeout"),
    "a base_url without a scheme": (json.dumps({"api": {"base_url": "localhost:8000"}, "models": {"evolve": "m"}}),
                                    "base_url"),
    "JSON nested 50,000 deep": ("[" * 50_000 + "]" * 50_000, "settings.json: JSON nested deeper than 64 levels"),
    "a lone surrogate in a model name": ('{"api": {"base_url": "http://127.0.0.1:9/v1"}, "models": {"evolve": '
                                         '"m\\udc80"}}', "field 'models.evolve' (character 2): text that cannot"),
}


@pytest.mark.parametrize("name", sorted(SETTINGS_CASES))
def test_a_bad_settings_file_is_one_clear_line(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    content, expected = SETTINGS_CASES[name]
    settings = tmp_path / "settings.json"
    settings.write_text(content)
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"instruction": "a"}\n')
    overrides = tiny_overrides(tmp_path / "run", f'evol_instruct.seeds="{seeds}"', 'evol_instruct.backend="openai"')
    code, err = _rleif(capsys, "evolve", TINY_PARAMS, "--settings", settings,
                       *[a for o in overrides for a in ("--set", o)], "--dry-run")
    assert code == 2 and "Traceback" not in err and expected in err, err
    assert "sk-secret" not in err and settings.read_text() == content


# ---------------------------------------------------------------- data files read by the stages

def _data_cases():
    from rleif_kit.rewards.prm import load_prm800k_style
    from rleif_kit.worlds.data import load_instructions
    from rleif_kit.worlds.math.data import load_gsm8k, load_math

    sft = lambda p: load_instructions(p, "[sft] dataset")  # noqa: E731
    return {
        "sft: empty": (sft, b"", "holds no records"),
        "sft: torn last line": (sft, b'{"instruction": "a", "response": "b"}\n{"instruction": "a", "resp', ":2: "),
        "sft: no response": (sft, b'{"instruction": "a"}\n', ":1: needs string fields 'instruction' and 'response'"),
        "sft: duplicate ids": (sft, b'{"id": 1, "instruction": "a", "response": "b"}\n'
                                    b'{"id": 1, "instruction": "c", "response": "d"}\n', "id '1' already used"),
        "sft: invalid UTF-8": (sft, b'{"instruction": "\xff", "response": "b"}\n', ":1: not UTF-8 text"),
        "prm data: steps and labels differ": (load_prm800k_style, b'{"question": "q", "steps": ["a", "b"], '
                                                                  b'"labels": [1]}\n', "2 steps but 1 labels"),
        "prm data: steps not a list": (load_prm800k_style, b'{"question": "q", "steps": "a", "labels": [1]}\n',
                                       "'steps' a list of strings"),
        "prm data: torn last line": (load_prm800k_style, b'{"question": "q", "st', ":1: invalid JSON"),
        "gsm8k: no #### line": (load_gsm8k, b'{"question": "q", "answer": "42"}\n', "no '#### <answer>' line"),
        "gsm8k: garbage last line": (load_gsm8k, b'{"question": "q", "answer": "#### 4"}\nxx\n', ":2: invalid JSON"),
        "math: no boxed answer": (load_math, b'{"problem": "p", "solution": "it is 4"}\n', "no \\boxed{...} answer"),
    }


DATA_NAMES = ["sft: empty", "sft: torn last line", "sft: no response", "sft: duplicate ids", "sft: invalid UTF-8",
              "prm data: steps and labels differ", "prm data: steps not a list", "prm data: torn last line",
              "gsm8k: no #### line", "gsm8k: garbage last line", "math: no boxed answer"]


@pytest.mark.parametrize("name", DATA_NAMES)
def test_a_bad_data_file_fails_naming_its_line(name, tmp_path):
    load, content, expected = _data_cases()[name]
    path = tmp_path / "data.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError) as err:
        load(path)
    assert expected in str(err.value) and "\n" not in str(err.value), err.value
    assert path.read_bytes() == content


# ---------------------------------------------------------------- samples files (rleif eval --samples)

SAMPLES_CASES = {
    "empty": (b"", "no samples"),
    "a task_id that is a list": (b'{"task_id": ["HumanEval/0"], "completion": "pass"}\n', ":1: needs a known 'task_id'"),
    "an unknown task": (b'{"task_id": "HumanEval/9999", "completion": "pass"}\n', ":1: needs a known 'task_id'"),
    "a completion that is a number": (b'{"task_id": "HumanEval/0", "completion": 3}\n', "string 'completion'"),
    "garbage": (b"\x00\x01\x02", "a binary file"),
    "latin-1 text": ('{"task_id": "HumanEval/0", "completion": "caf\xe9"}\n'.encode("latin-1"), "not UTF-8 text"),
}


@pytest.mark.parametrize("name", sorted(SAMPLES_CASES))
def test_a_bad_samples_file_is_one_clear_line(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    content, expected = SAMPLES_CASES[name]
    samples = tmp_path / "samples.jsonl"
    samples.write_bytes(content)
    code, err = _rleif(capsys, "eval", "humaneval", "--samples", samples, "--out", tmp_path / "out")
    _one_line_error(code, err, expected, "eval")


# ---------------------------------------------------------------- the kit's own files, damaged by hand

def test_a_corrupt_response_cache_is_moved_aside_not_a_traceback(tmp_path, capsys):
    from rleif_kit.llm.base import ChatRequest, ChatResult
    from rleif_kit.llm.cache import ResponseCache

    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a sqlite database" * 100)
    cache = ResponseCache(path)
    note = capsys.readouterr().out
    assert "was not a readable cache" in note and "moved to cache.sqlite.corrupt-" in note
    aside = list(tmp_path.glob("cache.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"this is not a sqlite database" * 100  # kept
    request = ChatRequest("k", ({"role": "user", "content": "hi"},))
    cache.put(request, ChatResult("k", "hello", None, "stop", 1, 1, "m", 0.1))
    assert cache.get(request, "m").text == "hello"


def test_an_evolution_record_without_id_or_round_names_its_file(tmp_path):
    from rleif_kit.core.run_setup import setup
    from rleif_kit.evolve.stage import run_evolve

    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", 'evol_instruct.backend="world"',
                                                        'evol_instruct.seeds="arith:5"', "evol_instruct.rounds=1"),
                       stage="01_evolve", report_dir=str(tmp_path / "reports"), workdir=str(ROOT))
    run_evolve(cfg, paths, progress=False)
    lines = paths.evolved.read_text().splitlines()
    broken = json.loads(lines[0])
    del broken["round"]
    paths.evolved.write_text("\n".join([json.dumps(broken), *lines[1:]]) + "\n")
    before = paths.evolved.read_bytes()
    with pytest.raises(ValueError, match="01_evolve/evolved.jsonl: record 1 has no string 'id' and integer 'round'"):
        run_evolve(cfg, paths, progress=False)
    assert paths.evolved.read_bytes() == before

"""Issue 42, items 7 and 8: a file the user names is read safely (``core/user_files.py``). A FIFO or a device where
a file is expected is one line, at once (a FIFO hung the read, ``/dev/zero`` filled memory); text that cannot be
sent (a lone surrogate) is refused when the seeds are read, naming the file, line and field, before any request
(the dry run too), so nothing is sent and nothing is counted. (Deep nesting and the other bad contents are cases of
test_bad_inputs.py.)"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.user_files import MAX_DEPTH, UserFileError, depth, parse_json, unsendable
from rleif_kit.pipeline import cli

READ = """
import sys
from rleif_kit.core.config import ConfigError, load_config
from rleif_kit.core.jsonl import read_user_jsonl
from rleif_kit.core.settings import SettingsError, load_settings
kind, path = sys.argv[1], sys.argv[2]
try:
    if kind == "settings":
        load_settings(path)
    elif kind == "params":
        load_config(path)
    else:
        list(read_user_jsonl(path, "[evol_instruct] seeds"))
except (ConfigError, SettingsError, ValueError) as e:
    print(str(e))
    sys.exit(2)
"""


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # the old read of /dev/zero ran into this, not a host


@pytest.mark.parametrize("kind", ["settings", "params", "seeds"])
@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_one_line_at_once(kind, special, tmp_path):
    path = special
    if special == "fifo":
        path = str(tmp_path / "settings.json")
        os.mkfifo(path)
    done = subprocess.run([sys.executable, "-c", READ, kind, path], capture_output=True, text=True, timeout=60,
                          preexec_fn=_limited, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout.strip() == done.stdout.strip().splitlines()[0]  # one line
    assert f"{path} is not a regular file (a FIFO, a device or a socket)" in done.stdout


def test_the_walks_are_iterative_and_name_the_field():
    deep = [0]
    for _ in range(100_000):
        deep = [deep]
    assert depth(deep) == 100_001 and depth({"a": [1, {"b": 2}]}) == 3 and depth("x") == 0
    assert unsendable({"turns": [{"content": "ok"}, {"content": "ab\ud800"}]}) == "field 'turns[1].content' (character 3)"
    assert unsendable({"a": ["fine", "é", "😀"]}) is None
    with pytest.raises(UserFileError, match=f"f.jsonl:3: JSON nested deeper than {MAX_DEPTH} levels"):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "f.jsonl:3")
    assert depth(parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f")) == MAX_DEPTH  # the bound itself is fine


KEY_ENV = "RLEIF_TEST_SURROGATE_KEY"


def test_an_unsendable_seed_stops_the_dry_run_and_the_run_before_anything_is_sent(tmp_path, capsys, monkeypatch):
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv(KEY_ENV, "sk-surrogate-test-key-0123456789")
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"instruction": "Tom has 3 apples."}\n{"id": "s2", "instruction": "Ann has \\ud800 pears."}\n')
    overrides = tiny_overrides(tmp_path / "run", f'evol_instruct.seeds="{seeds}"', 'evol_instruct.backend="openai"',
                               "evol_instruct.cache=false")
    sets = [a for o in overrides for a in ("--set", o)]
    with FakeOpenAIServer() as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": KEY_ENV,
                                                "max_retries": 0}, "models": {"evolve": "fake-evolver"}}))
        for dry in (["--dry-run"], []):
            code = cli.main(["evolve", str(TINY_PARAMS), "--settings", str(settings), *sets, *dry])
            err = capsys.readouterr().err
            assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
            assert f"{seeds}:2: field 'instruction' (character 9): text that cannot be sent" in err
        assert server.requests == []
    ledgers = list((tmp_path / "run").rglob("*usage*"))
    assert all(not p.is_file() or not p.read_text().strip() for p in ledgers), ledgers  # nothing counted as sent


def _gate(path):
    from rleif_kit.ppo.stage import load_gate

    return load_gate(path)


def _mbpp_json(path):
    from rleif_kit.worlds.code.mbpp import _records

    return list(_records(path))


def _math_tree(path):
    from rleif_kit.worlds.math.data import load_math

    return load_math(path.parent)


def _raised(read, path):
    try:
        read(path)
    except Exception as e:  # noqa: BLE001 - the test asserts which
        return e
    return None


@pytest.mark.parametrize("read", [_gate, _mbpp_json, _math_tree], ids=["--gate", "MBPP .json", "a MATH tree's file"])
def test_the_other_readers_of_a_named_json_file_refuse_a_fifo_and_deep_nesting(tmp_path, read):
    """The whole-file JSON readers beside the JSONL ones: ``--gate``, MBPP's ``.json`` and a MATH tree's files."""
    folder = tmp_path / "data"
    folder.mkdir()
    fifo = folder / "a.json"
    os.mkfifo(fifo)  # nobody writes it: an open for reading would block forever
    got = []
    reader = threading.Thread(target=lambda: got.append(_raised(read, fifo)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert got and isinstance(got[0], UserFileError) and "is not a regular file" in str(got[0]), got or "hung"
    fifo.unlink()
    deep = folder / "a.json"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(UserFileError, match=f"nested deeper than {MAX_DEPTH} levels"):
        read(deep)


def test_a_prompt_template_that_is_a_fifo_is_one_line_not_a_hang(tmp_path):
    """``[evol_instruct] prompts_dir`` is the user's: its templates are read as any user file is."""
    import shutil

    from rleif_kit.worlds import get_world

    root = tmp_path / "prompts"
    shutil.copytree(ROOT / "params" / "prompts", root)
    world = get_world("math")
    template = root / "math" / "evol" / f"{world.operators[0].name}.txt"
    template.unlink()
    os.mkfifo(template)
    got = []
    reader = threading.Thread(target=lambda: got.append(_raised(world.evol_templates, root)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert got and isinstance(got[0], UserFileError) and "is not a regular file" in str(got[0]), got or "hung"


def test_an_evalplus_gzip_line_nested_deep_is_one_line(tmp_path):
    import gzip

    from rleif_kit.worlds.code.evalplus import records

    data = tmp_path / "MbppPlus.jsonl.gz"
    with gzip.open(data, "wt") as f:
        f.write('{"task_id": "Mbpp/2"}\n' + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(UserFileError, match=f"MbppPlus.jsonl.gz:2: JSON nested deeper than {MAX_DEPTH} levels"):
        records(data)

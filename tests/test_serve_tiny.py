"""The tiny model behind a real chat server: `rleif build-tiny`, `transformers serve` on a loopback port,
`rleif check-api` and a one-round `rleif evolve` against it (docs/testing.md, "Serving the tiny model").

The server is transformers' own OpenAI-compatible one; it needs FastAPI and Uvicorn (the `test` extra installs
them). Without a chat template in the tokenizer it answered every chat request with a 500. Loopback only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.pipeline.cli import main
from loopback import unused_port

pytestmark = pytest.mark.slow  # about 25 s on 2 cores: a model built, a server started, two commands

SERVER_PACKAGES = ("fastapi", "uvicorn")
SEEDS = ["Tom has 3 apples and buys 5 more. How many apples does he have?",
         "A box holds 12 pens. How many pens are in 4 boxes?",
         "Sara had 20 stickers and gave away 7. How many stickers are left?"]


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, limit_s: float = 180) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"transformers serve not healthy after {limit_s:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(model directory, base URL) of the tiny model served by `transformers serve`; stopped afterwards."""
    missing = [m for m in SERVER_PACKAGES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"transformers serve needs {', '.join(missing)}: pip install -e '.[test]'")
    server = Path(sys.executable).parent / "transformers"
    if not server.exists():
        pytest.skip(f"no transformers command beside {sys.executable}")
    root = tmp_path_factory.mktemp("serve")
    model = root / "tiny-llama"
    assert main(["build-tiny", str(model), "--problems", "300"]) == 0
    port, log = unused_port(), root / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # a local folder: nothing to ask the hub
    with log.open("w") as out:
        proc = subprocess.Popen([str(server), "serve", str(model), "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        yield model, f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and anything it started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def settings(served, tmp_path):
    model, base_url = served
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"api": {"base_url": base_url, "api_key_env": None, "timeout": 120, "max_retries": 0},
                                "models": {"evolve": str(model)}}))  # the served model's id is the path it was given
    return path


def test_check_api_answers_ok(settings, capsys):
    code = main(["check-api", "--settings", str(settings)])
    out = capsys.readouterr().out
    assert code == 0, out
    header, row = out.splitlines()
    assert row.split()[0] == "evolve" and row.split()[2] == "ok", row  # a chat round trip: the template works


def test_one_round_of_evolution_against_it(served, settings, tmp_path, capsys, monkeypatch):
    model, _ = served
    (tmp_path / "seeds.jsonl").write_text("".join(json.dumps({"instruction": s}) + "\n" for s in SEEDS))
    params = tmp_path / "tiny-serve.toml"
    params.write_text(f'[base]\nmodel_name = "{model}"\noutput_dir = "./out"\nbf16 = false\n\n'
                      '[evol_instruct]\nbackend = "openai"\nseeds = "./seeds.jsonl"\nrounds = 1\n'
                      'max_new_tokens = 32\nequality_judge = false\n')
    monkeypatch.chdir(tmp_path)  # outside the repository: the kit's own prompt templates are found
    code = main(["evolve", str(params), "--settings", str(settings)])
    out = capsys.readouterr().out
    assert code == 0, out
    stage = tmp_path / "out" / "01_evolve"
    kept, eliminated, failed = (list(read_jsonl(stage / f)) for f in ("evolved.jsonl", "eliminated.jsonl",
                                                                       "failed.jsonl"))
    assert failed == [] and len(kept) + len(eliminated) == len(SEEDS)  # one evolution per seed, each answered
    assert {r["model"] for r in kept + eliminated} == {str(model)}
    assert all(r["usage"]["completion_tokens"] > 0 for r in kept + eliminated)  # the model wrote each reply
    # a random-init model writes noise: each reply is eliminated with its reason (cut at max_tokens: unparseable;
    # U+FFFD or control bytes: garbled), never kept as an instruction
    assert {r["reason"] for r in eliminated} <= {"unparseable", "garbled", "empty", "no_new_information"}
    assert f"kept {len(kept)}, eliminated {len(eliminated)}, failed 0" in out

"""The tiny model behind a real chat server: `rleif build-tiny`, `transformers serve` on a loopback port,
`rleif check-api` and a one-round `rleif evolve` against it (docs/testing.md, "Serving the tiny model"), and a
served evaluation over `/v1/completions` (settings.json "mode": "completions", issue 44) whose per-item results
equal the local evaluation's of the same model.

The server is transformers' own OpenAI-compatible one; it needs FastAPI and Uvicorn (the `test` extra installs
them). Without a chat template in the tokenizer it answered every chat request with a 500. Loopback only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
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
from rleif_kit.core.settings import Endpoint, parse_settings
from rleif_kit.evaluation.commands import eval_config, run_benchmark
from rleif_kit.llm.check_api import check_endpoint
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


@contextlib.contextmanager
def _serving(model: Path, log: Path):
    """The base URL of ``model`` served by `transformers serve` on a free loopback port; stopped afterwards."""
    missing = [m for m in SERVER_PACKAGES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"transformers serve needs {', '.join(missing)}: pip install -e '.[test]'")
    server = Path(sys.executable).parent / "transformers"
    if not server.exists():
        pytest.skip(f"no transformers command beside {sys.executable}")
    port = unused_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # a local folder: nothing to ask the hub
    with log.open("w") as out:
        proc = subprocess.Popen([str(server), "serve", str(model), "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and anything it started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(model directory, base URL) of the tiny model served by `transformers serve`; stopped afterwards."""
    root = tmp_path_factory.mktemp("serve")
    model = root / "tiny-llama"
    assert main(["build-tiny", str(model), "--problems", "300"]) == 0
    with _serving(model, root / "serve.log") as base_url:
        yield model, base_url


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


GSM8K = [("Tom has 3 apples and buys 5 more. How many apples does he have?", "3 + 5 = 8\n#### 8"),
         ("A box holds 12 pens. How many pens are in 4 boxes?", "12 * 4 = 48\n#### 48"),
         ("Sara had 20 stickers and gave away 7. How many stickers are left?", "20 - 7 = 13\n#### 13"),
         ("What is 6 + 7?", "#### 13")]


def _gsm8k(tmp_path: Path) -> Path:
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps({"id": f"g{i}", "question": q, "answer": a}) + "\n"
                            for i, (q, a) in enumerate(GSM8K)))
    return data


def _local_rows(model: Path, data: Path, ev, out: Path) -> tuple[dict, dict]:
    summary, _, path = run_benchmark("gsm8k", ev, model=str(model), data=str(data), out=str(out))
    return summary, {r["id"]: r for r in read_jsonl(path)}


def _same_rows(served_rows: dict, local_rows: dict) -> None:
    assert sorted(served_rows) == sorted(local_rows) == [f"g{i}" for i in range(len(GSM8K))]
    for i, row in local_rows.items():
        assert row["response"], i  # the model wrote something: equality of two empty texts proves nothing
        assert {k: v for k, v in served_rows[i].items() if k != "model"} == \
            {k: v for k, v in row.items() if k != "model"}, i


def test_a_served_evaluation_over_completions_equals_the_local_one(served, tmp_path):
    """Greedy, the same model: the server gets each benchmark prompt as it is on /v1/completions (no template) and
    writes what the local model writes from it, item by item."""
    model, base_url = served
    data = _gsm8k(tmp_path)
    settings = parse_settings({"api": {"base_url": base_url, "api_key_env": None, "timeout": 120, "max_retries": 0,
                                       "mode": "completions"}})
    ev = eval_config(max_new_tokens=24, batch_size=1, temperature=0.0)  # one row a batch: no padding either side
    log = model.parent / "serve.log"
    before = log.read_text().count("POST /v1/completions")
    served_summary, pending, served_path = run_benchmark("gsm8k", ev, served=str(model), data=str(data),
                                                         settings=settings, out=str(tmp_path / "served"))
    local_summary, local_rows = _local_rows(model, data, ev, tmp_path / "local")
    assert pending == 0
    assert log.read_text().count("POST /v1/completions") - before == len(GSM8K)  # the route, once per item
    _same_rows({r["id"]: r for r in read_jsonl(served_path)}, local_rows)
    assert served_summary == local_summary


def test_auto_finds_a_model_without_a_chat_template_and_evaluates_it_over_completions(served, tmp_path):
    """The same model with its chat template taken out: transformers serve answers chat with a bare 500; "auto"
    tries the completions route then, and stays there: check-api says so, and the evaluation equals the local one."""
    model, _ = served
    bare = tmp_path / "no-template"
    shutil.copytree(model, bare)
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    data, ev = _gsm8k(tmp_path), eval_config(max_new_tokens=24, batch_size=1, temperature=0.0)
    log = tmp_path / "serve.log"
    with _serving(bare, log) as base_url:
        chat = check_endpoint(Endpoint("math_eval", str(bare), base_url, None, 120.0, 0, mode="chat"))
        auto = check_endpoint(Endpoint("math_eval", str(bare), base_url, None, 120.0, 0, mode="auto"))
        settings = parse_settings({"api": {"base_url": base_url, "api_key_env": None, "timeout": 120,
                                           "max_retries": 0, "mode": "auto"}})
        _, pending, path = run_benchmark("gsm8k", ev, served=str(bare), data=str(data), settings=settings,
                                         out=str(tmp_path / "served"))
    assert not chat.ok and chat.detail.startswith("http 500")  # what "chat" meets there
    assert auto.ok and auto.mode == "auto:completions", auto
    assert pending == 0
    # one refused chat request, then every item on the completions route (check-api's two requests before)
    assert log.read_text().count("POST /v1/chat/completions") == 3
    assert log.read_text().count("POST /v1/completions") == 1 + len(GSM8K)
    _same_rows({r["id"]: r for r in read_jsonl(path)}, _local_rows(model, data, ev, tmp_path / "local")[1])

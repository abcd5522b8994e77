"""The runner and CLI: stage selection, errors before any work, a failing stage's summary."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from loopback import unused_port
from rleif_kit.models.loading import ModelNotFound
from rleif_kit.pipeline.runner import StageFailed, available_stages, run_pipeline, select_stages


def test_available_stages_are_in_pipeline_order():
    stages = available_stages()
    assert stages[:1] == ["00_setup"] and "03_sft" in stages
    assert stages == sorted(stages)


def test_select_stages_accepts_full_short_and_numeric_names():
    assert select_stages("sft") == ["03_sft"]
    assert select_stages("03_sft,00_setup") == ["00_setup", "03_sft"]  # pipeline order, not argument order
    assert select_stages("03") == ["03_sft"]
    with pytest.raises(ValueError, match="unknown stage 'ppp'"):
        select_stages("ppp")


def test_a_model_that_resolves_nowhere_fails_before_any_notebook(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ModelNotFound, match="resolves nowhere"):
        run_pipeline(str(TINY_PARAMS), "03_sft", [f'base.output_dir="{tmp_path}"', "tiny.build=false",
                                                 "base.model_name=./no-such-model"], report_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r" / "03_sft.ipynb").exists()


def _rleif(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rleif_kit.pipeline.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_cli_reports_config_errors_in_plain_lines(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[base]\nmodel_name = "x"\n[ppo]\nclip_range = -1\n[sft]\nlearning_rate = 1\n')
    out = _rleif("run", str(bad))
    assert out.returncode == 2
    assert "[ppo] clip_range = -1: expected a value > 0" in out.stderr
    assert "unknown key 'learning_rate' (did you mean 'lr'?)" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_a_failing_stage_names_the_notebook_cell_and_error(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    overrides = tiny_overrides(tmp_path / "run", 'sft.dataset="./missing.jsonl"')
    with pytest.raises(StageFailed) as err:
        run_pipeline(str(TINY_PARAMS), "03_sft", overrides, report_dir=str(tmp_path / "r"))
    message = str(err.value)
    assert message.startswith("03_sft failed in cell")
    assert "DataError" in message and "missing.jsonl" in message
    assert str(tmp_path / "r" / "03_sft.ipynb") in message


def test_an_endpoint_rejection_or_a_budget_stop_ends_the_run_with_its_own_exit_code(tmp_path, monkeypatch):
    """Issue 17: on a 401 ``rleif run`` went on to 02 with nothing kept. Now the rejection fails 01 (exit 3), and a
    budget stop leaves 01 incomplete and stops the run there (exit 4); 02 runs in neither case."""
    import json

    from rleif_kit.pipeline.runner import StageStopped
    from rleif_kit.testing.fake_openai import FakeOpenAIServer
    from test_evolve import FAKE_KEY, _openai_extra, _settings, evolution_responder

    monkeypatch.chdir(ROOT)
    with FakeOpenAIServer(responder=evolution_responder, require_key=FAKE_KEY) as server:
        settings = str(_settings(tmp_path, server, retries=0))
        monkeypatch.setenv("RLEIF_EVOLVE_KEY", "sk-wrong-wrong-wrong-1234")
        with pytest.raises(StageFailed, match="EndpointRejected: endpoint rejected the request: http 401") as bad:
            run_pipeline(str(TINY_PARAMS), "01_evolve,02_dedup", tiny_overrides(tmp_path / "a", *_openai_extra(6)),
                         settings, report_dir=str(tmp_path / "ra"))
        assert bad.value.exit_code == 3 and not (tmp_path / "ra" / "02_dedup.ipynb").exists()
        monkeypatch.setenv("RLEIF_EVOLVE_KEY", FAKE_KEY)
        with pytest.raises(StageStopped, match="evolution stopped early .budget: max_requests reached") as stop:
            run_pipeline(str(TINY_PARAMS), "01_evolve,02_dedup",
                         tiny_overrides(tmp_path / "b", *_openai_extra(6), "evol_instruct.max_requests=5"), settings,
                         report_dir=str(tmp_path / "rb"))
    assert stop.value.exit_code == 4 and "rerun to continue" in str(stop.value)
    assert not (tmp_path / "rb" / "02_dedup.ipynb").exists() and not (tmp_path / "b" / "01_evolve" / ".done.json").exists()
    assert json.loads((tmp_path / "b" / "01_evolve" / "usage.json").read_text())["requests"] == 5


def test_an_unreachable_endpoint_stops_01_and_a_plain_rerun_retries_once_it_is_back(tmp_path, monkeypatch):
    """Issue 30: with the endpoint down, 01_evolve said "ok", exited 0 and wrote its done marker with every request
    failed; the rerun then skipped it. Now it ends stopped (exit 4, no marker, 02 not run) with the cause and an
    example in the report's metrics, and a plain rerun (no --force) retries exactly the failed ones."""
    import json

    from rleif_kit.core.run_setup import setup
    from rleif_kit.core.settings import load_settings
    from rleif_kit.evolve.stage import run_evolve
    from rleif_kit.pipeline.runner import StageStopped
    from rleif_kit.testing.fake_openai import FakeOpenAIServer
    from test_evolve import FAKE_KEY, _openai_extra, evolution_responder

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("RLEIF_EVOLVE_KEY", FAKE_KEY)
    settings = tmp_path / "settings.json"

    def point_at(url: str) -> str:
        settings.write_text(json.dumps({"api": {"base_url": url, "api_key_env": "RLEIF_EVOLVE_KEY", "timeout": 2,
                                                "max_retries": 0}, "models": {"evolve": "fake-evolver"}}))
        return str(settings)

    args = (str(TINY_PARAMS), "01_evolve,02_dedup", tiny_overrides(tmp_path / "run", *_openai_extra(5)))
    with pytest.raises(StageStopped, match=r"every one of 5 evolutions failed \(mostly connection\)") as stop:
        run_pipeline(*args, point_at(f"http://127.0.0.1:{unused_port()}/v1"), report_dir=str(tmp_path / "r"))
    assert stop.value.exit_code == 4
    assert not (tmp_path / "run" / "01_evolve" / ".done.json").exists()
    assert not (tmp_path / "r" / "02_dedup.ipynb").exists()
    failures = json.loads((tmp_path / "r" / "metrics.json").read_text())["01_evolve"]["failures"]
    assert failures["status"] == "stopped" and failures["causes"]["connection"]["count"] == 5
    assert "connection error" in failures["causes"]["connection"]["example"].lower()
    status = json.loads((tmp_path / "r" / "run.json").read_text())
    assert status["stages"]["01_evolve"]["status"] == "stopped"
    with FakeOpenAIServer(responder=evolution_responder, require_key=FAKE_KEY) as server:
        runs = run_pipeline(*args, point_at(server.base_url), report_dir=str(tmp_path / "r"))
        sent = len(server.requests)
        cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "fresh", *_openai_extra(5)), stage="01_evolve",
                           report_dir=str(tmp_path / "rf"), workdir=str(ROOT))
        run_evolve(cfg, paths, load_settings(settings), progress=False)
        fresh = len(server.requests) - sent
    assert [r.stage for r in runs] == ["01_evolve", "02_dedup"]
    assert sent == fresh  # the retry asked what an uninterrupted run asks, nothing twice
    assert (tmp_path / "run" / "01_evolve" / ".done.json").exists()
    assert json.loads((tmp_path / "run" / "01_evolve" / "failures.json").read_text())["status"] == "ok"


def test_a_sigterm_mid_stage_leaves_the_status_and_the_report_page(tmp_path):
    """The README promises a page "also after a failure"; a stopped run (SIGTERM) left none. Now SIGTERM is handled
    as Ctrl-C is: the stage is "stopped" with the signal's name, index.html is written, the exit status is 130."""
    import json
    import os
    import signal
    import time

    from rleif_kit.testing.fake_openai import FakeOpenAIServer
    from test_evolve import FAKE_KEY, _openai_extra, evolution_responder

    with FakeOpenAIServer(responder=evolution_responder, require_key=FAKE_KEY, latency_s=60) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_EVOLVE_KEY",
                                                "timeout": 120, "max_retries": 0}, "models": {"evolve": "fake-evolver"}}))
        sets = [a for o in tiny_overrides(tmp_path / "run", *_openai_extra(2)) for a in ("--set", o)]
        proc = subprocess.Popen([sys.executable, "-m", "rleif_kit.pipeline.cli", "run", str(TINY_PARAMS), "--stages",
                                 "01_evolve", "--settings", str(settings), "--report-dir", str(tmp_path / "r"), *sets],
                                cwd=ROOT, env={**os.environ, "RLEIF_EVOLVE_KEY": FAKE_KEY}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while not server.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)  # the stage is under way once its first request reaches the server
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    status = json.loads((tmp_path / "r" / "run.json").read_text())
    assert status["stages"]["01_evolve"]["status"] == "stopped", status
    assert status["stages"]["01_evolve"]["reason"] == "terminated (SIGTERM)", status
    assert (tmp_path / "r" / "index.html").exists() and "report:" in out and "terminated (SIGTERM)" in out
    assert not (tmp_path / "run" / "01_evolve" / ".done.json").exists()


def test_a_wrong_model_name_fails_01_as_rejected_and_a_plain_rerun_finishes_once_it_is_right(tmp_path, monkeypatch):
    """Issue 30: a server pinned to one model answered 400 with its reason, and the kit showed `Error code: 400`.
    Now the run stops at 01 with exit 3, the server's own words and its model list, no done marker; with the model
    name fixed, the same command (no --force) finishes."""
    import json

    from rleif_kit.testing.fake_openai import FakeOpenAIServer, _Reply
    from test_evolve import _openai_extra, evolution_responder

    key = "sk-fake-Q7xW2pL9vR4tZ8kN3m"  # random-looking, as real keys are: the kit redacts any 6 characters of it

    class Pinned(FakeOpenAIServer):  # a server that serves one model, as `transformers serve --model ...` is
        async def _chat(self, body):
            if isinstance(body, dict) and body.get("model") != "fake-evolver":
                self._count("400")
                return _Reply(400, {"detail": f"Server is pinned to 'fake-evolver'; requested '{body.get('model')}'."})
            return await super()._chat(body)

        async def _dispatch(self, method, path, headers, raw):
            if method == "GET" and path == "/v1/models":
                return _Reply(200, {"object": "list", "data": [{"id": "fake-evolver", "object": "model"}]})
            return await super()._dispatch(method, path, headers, raw)

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("RLEIF_EVOLVE_KEY", key)
    settings = tmp_path / "settings.json"
    args = (str(TINY_PARAMS), "01_evolve,02_dedup", tiny_overrides(tmp_path / "run", *_openai_extra(4)))
    with Pinned(responder=evolution_responder, require_key=key) as server:
        def named(model: str) -> str:
            settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_EVOLVE_KEY",
                                                    "timeout": 5, "max_retries": 0}, "models": {"evolve": model}}))
            return str(settings)

        with pytest.raises(StageFailed) as bad:
            run_pipeline(*args, named("gpt-4o"), report_dir=str(tmp_path / "r"))
        assert bad.value.exit_code == 3
        assert "Server is pinned to 'fake-evolver'; requested 'gpt-4o'" in str(bad.value)
        assert "fake-evolver" in str(bad.value).split("model list", 1)[1]  # the server's list, named
        assert not (tmp_path / "run" / "01_evolve" / ".done.json").exists()
        assert not (tmp_path / "r" / "02_dedup.ipynb").exists()
        status = json.loads((tmp_path / "r" / "run.json").read_text())["stages"]["01_evolve"]
        assert status["status"] == "failed" and "pinned" in status["reason"]
        runs = run_pipeline(*args, named("fake-evolver"), report_dir=str(tmp_path / "r"))
    assert [r.stage for r in runs] == ["01_evolve", "02_dedup"]
    assert (tmp_path / "run" / "01_evolve" / ".done.json").exists()


def test_a_finished_notebooks_kernel_is_shut_down_without_an_interrupt(monkeypatch):
    """jupyter_client interrupts a kernel before shutting it down; after the last cell that SIGINT made a successful
    stage print "KeyboardInterrupt caught in kernel." in the terminal. While the notebook runs, interrupts pass."""
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from rleif_kit.pipeline.runner import _kernel_manager_class

    sent = []

    async def interrupt(self):
        sent.append(self.shutting_down)

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    km = _kernel_manager_class()()
    asyncio.run(km._async_interrupt_kernel())  # a run asking for an interrupt: sent
    km.shutting_down = True
    asyncio.run(km._async_interrupt_kernel())  # what shutdown_kernel calls first: not sent
    assert sent == [False]


def test_papermill_runs_a_notebook_with_that_kernel_manager(tmp_path, monkeypatch):
    import papermill as pm

    from rleif_kit.pipeline import runner

    seen = {}
    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **kw: seen.update(kw))
    runner.run_stage("00_setup", runner.RunContext(str(TINY_PARAMS)), tmp_path)
    assert seen["kernel_manager_class"].__name__ == "FinishedNotebookKernelManager"

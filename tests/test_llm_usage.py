"""Issue 30, item 4: every request is accounted on disk as it is sent (``usage.jsonl``, the usage ledger), so a
SIGKILLed invocation's spend still reaches ``usage.json``'s total: after 8 kills the server had seen 992 requests
and usage.json counted 196.

In-process checks of the ledger and the merge, and a child process evolving against the loopback server,
SIGKILLed several times; no network.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, TINY_PARAMS, tiny_overrides

from rleif_kit.core.settings import Endpoint, Price
from rleif_kit.llm.base import ChatRequest, ChatResult, merge_usage
from rleif_kit.llm.openai_backend import OpenAIBackend
from rleif_kit.llm.usage import UsageLedger, ledger_path, ledger_runs
from rleif_kit.testing.fake_openai import FakeOpenAIServer

KEY_ENV = "RLEIF_TEST_LEDGER_KEY"
KEY = "sk-ledger-test-key-0123456789abcdef"


def asks(n: int) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", ({"role": "user", "content": f"two words {i}"},)) for i in range(n)]


def test_the_ledger_counts_each_request_as_sent_and_as_answered(tmp_path):
    path = tmp_path / "usage.jsonl"
    with FakeOpenAIServer(responder=lambda body: "one two three") as server:
        backend = OpenAIBackend(Endpoint("evolve", "m", server.base_url, None, 5.0, 0), concurrency=3,
                                price=Price(1e6, 1e6), ledger=path)
        backend.complete(asks(5))
    (run,) = ledger_runs(path)
    # 5 sent, 5 ok; 3 prompt words x 5 = 15 prompt tokens, 3 reply words x 5 = 15 completion tokens; $1 per token
    assert {k: run[k] for k in ("requests", "ok", "failed", "cached", "prompt_tokens", "completion_tokens",
                                "unfinished")} == {"requests": 5, "ok": 5, "failed": 0, "cached": 0,
                                                    "prompt_tokens": 15, "completion_tokens": 15, "unfinished": 0}
    assert run["cost_usd"] == pytest.approx(30.0) and run["model"] == "m" and run["inv"] == backend.ledger.inv
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["t"] for line in lines][:2] == ["start", "sent"] and len(lines) == 1 + 5 + 5
    assert ledger_path(tmp_path / "01_evolve" / "usage.json") == tmp_path / "01_evolve" / "usage.jsonl"


def test_a_killed_invocation_is_added_to_the_total_with_what_it_sent(tmp_path):
    path = tmp_path / "usage.jsonl"
    killed = UsageLedger(path, "m")  # sent 3, one answered, then the process died
    for _ in range(3):
        killed.sent()
    killed.done(ChatResult("a", "x", None, "stop", 10, 5, "m", 0.1), 0.25)
    killed.close()
    with open(path, "ab") as f:
        f.write(b'{"t": "sent", "inv": "torn')  # a torn last line, as a kill mid-write leaves it
    previous = {"requests": 4, "ok": 4, "failed": 0, "cached": 0, "prompt_tokens": 40, "completion_tokens": 20,
                "cost_usd": 1.0, "inv": "older"}  # an invocation that ended and wrote usage.json
    now = {"requests": 2, "ok": 2, "failed": 0, "cached": 0, "prompt_tokens": 20, "completion_tokens": 10,
           "cost_usd": 0.5, "inv": "now"}
    merged = merge_usage(merge_usage(None, previous), now, ledger_runs(path))
    assert merged["requests"] == 2  # the top level stays this invocation's
    # 4 + 3 + 2 requests; 2 of the killed one's were in flight at the kill; $1.00 + $0.25 + $0.50
    assert merged["total"] == {"requests": 9, "ok": 7, "failed": 0, "cached": 0, "prompt_tokens": 70,
                               "completion_tokens": 35, "unfinished": 2, "cost_usd": pytest.approx(1.75),
                               "invocations": 3}
    assert merged["invocations"][1]["inv"] == killed.inv and "without writing usage.json" in \
        merged["invocations"][1]["ended"]


class PausingServer(FakeOpenAIServer):
    """Holds every chat completion while paused; requests keep being received (and counted) meanwhile."""

    def pause(self, paused: bool) -> None:
        self._loop.call_soon_threadsafe(self._gate.clear if paused else self._gate.set)

    async def _serve(self):
        import asyncio

        self._gate = asyncio.Event()
        self._gate.set()
        await super()._serve()

    async def _chat(self, body):
        await self._gate.wait()
        return await super()._chat(body)


def responder(body: dict) -> str:
    content = body["messages"][-1]["content"]
    if "Original problem:" not in content:
        return "Different"
    original = content.split("Original problem:\n", 1)[1].strip()
    return f"{original} Then {len(original) % 9 + 2} more are added."


@pytest.mark.slow
def test_after_sigkills_the_usage_total_counts_what_the_server_received(tmp_path, monkeypatch):
    """Kill the evolving child 4 times, then let it finish: usage.json's total request count is the server's.

    Each kill is made while the server holds its requests (paused, so no answer lets the child start another
    and every request it started has arrived): the count a kill leaves is then exact, not off by a request in
    the instant between the ledger line and the socket.
    """
    monkeypatch.setenv(KEY_ENV, KEY)
    run = tmp_path / "run"
    extra = ('evol_instruct.backend="openai"', 'evol_instruct.seeds="arith:60"', "evol_instruct.rounds=2",
             "evol_instruct.concurrency=8", "evol_instruct.cache=false")
    with PausingServer(responder=responder, latency_s=0.02, require_key=KEY) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": KEY_ENV, "timeout": 10,
                                                "max_retries": 0}, "models": {"evolve": "fake-evolver"}}))
        cmd = [sys.executable, "-m", "rleif_kit.evolve", "--params", str(TINY_PARAMS), "--settings", str(settings)]
        cmd += [a for o in tiny_overrides(run, *extra) for a in ("--set", o)]
        kills = 0
        for wait_for in (15, 40, 40, 40):  # requests to see from this child before it is killed
            before = server.counters.get("requests", 0)
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while server.counters.get("requests", 0) < before + wait_for and proc.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            server.pause(True)
            time.sleep(0.5)  # every request the child started reaches the server; none is answered
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
            proc.wait()
            server.pause(False)
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        received = server.counters["requests"]
    assert done.returncode == 0, done.stderr[-2000:]
    assert kills == 4
    usage = json.loads((run / "01_evolve" / "usage.json").read_text())
    assert usage["total"]["requests"] == received  # before the ledger: only the last invocation's were counted
    assert usage["total"]["invocations"] == 5 and usage["total"]["unfinished"] > 0
    assert usage["requests"] < received  # the top level is the last invocation's own


def test_the_fan_out_and_the_rewrite_into_steps_keep_their_own_ledgers_and_01s_total_stays_01s(tmp_path, monkeypatch):
    """The fan-out (04) and the answers' rewrite into steps (02) use the evolve model too; their requests once went
    to 01's ledger, so 01's usage.json counted them as killed invocations of 01."""
    from rleif_kit.core.run_setup import setup
    from rleif_kit.core.settings import load_settings
    from rleif_kit.evolve.fanout import run_fanout
    from rleif_kit.evolve.stage import run_evolve
    from rleif_kit.worlds.data import load_seeds
    from rleif_kit.worlds.math.sft import rewrite_to_steps

    monkeypatch.setenv(KEY_ENV, KEY)
    extra = ('evol_instruct.backend="openai"', 'evol_instruct.seeds="arith:8"', "evol_instruct.rounds=1",
             "evol_instruct.cache=false", "evol_instruct.equality_judge=false", "evol_instruct.with_answers=false")
    with FakeOpenAIServer(responder=responder, require_key=KEY) as server:
        settings_path = tmp_path / "settings.json"
        settings_path.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": KEY_ENV,
                                                     "max_retries": 0}, "models": {"evolve": "fake-evolver"}}))
        settings = load_settings(str(settings_path))
        cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", *extra), stage="01_evolve",
                           report_dir=str(tmp_path / "reports"), workdir=str(ROOT))
        first = run_evolve(cfg, paths, settings, progress=False)
        evolve_sent = server.counters["requests"]
        ledger_before = paths.evolve_usage_ledger.read_bytes()

        out = paths.irm_fanout
        run_fanout(cfg, out, list(load_seeds(cfg, paths))[:3], k=2, settings=settings, progress=False)
        items = [{"id": f"u{i}", "instruction": "What is 2 + 2?", "response": "It is 4."} for i in range(2)]
        rewrite_to_steps(cfg, settings, items)
        others_sent = server.counters["requests"] - evolve_sent
        again = run_evolve(cfg, paths, settings, progress=False)  # every lineage done: nothing is sent
    assert first.usage["total"]["requests"] == evolve_sent == 8  # 8 seeds x 1 round, no judge, no answers
    assert others_sent == 3 * 2 + 2  # 3 parents x 2 siblings, 2 rewrites
    assert paths.evolve_usage_ledger.read_bytes() == ledger_before  # not one line of theirs in 01's ledger
    assert again.usage["total"]["requests"] == 8 and again.usage["total"]["invocations"] == 2  # 01's two runs
    (fanout_run,) = ledger_runs(ledger_path(out.with_suffix(".usage.json")))  # each keeps its own, beside its output
    (rewrite_run,) = ledger_runs(paths.rewrite_steps_usage_ledger)
    assert (fanout_run["requests"], rewrite_run["requests"]) == (6, 2)
    fanout_usage = json.loads(out.with_suffix(".usage.json").read_text())
    assert fanout_usage["total"]["requests"] == 6 and fanout_usage["inv"] == fanout_run["inv"]

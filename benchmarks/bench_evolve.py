"""Throughput of the Evol-Instruct engine (run_evolve, openai backend, JSONL checkpoints) against a fake API.

    .venv/bin/python benchmarks/bench_evolve.py [--repeats 3]

The FakeOpenAIServer runs in a separate process (its CPU must not share our GIL), answering
after a fixed latency.  Every request has the real shape of an evolution call: one user message
of ~150 words, max_tokens 256, a ~120-word reply.  Two scenarios, in one run:

(a) latency 1 s, 1,000 evolutions, 64 in flight, every outcome appended to the stage's JSONL
    (fsync every 500): requests/s against the ideal 64 req/s (target >= 90%), and against a plain
    one-at-a-time loop with the sync ``openai.OpenAI`` client (target >= 55x).
(b) latency 50 ms, 2,000 requests, 64 in flight: the kit vs a bare ``AsyncOpenAI`` +
    ``asyncio.Semaphore(64)`` loop making the same calls (target ratio >= 0.85).  Kit and bare run
    alternately ``--repeats`` times, so machine noise hits both alike; medians are reported.

Writes reports/bench/evolve.json and prints a summary table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rleif_kit.llm.base import ChatRequest  # noqa: E402

MODEL = "evolver"
CONCURRENCY = 64
MAX_TOKENS = 256
REPLY = " ".join(f"word{i % 37}" for i in range(120))
TEMPLATE = (ROOT / "params" / "prompts" / "evol" / "math" / "add_constraint.txt").read_text(encoding="utf-8")
SEED = ("A shop sells {i} apples on Monday and twice as many on Tuesday. Each apple costs 3 dollars. How much "
        "money did the shop make in total over the two days, and what is the average per day?")
TARGETS = {"a_share_of_ideal": 0.90, "a_kit_over_loop": 55.0, "b_kit_over_bare": 0.85}


# ---------------------------------------------------------------------------- the server process


def _serve(latency_s: float, port_queue: mp.Queue, stop: mp.Event) -> None:
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(responder=lambda body: REPLY, latency_s=latency_s) as server:
        port_queue.put(server.port)
        stop.wait()


class ServerProcess:
    """A FakeOpenAIServer in a child process; ``base_url`` once entered."""

    def __init__(self, latency_s: float):
        ctx = mp.get_context("spawn")
        self._ports, self._stop = ctx.Queue(), ctx.Event()
        self._proc = ctx.Process(target=_serve, args=(latency_s, self._ports, self._stop), daemon=True)

    def __enter__(self) -> "ServerProcess":
        self._proc.start()
        self.base_url = f"http://127.0.0.1:{self._ports.get(timeout=60)}/v1"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()


# ---------------------------------------------------------------------------- the contenders


def evolution_requests(n: int):
    """Generated lazily, as the evolution engine does."""
    for i in range(n):
        content = TEMPLATE.replace("{instruction}", SEED.format(i=i))
        yield ChatRequest(f"r{i}", ({"role": "user", "content": content},), temperature=0.7, max_tokens=MAX_TOKENS)


async def run_kit(base_url: str, n: int, out_dir: Path) -> float:
    """Seconds for n evolutions through the real engine (``run_evolve`` with the openai backend):
    operator draw, template, request, elimination checks, lineage, every outcome appended to JSONL
    with checkpointing (fsync every 500) — one request per evolution (no judge, no answers)."""
    from rleif_kit.evolve.stage import run_evolve_async
    from rleif_kit.core.settings import load_settings
    from rleif_kit.core.run_setup import setup

    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = out_dir / "seeds.jsonl"
    seeds.write_text("".join(json.dumps({"id": f"s{i}", "instruction": SEED.format(i=i)}) + "\n" for i in range(n)))
    settings = out_dir / "settings.json"
    settings.write_text(json.dumps({"api": {"base_url": base_url, "api_key_env": None, "timeout": 60,
                                            "max_retries": 3}, "models": {"evolve": MODEL}}))
    overrides = [f'base.output_dir="{out_dir / "run"}"', 'evol_instruct.backend="openai"',
                 f'evol_instruct.seeds="{seeds}"', "evol_instruct.rounds=1", "evol_instruct.with_answers=false",
                 "evol_instruct.equality_judge=false", f"evol_instruct.concurrency={CONCURRENCY}",
                 "evol_instruct.cache=false", "evol_instruct.checkpoint_every=500",
                 f"evol_instruct.max_new_tokens={MAX_TOKENS}"]
    cfg, paths = setup(str(ROOT / "params" / "tiny-cpu.toml"), overrides, stage="01_evolve",
                       report_dir=str(out_dir / "reports"), workdir=str(ROOT))
    start = time.perf_counter()
    result = await run_evolve_async(cfg, paths, load_settings(settings), progress=False)
    seconds = time.perf_counter() - start
    assert result.kept + result.eliminated == n and result.failed == 0, result
    return seconds


async def run_bare(base_url: str, n: int) -> float:
    """Seconds for the same n calls with a bare AsyncOpenAI + Semaphore loop (results kept in memory)."""
    import openai

    client = openai.AsyncOpenAI(api_key="not-needed", base_url=base_url, timeout=60.0, max_retries=3)
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(request: ChatRequest) -> str | None:
        async with sem:
            reply = await client.chat.completions.create(
                model=MODEL, messages=list(request.messages), temperature=request.temperature,
                top_p=request.top_p, max_tokens=request.max_tokens)
            return reply.choices[0].message.content

    start = time.perf_counter()
    texts = await asyncio.gather(*(one(r) for r in evolution_requests(n)))
    seconds = time.perf_counter() - start
    await client.close()
    assert all(t == REPLY for t in texts)
    return seconds


def run_loop(base_url: str, n: int) -> float:
    """Seconds for n calls one at a time with the sync client: what a naive script does."""
    import openai

    with openai.OpenAI(api_key="not-needed", base_url=base_url, timeout=60.0, max_retries=3) as client:
        start = time.perf_counter()
        for r in evolution_requests(n):
            client.chat.completions.create(model=MODEL, messages=list(r.messages), temperature=r.temperature,
                                           top_p=r.top_p, max_tokens=r.max_tokens)
        return time.perf_counter() - start


# ---------------------------------------------------------------------------- scenarios


def scenario_a(tmp: Path, n: int, loop_n: int) -> dict:
    with ServerProcess(latency_s=1.0) as server:
        kit_s = asyncio.run(run_kit(server.base_url, n, tmp / "a"))
        loop_s = run_loop(server.base_url, loop_n)
    kit_rps, loop_rps = n / kit_s, loop_n / loop_s
    return {"latency_s": 1.0, "requests": n, "concurrency": CONCURRENCY, "kit_seconds": kit_s,
            "kit_rps": kit_rps, "ideal_rps": CONCURRENCY / 1.0, "share_of_ideal": kit_rps / CONCURRENCY,
            "loop_requests": loop_n, "loop_seconds": loop_s, "loop_rps": loop_rps, "kit_over_loop": kit_rps / loop_rps}


def scenario_b(tmp: Path, n: int, repeats: int) -> dict:
    runs = []
    with ServerProcess(latency_s=0.05) as server:
        asyncio.run(run_kit(server.base_url, 200, tmp / "warm"))  # warm-up: imports, first connections
        asyncio.run(run_bare(server.base_url, 200))
        for r in range(repeats):
            kit_s = asyncio.run(run_kit(server.base_url, n, tmp / f"b{r}"))
            bare_s = asyncio.run(run_bare(server.base_url, n))
            runs.append({"kit_rps": n / kit_s, "bare_rps": n / bare_s, "kit_over_bare": bare_s / kit_s})
            print(f"  (b) repeat {r + 1}: kit {n / kit_s:7.1f} req/s, bare {n / bare_s:7.1f} req/s", flush=True)
    med = {k: statistics.median(run[k] for run in runs) for k in ("kit_rps", "bare_rps", "kit_over_bare")}
    return {"latency_s": 0.05, "requests": n, "concurrency": CONCURRENCY, "ideal_rps": CONCURRENCY / 0.05,
            "median": med, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--a-requests", type=int, default=1000)
    parser.add_argument("--loop-requests", type=int, default=24)
    parser.add_argument("--b-requests", type=int, default=2000)
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench" / "evolve.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("(a) latency 1 s ...", flush=True)
        a = scenario_a(Path(tmp), args.a_requests, args.loop_requests)
        print("(b) latency 50 ms ...", flush=True)
        b = scenario_b(Path(tmp), args.b_requests, args.repeats)
    figures = {"a_share_of_ideal": a["share_of_ideal"], "a_kit_over_loop": a["kit_over_loop"],
               "b_kit_over_bare": b["median"]["kit_over_bare"]}
    result = {"a": a, "b": b, "targets": TARGETS, "met": {k: figures[k] >= v for k, v in TARGETS.items()},
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_summary(a, b, figures)
    print(f"wrote {out}")


def print_summary(a: dict, b: dict, figures: dict) -> None:
    rows = [
        ("(a) kit req/s, 1 s latency", f"{a['kit_rps']:.1f}", f"ideal {a['ideal_rps']:.0f}"),
        ("(a) share of ideal", f"{figures['a_share_of_ideal']:.1%}", f">= {TARGETS['a_share_of_ideal']:.0%}"),
        ("(a) plain loop req/s", f"{a['loop_rps']:.2f}", ""),
        ("(a) kit / loop", f"{figures['a_kit_over_loop']:.1f}x", f">= {TARGETS['a_kit_over_loop']:.0f}x"),
        ("(b) kit req/s, 50 ms (median)", f"{b['median']['kit_rps']:.1f}", f"ideal {b['ideal_rps']:.0f}"),
        ("(b) bare req/s (median)", f"{b['median']['bare_rps']:.1f}", ""),
        ("(b) kit / bare (median)", f"{figures['b_kit_over_bare']:.3f}", f">= {TARGETS['b_kit_over_bare']}"),
    ]
    for name, value, target in rows:
        print(f"{name:<32}{value:>10}  {target}")


if __name__ == "__main__":
    main()

"""Evol-Instruct engine: operator draws, lineage, elimination records, resume and crash safety.

Offline: the arith backend, or a loopback OpenAI-compatible server with the real openai client.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.evolve.stage import run_evolve
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.evolve.operators import child_id, choose_operator, distinct_operators
from rleif_kit.worlds import get_world
from rleif_kit.worlds.code.world import CODE_OPERATORS
from rleif_kit.worlds.math.world import MATH_OPERATORS
from rleif_kit.core.run_setup import setup


def _setup(tmp_path, *extra):
    return setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", *extra), stage="01_evolve",
                 report_dir=str(tmp_path / "reports"), workdir=str(ROOT))


def test_up_down_ratio_is_respected_over_many_draws():
    # 10,000 draws at up = 0.7: binomial sd = sqrt(0.7 * 0.3 / 10000) = 0.0046, so +-0.02 is > 4 sd
    ups = sum(choose_operator(f"seed-{i}", 1, MATH_OPERATORS, 0.7).direction == "up" for i in range(10_000))
    assert abs(ups / 10_000 - 0.7) < 0.02
    downs_only = {choose_operator(f"s{i}", 2, MATH_OPERATORS, 0.0).direction for i in range(500)}
    assert downs_only == {"down"}


def test_operator_draws_are_deterministic_and_cover_every_operator():
    draws = [choose_operator(f"seed-{i}", 3, MATH_OPERATORS, 0.7) for i in range(2000)]
    again = [choose_operator(f"seed-{i}", 3, MATH_OPERATORS, 0.7) for i in range(2000)]
    assert draws == again
    assert {op.name for op in draws} == {op.name for op in MATH_OPERATORS}


def test_the_rare_code_operator_is_rare():
    names = Counter(choose_operator(f"t{i}", 1, CODE_OPERATORS, 1.0).name for i in range(8000))
    # weights 1,1,1,1,0.25 → complexity share 0.25 / 4.25 = 5.9%, the others 23.5% each
    assert 0.04 < names["complexity"] / 8000 < 0.08
    assert all(0.20 < names[n] / 8000 < 0.27 for n in ("add_requirement", "misdirection"))


def test_fan_out_gives_distinct_operators():
    ops = distinct_operators("seed-1", 1, MATH_OPERATORS, 4, 0.7)
    assert len({op.name for op in ops}) == 4
    with pytest.raises(ValueError, match="distinct operators"):
        distinct_operators("seed-1", 1, MATH_OPERATORS, 7, 0.7)


def test_ids_come_from_root_round_and_operator():
    assert child_id("seed-000001", 2, "deepen") == "seed-000001-r2-deepen"


def test_every_operator_template_exists_and_takes_the_instruction():
    for name in ("math", "code"):
        world = get_world(name)
        templates = world.evol_templates(ROOT / "params" / "prompts")
        assert set(templates) == {op.name for op in world.operators}
        assert all("{instruction}" in t for t in templates.values())


def test_arith_evolution_records_lineage_and_reasons(tmp_path):
    cfg, paths = _setup(tmp_path, 'evol_instruct.backend="world"', 'evol_instruct.seeds="arith:120"',
                        "evol_instruct.rounds=3")
    result = run_evolve(cfg, paths, progress=False)
    kept = list(read_jsonl(paths.stage("01_evolve") / "evolved.jsonl"))
    eliminated = list(read_jsonl(paths.stage("01_evolve") / "eliminated.jsonl"))
    assert result.kept == len(kept) and result.eliminated == len(eliminated)
    assert result.kept + result.eliminated == 120 * 3  # every lineage decided in every round
    assert result.duplicate_ids == 0
    by_id = {r["id"]: r for r in kept}
    for r in kept:
        assert set(r) >= {"id", "parent_id", "root_id", "round", "operator", "direction", "text", "answer", "model"}
        assert r["id"] == child_id(r["root_id"], r["round"], r["operator"])
        if r["round"] > 1 and r["parent_id"] != r["root_id"]:
            assert by_id[r["parent_id"]]["round"] < r["round"]  # a child's parent is an earlier kept record
    assert all(r["reason"] for r in eliminated)
    assert set(result.reasons) <= {"empty", "leaked_template", "refusal", "no_new_information", "unparseable"}


def test_a_rerun_decides_nothing_new_and_an_identical_run_makes_identical_records(tmp_path):
    extra = ('evol_instruct.backend="world"', 'evol_instruct.seeds="arith:80"', "evol_instruct.rounds=2")
    cfg, paths = _setup(tmp_path / "a", *extra)
    run_evolve(cfg, paths, progress=False)
    first = (paths.stage("01_evolve") / "evolved.jsonl").read_text()
    run_evolve(cfg, paths, progress=False)  # resume: every id is already decided
    assert (paths.stage("01_evolve") / "evolved.jsonl").read_text() == first
    usage = json.loads((paths.stage("01_evolve") / "usage.json").read_text())
    assert usage["total"]["invocations"] == 2 and len(usage["invocations"]) == 2  # both invocations kept
    cfg2, paths2 = _setup(tmp_path / "b", *extra)
    run_evolve(cfg2, paths2, progress=False)
    second = (paths2.stage("01_evolve") / "evolved.jsonl").read_text()
    assert sorted(second.splitlines()) == sorted(first.splitlines())  # same records; completion order may differ


# ---------------------------------------------------------------- through an OpenAI-compatible server

FAKE_KEY = "sk-evolve-test-key-0123456789abcdef"


def evolution_responder(body: dict) -> str:
    """Plays the evolver, the equality judge and the answerer, deterministically from the prompt."""
    content = body["messages"][-1]["content"]
    if content.startswith("Here are two problems"):
        return "Different"
    if content.startswith("Solve the problem"):
        return "Step 1: 2 + 3 = 5. The answer is: 5"
    original = content.split("Original problem:\n", 1)[1].strip()
    return f"{original} Then {len(original) % 9 + 2} more are added."


def _settings(tmp_path, server, retries: int, timeout: float = 2.0):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_EVOLVE_KEY",
                                        "timeout": timeout, "max_retries": retries},
                                "models": {"evolve": "fake-evolver"}}))
    return path


def _openai_extra(seeds: int, *more: str) -> tuple[str, ...]:
    return ('evol_instruct.backend="openai"', f'evol_instruct.seeds="arith:{seeds}"', "evol_instruct.rounds=2",
            "evol_instruct.concurrency=16", "evol_instruct.cache=false", *more)


def _decided_ids(paths) -> list[str]:
    d = paths.stage("01_evolve")
    return [r["id"] for name in ("evolved.jsonl", "eliminated.jsonl") for r in read_jsonl(d / name)]


@pytest.mark.slow
def test_injected_429_500_and_timeouts_are_retried_or_recorded(tmp_path, monkeypatch):
    from rleif_kit.testing.fake_openai import FakeOpenAIServer
    from rleif_kit.core.settings import load_settings

    monkeypatch.setenv("RLEIF_EVOLVE_KEY", FAKE_KEY)
    with FakeOpenAIServer(responder=evolution_responder, fail_rate=0.2, retry_after_s=0.05, hang_s=5,
                          seed=3, require_key=FAKE_KEY) as server:
        # no client retries: every injected failure must land in failed.jsonl with its reason
        cfg, paths = _setup(tmp_path / "a", *_openai_extra(40))
        result = run_evolve(cfg, paths, load_settings(_settings(tmp_path, server, retries=0, timeout=0.5)),
                            progress=False)
        failed = list(read_jsonl(paths.stage("01_evolve") / "failed.jsonl"))
        assert result.failed > 0 and failed and all(r["error"] for r in failed)
        reasons = " ".join(r["error"] for r in failed).lower()
        assert "429" in reasons or "rate" in reasons
        assert "timeout" in reasons or "timed out" in reasons
        # with client retries the same faults are mostly absorbed (a request still fails when all 5
        # attempts do: 0.2^5 = 0.03% each), and a rerun retries what is left in failed.jsonl
        retrying = load_settings(_settings(tmp_path, server, retries=4, timeout=0.5))
        cfg2, paths2 = _setup(tmp_path / "b", *_openai_extra(40))
        result2 = run_evolve(cfg2, paths2, retrying, progress=False)
        assert result2.failed <= 2
        for cfg_, paths_ in ((cfg2, paths2), (cfg, paths)):  # rerun until every lineage is decided
            for _ in range(3):
                result = run_evolve(cfg_, paths_, retrying, progress=False)
                if result.kept + result.eliminated == 40 * 2:
                    break
            assert result.kept + result.eliminated == 40 * 2 and result.duplicate_ids == 0
        assert sorted(_decided_ids(paths)) == sorted(_decided_ids(paths2))
    for root in (tmp_path / "a", tmp_path / "b"):
        assert not [p for p in root.rglob("*") if p.is_file() and FAKE_KEY.encode() in p.read_bytes()]


@pytest.mark.slow
def test_sigkill_at_a_random_moment_then_rerun_gives_the_uninterrupted_ids(tmp_path, monkeypatch):
    import os
    import random
    import signal
    import subprocess
    import sys
    import time

    from rleif_kit.testing.fake_openai import FakeOpenAIServer
    from rleif_kit.core.settings import load_settings

    monkeypatch.setenv("RLEIF_EVOLVE_KEY", FAKE_KEY)
    with FakeOpenAIServer(responder=evolution_responder, latency_s=0.03) as server:
        settings = _settings(tmp_path, server, retries=2)
        cfg_ref, paths_ref = _setup(tmp_path / "ref", *_openai_extra(150))
        run_evolve(cfg_ref, paths_ref, load_settings(settings), progress=False)
        reference = sorted(_decided_ids(paths_ref))
        assert len(reference) == 150 * 2

        run_dir = tmp_path / "killed"
        cmd = [sys.executable, "-m", "rleif_kit.evolve", "--params", str(TINY_PARAMS), "--settings", str(settings)]
        for o in tiny_overrides(run_dir / "run", *_openai_extra(150)):
            cmd += ["--set", o]
        rng = random.Random(int(time.time()))
        for attempt in range(3):  # kill it up to three times at random moments, then let it finish
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(1.5, 4.0))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=300)
    cfg_k, paths_k = _setup(run_dir, *_openai_extra(150))
    ids = _decided_ids(paths_k)
    assert len(ids) == len(set(ids)), "a duplicate id after SIGKILL + resume"
    assert sorted(ids) == reference


def test_dry_run_estimates_requests_tokens_and_cost_without_sending(tmp_path, monkeypatch):
    from rleif_kit.evolve.stage import estimate_evolve
    from rleif_kit.core.settings import load_settings

    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text("".join(json.dumps({"instruction": f"Problem {i} " + "word " * 20}) + "\n" for i in range(10)))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"api": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "NOPE_KEY"},
                                    "models": {"evolve": "m"},
                                    "prices": {"m": {"input_per_million": 1.0, "output_per_million": 2.0}}}))
    cfg, paths = _setup(tmp_path, 'evol_instruct.backend="openai"', f'evol_instruct.seeds="{seeds}"',
                        "evol_instruct.rounds=2", "evol_instruct.with_answers=true", "evol_instruct.equality_judge=true")
    est = estimate_evolve(cfg, paths, load_settings(settings))
    assert est["requests"] == 10 * 2 * 3  # 10 seeds x 2 rounds x (evolve + judge + answer)
    assert est["cost_usd"] == pytest.approx(est["prompt_tokens"] * 1e-6 + est["output_tokens"] * 2e-6)


def test_fan_out_makes_sibling_sets_with_distinct_operators_and_resumes(tmp_path):
    from rleif_kit.evolve.fanout import run_fanout
    from rleif_kit.worlds.data import load_seeds

    cfg, paths = _setup(tmp_path, 'evol_instruct.backend="world"', 'evol_instruct.seeds="arith:30"')
    parents = list(load_seeds(cfg, paths))[:10]
    out = paths.stage("01_evolve") / "fanout.jsonl"
    records = run_fanout(cfg, out, parents, k=4, progress=False)
    assert len(records) == 10 * 4  # every sibling decided: kept or eliminated with its reason
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["sibling_group"], []).append(r)
    assert len(groups) == 10 and all(len({r["operator"] for r in g}) == 4 for g in groups.values())
    assert all(r["kept"] or r["reason"] for r in records)
    before = out.read_text()
    assert len(run_fanout(cfg, out, parents, k=4, progress=False)) == 40 and out.read_text() == before


def test_fan_out_returns_its_siblings_in_task_order_whatever_order_the_replies_arrive_in(tmp_path):
    """The IRM's pairs, split and training order follow the fan-out's list: an endpoint that answers the first
    request last (as a busy server may) must not move them. Replies here arrive in reverse task order."""
    import asyncio

    from rleif_kit.evolve.evolvers import WorldEvolver
    from rleif_kit.worlds import world_for
    from rleif_kit.evolve.fanout import fanout_tasks, run_fanout_async
    from rleif_kit.worlds.data import load_seeds

    cfg, paths = _setup(tmp_path, 'evol_instruct.backend="world"', 'evol_instruct.seeds="arith:30"')
    parents = list(load_seeds(cfg, paths))[:6]
    order = [t.id for t in fanout_tasks(parents, 3, cfg)]
    plain = WorldEvolver(cfg, world_for(cfg))

    class LateFirst:
        async def evolve(self, task):
            await asyncio.sleep(0.002 * (len(order) - order.index(task.id)))  # the first asked answers last
            return await plain.evolve(task)

    out = paths.stage("01_evolve") / "fanout.jsonl"
    records = asyncio.run(run_fanout_async(cfg, out, parents, 3, LateFirst(), progress=False))
    written = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert written[0] == order[-1]  # the file holds the arrival order ...
    assert [r["id"] for r in records] == order  # ... the list the IRM reads, the task order
    assert [r["id"] for r in asyncio.run(run_fanout_async(cfg, out, parents, 3, plain, progress=False))] == order


@pytest.mark.slow
def test_the_hf_backend_evolves_with_a_local_model(tmp_path, small_model_dir):
    cfg, paths = _setup(tmp_path, 'evol_instruct.backend="hf"', f'evol_instruct.hf_model="{small_model_dir}"',
                        'evol_instruct.seeds="arith:6"', "evol_instruct.rounds=1", "evol_instruct.max_new_tokens=12",
                        "evol_instruct.with_answers=false")
    result = run_evolve(cfg, paths, progress=False)
    # a random-init model writes noise: what matters is that every lineage got decided, with reasons
    assert result.kept + result.eliminated == 6 and result.failed == 0
    assert result.usage["completion_tokens"] > 0


def test_a_wrong_key_stops_the_run_without_burning_retry_attempts(tmp_path, monkeypatch, capsys):
    """A 401 stops the run at once and raises (issue 17: it used to exit 0 with "(rerun to continue)", and
    ``rleif run`` went on to 02 with nothing kept); ``rleif evolve`` exits 3 with one line."""
    from rleif_kit.core.exits import EndpointRejected
    from rleif_kit.core.settings import load_settings
    from rleif_kit.pipeline.cli import main
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    monkeypatch.setenv("RLEIF_EVOLVE_KEY", "sk-wrong-wrong-wrong-1234")
    with FakeOpenAIServer(responder=evolution_responder, require_key=FAKE_KEY) as server:
        cfg, paths = _setup(tmp_path, *_openai_extra(20))
        with pytest.raises(EndpointRejected, match="http 401") as rejected:
            run_evolve(cfg, paths, load_settings(_settings(tmp_path, server, retries=0)), progress=False)
        sent = len(server.requests)
        capsys.readouterr()
        code = main(["evolve", "params/tiny-cpu.toml", "--settings", str(tmp_path / "settings.json"),
                     *[a for o in tiny_overrides(tmp_path / "cli", *_openai_extra(20)) for a in ("--set", o)]])
    assert sent < 20  # stopped at the first answers, not after 20 x 3 failures
    assert not list(read_jsonl(paths.stage("01_evolve") / "failed.jsonl"))  # no attempt was spent
    assert json.loads((paths.stage("01_evolve") / "usage.json").read_text())["stopped_reason"].startswith(
        "endpoint rejected")  # what was done is written before the error
    assert "1234" not in str(rejected.value) and "rleif check-api" in str(rejected.value)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "it/s" not in line]
    assert code == 3 and len(err) == 1 and err[0].startswith("rleif evolve: error: endpoint rejected"), err


def test_a_budget_stop_exits_4_and_a_rerun_continues(tmp_path, monkeypatch, capsys):
    from rleif_kit.pipeline.cli import main
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    monkeypatch.setenv("RLEIF_EVOLVE_KEY", FAKE_KEY)
    monkeypatch.chdir(ROOT)
    with FakeOpenAIServer(responder=evolution_responder, require_key=FAKE_KEY) as server:
        settings = _settings(tmp_path, server, retries=0)
        args = ["evolve", "params/tiny-cpu.toml", "--settings", str(settings),
                *[a for o in tiny_overrides(tmp_path / "run", *_openai_extra(6), "evol_instruct.max_requests=8",
                                                  "evol_instruct.concurrency=2", "evol_instruct.cache=true")
                  for a in ("--set", o)]]
        first = main(args)
        out = capsys.readouterr().out
        assert first == 4 and "stopped: budget: max_requests reached (8)" in out and "rerun to continue" in out
        for _ in range(10):  # each rerun sends 8 more; the cache keeps what the stopped ones paid for
            if main(args) == 0:
                break
    usage = json.loads((tmp_path / "run" / "01_evolve" / "usage.json").read_text())
    assert usage["stopped_reason"] is None and usage["total"]["requests"] > 8  # every invocation counted


def test_an_answer_cut_off_at_max_tokens_is_a_failure_not_sft_data(tmp_path):
    """Issue 17: an answer with finish_reason "length" was kept (10 of 10), and "The answer is: 8" cut from 86
    passed into the SFT data. Now it fails with its reason, like an API error, and a rerun retries it."""
    import asyncio

    from rleif_kit.evolve.evolvers import LLMEvolver, Task
    from rleif_kit.worlds import world_for
    from rleif_kit.llm.base import ChatResult

    class Stub:
        model, stopped_reason = "stub", None

        async def acomplete(self, request):
            answer = request.key.endswith("#answer")
            text = "Step 1: 43 * 2 = 86. The answer is: 8" if answer else "Raj has 43 plums and doubles them. How many?"
            return ChatResult(request.key, text, None, "length" if answer else "stop", 10, 10, "stub", 0.0)

    cfg, _ = _setup(tmp_path, 'evol_instruct.backend="openai"', "evol_instruct.equality_judge=false")
    templates = world_for(cfg).evol_templates(cfg.resolve(cfg.evol_instruct.prompts_dir))
    operator = world_for(cfg).operators[0]
    evolver = LLMEvolver(cfg, Stub(), templates, judge=False)
    task = Task("s-r1", {"id": "s", "text": "Raj has 43 plums. How many?"}, 1, operator)
    outcome = asyncio.run(evolver.evolve(task))
    assert outcome.kind == "failed" and outcome.record["error"].startswith("answer cut off at max_tokens")
    assert "[evol_instruct] max_new_tokens" in outcome.record["error"]


def test_a_changed_evol_instruct_moves_the_old_records_aside_and_evolves_again(tmp_path, capsys):
    """Issue 17: ``rleif run`` printed "config changed: evol_instruct.temperature 0.9 -> 0.2", then sent 0 requests
    and marked 01 done with the old records. Records now carry what they were made under."""
    extra = ('evol_instruct.backend="world"', 'evol_instruct.seeds="arith:20"', "evol_instruct.rounds=1")
    cfg, paths = _setup(tmp_path, *extra)
    first = run_evolve(cfg, paths, progress=False)
    old = paths.evolved.read_text()
    cfg_more, _ = _setup(tmp_path, *extra[:2], "evol_instruct.rounds=2", "evol_instruct.concurrency=3")
    run_evolve(cfg_more, paths, progress=False)  # more rounds, other concurrency: the same records, extended
    assert paths.evolved.read_text().startswith(old) and not (paths.evolved.with_suffix(".stale.jsonl")).exists()
    capsys.readouterr()
    changed, _ = _setup(tmp_path, *extra, "evol_instruct.defect_rate=0.5")
    again = run_evolve(changed, paths, progress=False)
    note = capsys.readouterr().out
    assert "made with other evol_instruct.defect_rate, evol_instruct.rounds" not in note  # rounds is not a record key
    assert "records were made with other evol_instruct.defect_rate; moved to *.stale.jsonl, evolving again" in note
    stale = paths.evolved.with_suffix(".stale.jsonl")
    assert stale.exists() and stale.read_text().startswith(old)  # kept, not deleted
    assert again.kept + again.eliminated == 20  # evolved again from the seeds (one round)
    assert json.loads(paths.evolve_meta.read_text())["evol_instruct"]["defect_rate"] == 0.5
    assert first.kept + first.eliminated == 20


# ------------------------------------------------------------------ Evol-Instruct's other methods

def test_in_breadth_and_complicate_input_are_off_unless_named():
    """Weight 0 in every preset (no published recipe used them); named, they are drawn, the same per lineage."""
    from rleif_kit.evolve.operators import reweighted
    from rleif_kit.worlds.base import BREADTH_OPERATORS

    ops = get_world("math").operators
    assert {op.name for op in reweighted(ops)} == {op.name for op in MATH_OPERATORS}  # the six of WizardMath
    assert all(op.method for op in ops)  # each says which original method it implements
    on = reweighted(ops, ["in_breadth=1", "complicate_input=0.5"])
    draws = [choose_operator(f"seed-{i}", 1, on, 0.7).name for i in range(4000)]
    assert draws == [choose_operator(f"seed-{i}", 1, on, 0.7).name for i in range(4000)]  # per lineage, repeatable
    # in_breadth competes in both directions with weight 1 among 4 up (+0.5) and 2 down: it is drawn often
    counts = Counter(draws)
    assert counts["in_breadth"] > 400 and counts["complicate_input"] > 100
    assert {op.name for op in BREADTH_OPERATORS} <= {op.name for op in get_world("code").operators}
    with pytest.raises(ValueError, match="names deepen_more: not an operator of this world"):
        reweighted(ops, ["deepen_more=1"])
    fan = distinct_operators("seed-1", 1, on, 8, 0.7)  # all eight distinct operators of the math world
    assert sorted(op.name for op in fan) == sorted(op.name for op in on)


def test_an_operator_weight_the_world_lacks_is_a_config_error(tmp_path):
    from rleif_kit.core.config import ConfigError
    from rleif_kit.worlds import world_for

    cfg, _ = _setup(tmp_path, 'evol_instruct.operator_weights=["in_breadth=1"]')  # arith: its evolver has six
    with pytest.raises(ConfigError, match="operator_weights names in_breadth: not an operator of the arith world"):
        world_for(cfg)
    with pytest.raises(ConfigError, match="'operator=weight' entries"):
        _setup(tmp_path, 'evol_instruct.operator_weights=["in_breadth"]')


@pytest.mark.parametrize("answer, reason", [
    ("Step 1: 43 * 2 = 86. The answer is: 86", None),
    ("I'm sorry, but I can't solve this problem.", "answer_refusal"),
    ("86.", "answer_too_short"),
    ("... ?! the of and", "answer_empty"),
    ("```\n```", "answer_empty"),
])
def test_the_evolved_response_has_elimination_rules_of_its_own(answer, reason):
    from rleif_kit.evolve.elimination import answer_elimination_reason

    assert answer_elimination_reason(answer) == reason


def test_an_instruction_whose_answer_is_a_refusal_is_eliminated_with_the_reason(tmp_path):
    import asyncio

    from rleif_kit.evolve.evolvers import LLMEvolver, Task
    from rleif_kit.llm.base import ChatResult
    from rleif_kit.worlds import world_for

    class Stub:
        model, stopped_reason = "stub", None

        async def acomplete(self, request):
            answer = request.key.endswith("#answer")
            text = "I'm sorry, but I cannot help with that." if answer else "Raj has 43 plums and doubles them. How many?"
            return ChatResult(request.key, text, None, "stop", 10, 10, "stub", 0.0)

    cfg, _ = _setup(tmp_path, 'evol_instruct.backend="openai"', "evol_instruct.equality_judge=false")
    world = world_for(cfg)
    evolver = LLMEvolver(cfg, Stub(), world.evol_templates(cfg.resolve(cfg.evol_instruct.prompts_dir)), judge=False)
    outcome = asyncio.run(evolver.evolve(Task("s-r1", {"id": "s", "text": "Raj has 43 plums. How many?"}, 1,
                                              world.operators[0])))
    assert outcome.kind == "eliminated" and outcome.record["reason"] == "answer_refusal"
    assert outcome.record["answer"].startswith("I'm sorry")  # kept with the record: the reason can be read


def test_rleif_evolve_exits_4_when_every_request_failed_and_never_gives_up_on_a_down_endpoint(tmp_path, monkeypatch,
                                                                                              capsys):
    """Issue 30: ``rleif evolve`` exited 0 with every request failed. Now exit 4 with the cause and an example; a
    connection failure is the endpoint's, so it uses none of the ids' ``retry_failed`` attempts: after more reruns
    than that, the ids are still pending, none given up as api_error."""
    from loopback import unused_port
    from rleif_kit.pipeline.cli import main

    port = unused_port()
    monkeypatch.setenv("RLEIF_EVOLVE_KEY", FAKE_KEY)
    monkeypatch.chdir(ROOT)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"api": {"base_url": f"http://127.0.0.1:{port}/v1", "api_key_env": "RLEIF_EVOLVE_KEY",
                                            "timeout": 2, "max_retries": 0}, "models": {"evolve": "fake-evolver"}}))
    args = ["evolve", "params/tiny-cpu.toml", "--settings", str(settings),
            *[a for o in tiny_overrides(tmp_path / "run", *_openai_extra(4)) for a in ("--set", o)]]
    for _ in range(4):  # retry_failed is 3
        assert main(args) == 4
        out = capsys.readouterr().out
        assert "stopped: every one of 4 evolutions failed (mostly connection)" in out and "connection error" in out
    stage = tmp_path / "run" / "01_evolve"
    assert not list(read_jsonl(stage / "eliminated.jsonl"))  # none given up
    assert len(list(read_jsonl(stage / "failed.jsonl"))) == 16  # 4 ids x 4 runs, every one retried
    failures = json.loads((stage / "failures.json").read_text())
    assert failures["status"] == "stopped" and failures["causes"]["connection"]["count"] == 4


def test_evolutions_given_up_on_their_own_errors_fail_01_with_the_way_out(tmp_path, monkeypatch, capsys):
    """A request the server refuses on its own account (a 400) is given up after retry_failed attempts and no rerun
    asks it again; past the threshold that is a failure (exit 2) that says so and how to evolve again, not a
    "stopped, rerun" that would loop forever."""
    from rleif_kit.pipeline.cli import main
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    monkeypatch.setenv("RLEIF_EVOLVE_KEY", FAKE_KEY)
    monkeypatch.chdir(ROOT)
    with FakeOpenAIServer(responder=evolution_responder, fail_rate=1.0, fail_modes=("400",)) as server:
        settings = _settings(tmp_path, server, retries=0)
        args = ["evolve", "params/tiny-cpu.toml", "--settings", str(settings),
                *[a for o in tiny_overrides(tmp_path / "run", *_openai_extra(3), "evol_instruct.retry_failed=1")
                  for a in ("--set", o)]]
        assert main(args) == 4  # the first attempts failed: a rerun retries them
        assert "http 400: This request exceeds the model's context length (injected)." in capsys.readouterr().out
        assert main(args) == 2  # now given up
    err = capsys.readouterr().err
    assert "evolutions (given up after their attempts) failed" in err and "delete 01_evolve to evolve again" in err, err


def test_a_local_models_fingerprint_survives_a_copy_and_changes_with_its_weights(tmp_path):
    import os
    import shutil

    from rleif_kit.evolve.stage import _fingerprint

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 8}')
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 400)
    copy = tmp_path / "copy"
    shutil.copytree(model, copy, copy_function=shutil.copyfile)  # a copy with new mtimes
    os.utime(copy / "model.safetensors", (1, 1))
    assert _fingerprint(copy) == _fingerprint(model)
    (copy / "model.safetensors").write_bytes(bytes(reversed(range(256))) * 400)  # retrained: same size, new bytes
    assert _fingerprint(copy) != _fingerprint(model)

"""Evol-Instruct engine: operator draws, lineage, elimination records, resume and crash safety.

Offline: the arith backend, or a loopback OpenAI-compatible server with the real openai client.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.evolve import run_evolve
from rleif_kit.jsonl import read_jsonl
from rleif_kit.operators import (MATH_OPERATORS, CODE_OPERATORS, child_id, choose_operator, distinct_operators,
                                 load_templates)
from rleif_kit.setup import setup


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
    for domain in ("math", "code"):
        templates = load_templates(ROOT / "params" / "prompts" / "evol", domain)
        assert all("{instruction}" in t for t in templates.values())


def test_arith_evolution_records_lineage_and_reasons(tmp_path):
    cfg, paths = _setup(tmp_path, 'evol_instruct.backend="arith"', 'evol_instruct.seeds="arith:120"',
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
    extra = ('evol_instruct.backend="arith"', 'evol_instruct.seeds="arith:80"', "evol_instruct.rounds=2")
    cfg, paths = _setup(tmp_path / "a", *extra)
    run_evolve(cfg, paths, progress=False)
    first = (paths.stage("01_evolve") / "evolved.jsonl").read_text()
    run_evolve(cfg, paths, progress=False)  # resume: every id is already decided
    assert (paths.stage("01_evolve") / "evolved.jsonl").read_text() == first
    cfg2, paths2 = _setup(tmp_path / "b", *extra)
    run_evolve(cfg2, paths2, progress=False)
    second = (paths2.stage("01_evolve") / "evolved.jsonl").read_text()
    assert sorted(second.splitlines()) == sorted(first.splitlines())  # same records; completion order may differ

"""IRM preference pairs from fan-out sibling sets, judged programmatically on the arithmetic world."""

from __future__ import annotations

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.rewards.irm_data import pairs_from_scores, quality_pairs
from rleif_kit.worlds.arith.judge import FORMED, IN_RANGE, NO_LEAK, SOLVABLE, arith_quality


def arith_irm_pairs(fanout, min_steps=1, max_steps=5, seed=0):
    return quality_pairs(fanout, lambda r: arith_quality(r, min_steps, max_steps), seed=seed)
from rleif_kit.core.run_setup import setup

PROBLEM = {"ops": [{"kind": "add", "value": 2, "template": 0}] * 2}


def test_quality_orders_clean_over_unsolvable_over_leaked_over_malformed():
    clean = {"problem": PROBLEM, "answer": "Step 1: ...", "defect": None}
    unsolvable = {**clean, "answer": None, "defect": "unsolvable"}
    leaked = {**clean, "defect": "leaked_template"}
    malformed = {"problem": None, "answer": None, "defect": "malformed"}
    # 8 + 4 + 2 + 1 = 15; 8 + 4 + 0 + 1 = 13; 8 + 0 + 2 + 1 = 11; 0 + 4 + 0 + 0 = 4
    assert [arith_quality(r) for r in (clean, unsolvable, leaked, malformed)] == [
        FORMED + NO_LEAK + SOLVABLE + IN_RANGE, FORMED + NO_LEAK + IN_RANGE, FORMED + SOLVABLE + IN_RANGE, NO_LEAK]


def test_ties_give_no_pair_and_four_distinct_scores_give_six():
    sib = [{"id": c, "text": f"text {c}", "operator": "op" + c, "sibling_group": "g"} for c in "abcd"]
    assert len(pairs_from_scores(sib, [4, 3, 2, 1])) == 6  # 4 * 3 / 2
    pairs = pairs_from_scores(sib, [2, 2, 1, 1])  # a = b > c = d: a>c, a>d, b>c, b>d
    assert sorted((p["chosen_id"], p["rejected_id"]) for p in pairs) == [("a", "c"), ("a", "d"), ("b", "c"),
                                                                         ("b", "d")]


def test_a_pair_is_in_trl_preference_format_texts_in_chosen_and_rejected():
    sib = [{"id": "g-1", "text": "Add 3 and 4.", "operator": "deepen", "sibling_group": "g"},
           {"id": "g-2", "text": "Add 3 and.", "operator": "simplify", "sibling_group": "g"}]
    assert pairs_from_scores(sib, [1, 2]) == [{"group": "g", "chosen": "Add 3 and.", "rejected": "Add 3 and 4.",
                                               "chosen_id": "g-2", "rejected_id": "g-1", "operator": "simplify"}]


def test_pairs_from_a_real_fan_out_prefer_defect_free_variants(tmp_path):
    from rleif_kit.evolve.fanout import run_fanout
    from rleif_kit.worlds.data import load_seeds

    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", "evol_instruct.defect_rate=0.5"),
                       stage="04_reward_models", report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    fanout = run_fanout(cfg, paths.stage("01_evolve") / "fanout.jsonl", list(load_seeds(cfg, paths))[:60], k=4,
                        progress=False)
    by_id = {r["id"]: r for r in fanout}
    pairs = arith_irm_pairs(fanout, seed=1)
    assert len(pairs) > 30
    assert all(arith_quality(by_id[p["chosen_id"]]) > arith_quality(by_id[p["rejected_id"]]) for p in pairs)
    assert all(p["chosen"] == by_id[p["chosen_id"]]["text"] for p in pairs)
    assert len({p["operator"] for p in pairs}) >= 4  # balanced across operators, not one template

"""The notebooks' looks at the data: each view on small hand-made records (tmp_path JSONL files) against the rows
worked out by hand, and each with its stage's files missing — a short note, never a traceback.

On disk under tmp_path only; no network. The PRM view scores with the session's small tiny model (a new head).
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import ROOT, TINY_PARAMS, tiny_overrides

from rleif_kit.checks.verdict_table import named_values, verdict_table
from rleif_kit.core.config import load_config
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.tables import Note, text_table
from rleif_kit.core.verdict import Verdict
from rleif_kit.dedup.groups import duplicate_groups
from rleif_kit.evolve.lineages import CLIP, elimination_table, lineage_table
from rleif_kit.ppo.stage import rollout_table
from rleif_kit.ppo.trainer import Rollout, save_rollout_samples
from rleif_kit.rewards.examples import labelled_steps, prm_step_table, ranked_siblings, step_rows
from rleif_kit.rewards.reward import step_scores
from rleif_kit.rewards.rm_training import load_rm_for_training


def rows(view) -> list[dict]:
    """The table behind a view, NaN (how pandas holds a missing number) read back as None."""
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
            for r in view.data.to_dict("records")]


@pytest.fixture
def cfg_paths(tmp_path):
    cfg = load_config(str(TINY_PARAMS), tiny_overrides(tmp_path / "run"), workdir=ROOT)
    return cfg, RunPaths(cfg.output_dir)


# ------------------------------------------------------------------ the shared table

def test_a_note_shows_without_quotes_and_escapes_html():
    note = Note("a <b> note")
    assert repr(note) == "a <b> note"
    assert note._repr_html_() == "<p><em>a &lt;b&gt; note</em></p>"


def test_text_table_wraps_text_rounds_floats_and_dashes_missing_numbers():
    view = text_table([{"text": "a long line", "score": 0.12345}, {"text": "x < 5 <b>", "score": None}], wrap=("text",))
    html = view.to_html()
    assert "white-space: pre-wrap" in html
    assert ">0.123<" in html and ">—<" in html  # 3 places; the missing score is a dash, not 'nan'
    assert "x &lt; 5 &lt;b&gt;" in html  # a problem's text is shown, never read as HTML
    assert rows(view) == [{"text": "a long line", "score": 0.12345}, {"text": "x < 5 <b>", "score": None}]


# ------------------------------------------------------------------ 01: lineages and eliminations

SEEDS = [{"id": "s1", "root_id": "s1", "round": 0, "text": "Ann has 2 apples."},
         {"id": "s2", "root_id": "s2", "round": 0, "text": "Bo has 3 pears."},
         {"id": "s3", "root_id": "s3", "round": 0, "text": "Cy has 4 plums."}]


def evolved(rid, parent, root, round_, op, direction, text):
    return {"id": rid, "parent_id": parent, "root_id": root, "round": round_, "operator": op, "direction": direction,
            "text": text}


def write_evolve(paths):
    write_jsonl(paths.evolved, [
        evolved("s1-r1-add_constraint", "s1", "s1", 1, "add_constraint", "up", "Ann has 2 apples and 1 bag."),
        evolved("s1-r3-simplify", "s1-r1-add_constraint", "s1", 3, "simplify", "down", "Ann has 2 apples again."),
        evolved("s2-r1-deepen", "s2", "s2", 1, "deepen", "up", "Bo has 3 pears, then 4."),
        evolved("s3-r1-simplify", "s3", "s3", 1, "simplify", "down", "Cy has plums."),
        evolved("s3-r2-deepen", "s3-r1-simplify", "s3", 2, "deepen", "up", "Cy has plums, then more."),
        evolved("s3-r3-concretize", "s3-r2-deepen", "s3", 3, "concretize", "up", "Cy has 4 plums, then 9."),
    ])
    write_jsonl(paths.eliminated, [
        {**evolved("s1-r2-simplify", "s1-r1-add_constraint", "s1", 2, "simplify", "down", "Sorry, I cannot."),
         "reason": "refusal"},
        {**evolved("s2-r2-simplify", "s2-r1-deepen", "s2", 2, "simplify", "down", "x" * (CLIP + 100)),
         "reason": "refusal"},
        {**evolved("s2-r3-concretize", "s2-r1-deepen", "s2", 3, "concretize", "up", "Bo has #Given Prompt#"),
         "reason": "leaked_template"},
    ])


def test_lineages_seed_first_with_operators_and_the_eliminated_round(tmp_path):
    paths = RunPaths(tmp_path)
    write_evolve(paths)
    # s3 moved up and down in 3 kept rounds, s1 in 2 with an eliminated round between, s2 only up; one lineage
    # shown: the first with an eliminated round, s1
    assert rows(lineage_table(paths, SEEDS, n=1)) == [
        {"lineage": "s1", "round": 0, "operator": "seed", "direction": "—", "outcome": "seed",
         "text": "Ann has 2 apples."},
        {"lineage": "s1", "round": 1, "operator": "add_constraint", "direction": "up", "outcome": "kept",
         "text": "Ann has 2 apples and 1 bag."},
        {"lineage": "s1", "round": 2, "operator": "simplify", "direction": "down", "outcome": "eliminated: refusal",
         "text": "Sorry, I cannot."},
        {"lineage": "s1", "round": 3, "operator": "simplify", "direction": "down", "outcome": "kept",
         "text": "Ann has 2 apples again."},
    ]
    two = rows(lineage_table(paths, SEEDS, n=2))  # s3 (the furthest up and down), then the first with an elimination
    assert [(r["lineage"], r["round"]) for r in two] == [("s3", i) for i in range(4)] + [("s1", i) for i in range(4)]
    three = rows(lineage_table(paths, SEEDS, n=3))  # s3, s1, then s2: seed, r1 kept, r2 and r3 eliminated
    assert [r["lineage"] for r in three] == ["s3"] * 4 + ["s1"] * 4 + ["s2"] * 4


def test_one_elimination_per_reason_most_common_first_with_its_parent(tmp_path):
    paths = RunPaths(tmp_path)
    write_evolve(paths)
    assert rows(elimination_table(paths, SEEDS)) == [
        # refusal x2: the first by id is s1-r2-simplify, whose parent is s1's round-1 evolution
        {"reason": "refusal", "times": 2, "round": 2, "operator": "simplify", "parent": "Ann has 2 apples and 1 bag.",
         "evolved (eliminated)": "Sorry, I cannot."},
        {"reason": "leaked_template", "times": 1, "round": 3, "operator": "concretize",
         "parent": "Bo has 3 pears, then 4.", "evolved (eliminated)": "Bo has #Given Prompt#"},
    ]


def test_a_long_eliminated_text_is_clipped(tmp_path):
    paths = RunPaths(tmp_path)
    write_jsonl(paths.eliminated, [{**evolved("s2-r2-simplify", "s2", "s2", 2, "simplify", "down", "x" * 700),
                                    "reason": "refusal"}])
    shown = rows(elimination_table(paths, SEEDS))[0]["evolved (eliminated)"]
    assert shown == "x" * CLIP + " …" and CLIP == 600  # 600 of the 700 characters, and a mark that it goes on


def test_evolve_views_without_files_say_so(tmp_path):
    paths = RunPaths(tmp_path)
    note = lineage_table(paths, SEEDS)
    assert isinstance(note, Note) and "01_evolve/evolved.jsonl does not exist yet" in note and "01_evolve" in note
    assert isinstance(elimination_table(paths, SEEDS), Note)
    write_jsonl(paths.eliminated, [])
    assert elimination_table(paths, SEEDS) == "No evolution was eliminated (01_evolve/eliminated.jsonl is empty)."


# ------------------------------------------------------------------ 02: near-duplicate groups

POOL = [{"id": "a", "text": "Ann has 2 apples.", "operator": "seed"},
        {"id": "b", "text": "Ann has 5 apples.", "operator": "concretize"},
        {"id": "c", "text": "ann has 2 apples!", "operator": "simplify"},
        {"id": "d", "text": "Bo has 3 pears.", "operator": "seed"},
        {"id": "e", "text": "Bo has 7 pears.", "operator": "deepen"}]


def test_duplicate_groups_kept_first_then_duplicates_most_similar_first(tmp_path):
    paths = RunPaths(tmp_path)
    write_jsonl(paths.dedup_removed, [
        {"id": "b", "duplicate_of": "a", "similarity": 0.91, "layer": "semantic"},
        {"id": "e", "duplicate_of": "d", "similarity": 0.97, "layer": "semantic"},
        {"id": "c", "duplicate_of": "a", "similarity": 1.0, "layer": "exact"},
        {"id": "x", "duplicate_of": "gsm8k-1", "similarity": 1.0, "layer": "decontam_ngram"},  # not a group
    ])
    assert rows(duplicate_groups(paths, POOL, n=1)) == [  # a absorbed 2, d 1: a's group is the largest
        {"group": "a", "role": "kept", "id": "a", "operator": "seed", "layer": "—", "similarity": None,
         "text": "Ann has 2 apples."},
        {"group": "a", "role": "removed", "id": "c", "operator": "simplify", "layer": "exact", "similarity": 1.0,
         "text": "ann has 2 apples!"},
        {"group": "a", "role": "removed", "id": "b", "operator": "concretize", "layer": "semantic",
         "similarity": 0.91, "text": "Ann has 5 apples."},
    ]
    assert [r["id"] for r in rows(duplicate_groups(paths, POOL, n=2))] == ["a", "c", "b", "d", "e"]


def test_dedup_view_without_groups_says_so(tmp_path):
    paths = RunPaths(tmp_path)
    assert "02_dedup/removed.jsonl does not exist yet (written by 02_dedup)" in duplicate_groups(paths, POOL)
    write_jsonl(paths.dedup_removed, [{"id": "x", "duplicate_of": "gsm8k-1", "similarity": 1.0,
                                       "layer": "decontam_ngram"}])
    assert duplicate_groups(paths, POOL).startswith("No near-duplicates")


# ------------------------------------------------------------------ 04: a ranked sibling set, PRM step scores

def sibling(gid, op, ops, defect, answer="7", kept=True):
    r = {"id": f"{gid}-f1-{op}", "parent_id": gid, "root_id": gid, "round": 1, "operator": op, "text": f"{gid} {op}",
         "answer": answer, "problem": {"ops": [{}] * ops} if ops else None, "defect": defect, "sibling_group": gid,
         "kept": kept}
    return r if kept else {**r, "reason": defect}


def test_the_largest_arith_ranking_its_pairs_and_which_the_balance_kept(cfg_paths):
    cfg, paths = cfg_paths
    assert cfg.evol_instruct.backend == "world" and (cfg.arith.min_steps, cfg.arith.max_steps) == (1, 3)
    write_jsonl(paths.dedup_instructions, [{"id": "g", "text": "Ann has 2 apples."}, {"id": "h", "text": "Bo."}])
    write_jsonl(paths.irm_fanout, [
        sibling("g", "add_constraint", 2, None),  # formed 8 + no leak 4 + solvable 2 + 2 steps in [1, 3] 1 = 15
        sibling("g", "simplify", 2, "leaked_template"),  # 8 + 0 + 2 + 1 = 11
        sibling("g", "deepen", 0, "refusal", answer=None, kept=False),  # 0 + 4 + 0 + 0 steps not in range = 4
        sibling("h", "deepen", 1, None), sibling("h", "simplify", 1, "leaked_template"),  # 2 siblings: 1 pair
    ])
    kept = [{"group": "g", "chosen_id": "g-f1-add_constraint", "rejected_id": "g-f1-deepen"},
            {"group": "g", "chosen_id": "g-f1-simplify", "rejected_id": "g-f1-deepen"}]
    siblings, pairs = ranked_siblings(cfg, paths, kept)
    assert rows(siblings) == [
        {"rank": "parent", "id": "g", "operator": "—", "outcome": "—", "quality": "—", "text": "Ann has 2 apples."},
        {"rank": "1", "id": "g-f1-add_constraint", "operator": "add_constraint", "outcome": "kept", "quality": 15,
         "text": "g add_constraint"},
        {"rank": "2", "id": "g-f1-simplify", "operator": "simplify", "outcome": "kept", "quality": 11,
         "text": "g simplify"},
        {"rank": "3", "id": "g-f1-deepen", "operator": "deepen", "outcome": "eliminated: refusal", "quality": 4,
         "text": "g deepen"},
    ]
    # 3 siblings give 3 * 2 / 2 = 3 pairs, by the chosen one's rank, then the rejected one's
    assert rows(pairs) == [
        {"chosen (rank. operator)": "1. add_constraint", "rejected (rank. operator)": "2. simplify",
         "kept": "no: dropped by the operator balance"},
        {"chosen (rank. operator)": "1. add_constraint", "rejected (rank. operator)": "3. deepen",
         "kept": "yes"},
        {"chosen (rank. operator)": "2. simplify", "rejected (rank. operator)": "3. deepen",
         "kept": "yes"},
    ]
    # one sibling group: split_by_group holds out max(1, round(1 * 0.2)) = 1 group, this one
    assert siblings.caption.endswith("3 preference pairs, 2 kept by the operator balance; held out: the IRM's "
                                     "pairwise accuracy is measured on it")
    write_jsonl(paths.rm_rows("irm"), [{**kept[0], "split": "train"}])  # without pairs: the stage's saved ones
    siblings, pairs = ranked_siblings(cfg, paths)
    assert [r["kept"] for r in rows(pairs)] == ["no: dropped by the operator balance", "yes",
                                                "no: dropped by the operator balance"]
    assert siblings.caption.endswith("1 kept by the operator balance; the IRM trains on this set")
    siblings, pairs = ranked_siblings(cfg, paths, kept)  # given pairs are this run's: an older file does not win
    assert [r["kept"] for r in rows(pairs)] == ["no: dropped by the operator balance", "yes", "yes"]
    # a file from before the TRL names (ids in chosen / rejected): no "kept" column rather than a wrong one
    write_jsonl(paths.rm_rows("irm"), [{"group": "g", "chosen": "g-f1-add_constraint", "rejected": "g-f1-deepen",
                                        "chosen_text": "g add_constraint", "rejected_text": "g deepen",
                                        "split": "train"}])
    siblings, pairs = ranked_siblings(cfg, paths)
    assert "kept" not in pairs.data.columns and "kept by the operator balance" not in siblings.caption


def judged_cfg_paths(tmp_path):
    cfg = load_config(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", 'evol_instruct.backend="openai"'),
                      workdir=ROOT)
    return cfg, RunPaths(cfg.output_dir)


def test_a_judged_ranking_comes_from_irm_rankings(tmp_path):
    cfg, paths = judged_cfg_paths(tmp_path)
    write_jsonl(paths.irm_fanout, [sibling("g", "deepen", 1, None), sibling("g", "simplify", 1, None)])
    write_jsonl(paths.irm_rankings, [{"id": "g", "status": "ok", "label": ["g-f1-simplify", "g-f1-deepen"]}])
    siblings, pairs = ranked_siblings(cfg, paths)
    assert [(r["rank"], r["operator"]) for r in rows(siblings)] == [("parent", "—"), ("1", "simplify"), ("2", "deepen")]
    assert "quality" not in siblings.data.columns  # a judge's ranking has no score to show
    assert rows(pairs) == [{"chosen (rank. operator)": "1. simplify", "rejected (rank. operator)": "2. deepen"}]


def test_irm_view_without_a_fanout_or_a_ranking_says_so(tmp_path):
    cfg, paths = judged_cfg_paths(tmp_path)
    first, second = ranked_siblings(cfg, paths)
    assert isinstance(first, Note) and "04_reward_models/irm_fanout.jsonl does not exist yet" in first
    write_jsonl(paths.irm_fanout, [sibling("g", "deepen", 1, None), sibling("g", "simplify", 1, None)])
    assert ranked_siblings(cfg, paths)[0].startswith("No sibling set of 04_reward_models/irm_fanout.jsonl was ranked")


EXAMPLE = {"id": "q1-s0", "question": "Ann has 2 apples and 3 more, then twice that. How many?",
           "solution": "Step 1: 2 + 3 = 5. Step 2: 5 * 2 = 11. The answer is: 11", "labels": [True, False]}


def test_labelled_steps_counts_every_step_and_the_share_correct():
    assert labelled_steps([{"labels": [True, False]}, {"labels": [True]}]) == (3, pytest.approx(2 / 3))  # 2 of 3
    assert labelled_steps([]) == (0, 0.0)


def test_step_rows_question_with_ra_then_each_step_with_label_and_score():
    assert step_rows(EXAMPLE, [0.9, 0.2], "min") == [
        {"solution": "q1-s0", "step": "question", "text": EXAMPLE["question"], "label": "rA = min of the steps",
         "PRM score": 0.2},  # min(0.9, 0.2)
        {"solution": "q1-s0", "step": "1", "text": "Step 1: 2 + 3 = 5.", "label": "correct", "PRM score": 0.9},
        {"solution": "q1-s0", "step": "2", "text": "Step 2: 5 * 2 = 11. The answer is: 11", "label": "wrong",
         "PRM score": 0.2},  # the answer line belongs to the last step
    ]
    assert step_rows(EXAMPLE, [0.9, 0.2], "prod")[0]["PRM score"] == pytest.approx(0.18)  # 0.9 * 0.2


def test_prm_view_scores_the_wrong_solution_then_the_right_one_with_the_model(cfg_paths, small_model_dir):
    cfg, _ = cfg_paths
    model, tok = load_rm_for_training(str(small_model_dir), "token", cfg, False)
    right = {**EXAMPLE, "id": "q1-s1", "solution": "Step 1: 2 + 3 = 5. Step 2: 5 * 2 = 10. The answer is: 10",
             "labels": [True, True]}
    flagged = {**EXAMPLE, "id": "q1-s2", "solution": "ten", "labels": [True]}  # no steps: left out
    # one question: held out whole, so both solutions are on the held-out side
    view = prm_step_table(cfg, model, tok, [right, EXAMPLE, flagged])
    expected = step_scores(model, tok, [(EXAMPLE["question"], EXAMPLE["solution"]),
                                        (right["question"], right["solution"])], max_len=cfg.reward_model.rm_max_len)
    got = rows(view)
    assert [r["solution"] for r in got] == ["q1-s0"] * 3 + ["q1-s1"] * 3  # the one with a wrong step first
    assert [r["PRM score"] for r in got] == pytest.approx([min(expected[0]), *expected[0], min(expected[1]),
                                                           *expected[1]])
    assert "background-color" in view.to_html()  # the scores are coloured
    assert prm_step_table(cfg, model, tok, [flagged]) == ("No held-out solution with findable steps among the 1 "
                                                          "PRM examples: nothing to show.")
    assert isinstance(prm_step_table(cfg, model, tok, []), Note)


# ------------------------------------------------------------------ 05: rollouts before and after training

def rollout(responses):
    logp = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]])
    ref = torch.tensor([[-1.5, -2.0], [-0.5, -1.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    return Rollout(None, None, mask, 0, responses, logp=logp, ref_logp=ref)


BATCH = [{"id": "i1", "text": "Ann has 2 apples."}, {"id": "i2", "text": "Bo has 3 pears."}]
SCORES = {"rI": [0.8, 0.6], "rA": [0.5, 0.0], "reward": [0.4, 0.0], "flagged": [False, True]}  # r = rI * rA


def test_rollouts_of_the_first_and_last_step_with_their_kl(tmp_path):
    paths = RunPaths(tmp_path)
    for step in range(3):  # steps 0, 1, 2 of 3: only the first and the last are kept
        save_rollout_samples(paths.ppo_rollouts, step, 2, False, BATCH, rollout([f"resp {step}a", f"resp {step}b"]),
                             SCORES)
    saved = list(read_jsonl(paths.ppo_rollouts))
    assert [(r["step"], r["instruction_id"]) for r in saved] == [(0, "i1"), (0, "i2"), (2, "i1"), (2, "i2")]
    # KL per sequence: row 1 (-1 + 1.5) + (-2 + 2) = 0.5; row 2 (-0.5 + 0.5) = 0, its padding not counted
    assert [r["kl"] for r in saved[:2]] == [0.5, 0.0]
    save_rollout_samples(paths.ppo_rollouts, 2, 2, False, BATCH, rollout(["again 2a", "b"]), SCORES, n=1)
    assert [(r["step"], r["response"]) for r in read_jsonl(paths.ppo_rollouts)] == [
        (0, "resp 0a"), (0, "resp 0b"), (2, "again 2a")]  # a redone step (a resumed run) replaces its rows
    save_rollout_samples(paths.ppo_rollouts, 0, 2, False, BATCH, rollout(["again a", "again b"]), SCORES)
    assert [(r["step"], r["response"]) for r in read_jsonl(paths.ppo_rollouts)] == [
        (0, "again a"), (0, "again b")]  # step 0: a fresh training, the earlier run's rows go
    save_rollout_samples(paths.ppo_rollouts, 1, 2, True, BATCH, rollout(["stopped", "b"]), SCORES, n=1)
    table = rows(rollout_table(paths))
    assert [table[0], table[-1]] == [  # the step the KL guard stopped at is kept too
        {"when": "step 0: before training (the SFT policy)", "question": "Ann has 2 apples.", "response": "again a",
         "rI": 0.8, "rA": 0.5, "r": 0.4, "KL": 0.5},
        {"when": "step 1: after 1 updates", "question": "Ann has 2 apples.", "response": "stopped",
         "rI": 0.8, "rA": 0.5, "r": 0.4, "KL": 0.5},
    ]
    assert table[1]["response"] == "again b\n(no steps found: rA = 0)"


def test_rollouts_carry_every_term_and_the_view_shows_those_of_the_formula(tmp_path):
    """A code run's r = rI * rV: rV is in the record and the table, the PRM's unused rA is neither a number in the
    record nor a column (it was shown in green beside r = 0), and no "rA = 0" note is added to a response."""
    paths = RunPaths(tmp_path)
    scores = {**SCORES, "rV": [0.5, 0.0], "reward": [0.4, 0.0]}  # r = rI * rV
    save_rollout_samples(paths.ppo_rollouts, 0, 2, False, BATCH, rollout(["a", "b"]), scores,
                         terms=frozenset({"rI", "rV"}))
    saved = list(read_jsonl(paths.ppo_rollouts))
    assert [(r["rI"], r["rA"], r["rV"], r["rF"], r["r"]) for r in saved] == [(0.8, None, 0.5, None, 0.4),
                                                                          (0.6, None, 0.0, None, 0.0)]
    table = rows(rollout_table(paths))
    assert list(table[0]) == ["when", "question", "response", "rI", "rV", "r", "KL"]
    assert table[1]["response"] == "b"  # flagged, but rA is no term of this reward


def test_at_the_step_level_the_rollouts_show_each_steps_score_and_part_of_r(tmp_path):
    """``[ppo] reward_granularity = "step"``: the kept rollouts carry the step scores and parts, the table a line per
    step; at the solution level (above) neither is a column."""
    paths = RunPaths(tmp_path)
    scores = {**SCORES, "step_scores": [[0.9, 0.5], []], "step_credits": [[0.72, -0.32], []]}  # rI 0.8, min
    save_rollout_samples(paths.ppo_rollouts, 0, 2, False, BATCH, rollout(["a", "b"]), scores)
    saved = list(read_jsonl(paths.ppo_rollouts))
    assert [(r["step_scores"], r["step_credits"]) for r in saved] == [([0.9, 0.5], [0.72, -0.32]), ([], [])]
    table = rows(rollout_table(paths))
    assert list(table[0]) == ["when", "question", "response", "rI", "rA", "r", "steps: score → part of r", "KL"]
    assert table[0]["steps: score → part of r"] == "1: 0.90 → +0.720\n2: 0.50 → -0.320"
    assert table[1]["steps: score → part of r"] == "no steps: all of r at the end"


def test_the_cards_example_is_an_instruction_the_trained_policy_got_right(tmp_path):
    from rleif_kit.ppo.stage import card_example

    paths = RunPaths(tmp_path)
    assert card_example(paths) is None  # nothing yet: the card's own example
    right_first = {**SCORES, "correct": [True, False]}
    save_rollout_samples(paths.ppo_rollouts, 0, 2, False, BATCH, rollout(["a", "b"]), right_first)
    right_second = {**SCORES, "correct": [False, True]}
    save_rollout_samples(paths.ppo_rollouts, 2, 2, False, BATCH, rollout(["a", "b"]), right_second)
    assert [r["correct"] for r in read_jsonl(paths.ppo_rollouts)] == [True, False, False, True]
    assert card_example(paths) == "Bo has 3 pears."  # the last step's right one, not the first step's


def test_rollout_view_without_rollouts_says_so(tmp_path):
    paths = RunPaths(tmp_path)
    assert rollout_table(paths) == "No rollouts to show: 05_ppo/rollouts.jsonl does not exist yet (written by 05_ppo)."
    write_jsonl(paths.ppo_rollouts, [])
    assert rollout_table(paths) == "05_ppo/rollouts.jsonl is empty: PPO saved no rollout."


# ------------------------------------------------------------------ 07: the verdict table

def test_verdicts_as_a_table_of_named_values_with_the_status_coloured():
    verdicts = [Verdict("irm_distribution", "ok", {"mean": 0.51234, "std": 0.2}, {"mean": [0.4, 0.7], "std_min": 0.1},
                        "", "04_reward_models/irm"),
                Verdict("kl_blowup", "fail", {"max_kl": 12.0}, {"warn": 5, "fail": 10.0}, "lower lr")]
    view = verdict_table(verdicts)
    assert rows(view) == [
        {"check": "irm_distribution", "status": "ok", "measured": "mean = 0.512\nstd = 0.2",
         "threshold": "mean = [0.4, 0.7]\nstd_min = 0.1", "advice": "—", "source": "04_reward_models/irm"},
        {"check": "kl_blowup", "status": "fail", "measured": "max_kl = 12", "threshold": "warn = 5\nfail = 10",
         "advice": "lower lr", "source": "—"},
    ]
    html = view.to_html()
    assert "#2e7d32" in html and "#c62828" in html  # ok green, fail red
    assert named_values({}) == "—" and named_values({"band": {"low": 0.2, "high": 0.4}}) == "band = low 0.2, high 0.4"
    assert named_values({"failed": 0, "by_cause": {}}) == "failed = 0\nby_cause = none"
    assert verdict_table([]) == "No check ran: none of the artifacts the checks read exists yet."


# ------------------------------------------------------------------ every view speaks the run's world (issue 43)

CODE_PARAMS = ROOT / "params" / "tiny-code.toml"
PROGRAM = "```python\ndef f(x):\n    y = x + 1\n    return y < 2\n```"


@pytest.fixture
def code_cfg_paths(tmp_path):
    cfg = load_config(str(CODE_PARAMS), tiny_overrides(tmp_path / "run"), workdir=ROOT)
    return cfg, RunPaths(cfg.output_dir)


def test_a_code_runs_headers_give_its_formula_and_words_never_arithmetic(code_cfg_paths, cfg_paths):
    from rleif_kit.worlds.intros import STAGE_LINES, stage_intro

    code, math = code_cfg_paths[0], cfg_paths[0]
    for stage in STAGE_LINES:
        text = stage_intro(code, stage)
        assert "arithmetic" not in text.lower() and "rI · rA" not in text and "The answer is" not in text, stage
        assert text.startswith(f"### {stage[:2]} · ") and "`tiny_code`" in text
    ppo = stage_intro(code, "05_ppo")
    assert "**This run's reward:** `r = rI · rV`" in ppo
    assert "- **rV** (verifier reward): the task's tests, run in the sandbox (the share passed)" in ppo
    assert "held-out tasks by pass@1" in ppo
    assert "does not use the PRM (no rA in `r = rI · rV`)" in stage_intro(code, "04_reward_models")
    assert "tiny-code judge" in stage_intro(code, "04_reward_models")
    # the arithmetic preset keeps its words: they come from its world and its formula
    assert "`r = rI · rA`" in stage_intro(math, "05_ppo") and "held-out problems by accuracy" in stage_intro(
        math, "05_ppo")
    assert "the arithmetic judge" in stage_intro(math, "04_reward_models")
    assert "does not use the PRM" not in stage_intro(math, "04_reward_models")


def test_a_code_column_keeps_every_space_escapes_html_and_is_monospace():
    html = text_table([{"program": PROGRAM, "note": "a < b"}], code=("program",)).to_html()
    assert "    y = x + 1" in html and "y &lt; 2" in html and "a &lt; b" in html  # nothing unescaped, no space lost
    assert "monospace" in html and "pre-wrap" in html
    assert "monospace" not in text_table([{"program": PROGRAM}], wrap=("program",)).to_html()


def test_a_code_solutions_steps_are_its_statement_blocks_and_a_fence_line_is_no_step(code_cfg_paths):
    from rleif_kit.worlds import world_for

    world = world_for(code_cfg_paths[0])
    example = {"id": "t1-s0", "question": "Write f.", "solution": PROGRAM, "labels": [True, False]}
    got = step_rows(example, [0.9, 0.3], "min", world)
    # two statements in the body: the def line (and the fence before it) belong to the first, the closing fence
    # to the last; the old split (one step per line) showed "```python" as step 1
    assert [r["step"] for r in got] == ["question", "1", "2"]
    assert got[1]["text"] == "```python\ndef f(x):\n    y = x + 1" and got[2]["text"] == "return y < 2\n```"
    lines = {**example, "solution": "```python\nprint(1)\n```", "labels": [True, True, True]}
    assert [r["text"] for r in step_rows(lines, [0.5, 0.6, 0.7], "min")][1:] == ["print(1)"]  # the fences dropped


def test_the_prm_dataset_cuts_steps_as_the_world_does(code_cfg_paths):
    from rleif_kit.rewards.rm_datasets import step_rows as dataset_rows
    from rleif_kit.worlds import world_for

    example = {"id": "t1-s0", "question": "Write f.", "solution": PROGRAM, "labels": [True, False]}
    row = dataset_rows([example], [], world_for(code_cfg_paths[0]))[0]
    assert row["completions"] == ["```python\ndef f(x):\n    y = x + 1", "return y < 2\n```"]  # one per label


def test_before_and_after_picks_the_item_training_turned_right():
    from rleif_kit.worlds.before_after import pick_before_after

    before = [{"id": "a", "correct": False}, {"id": "b", "correct": False}, {"id": "c", "correct": True}]
    after = [{"id": "c", "correct": True}, {"id": "a", "correct": False}, {"id": "b", "correct": True}]
    assert pick_before_after(before, after) == (before[1], after[2])  # b: wrong before, right after
    assert pick_before_after(before[2:], after[:1]) == (before[2], after[0])  # none turned: the first right after
    assert pick_before_after(before[:1], after[1:2]) == (before[0], after[1])  # nothing right: the first
    assert pick_before_after(before[:1], after[:1]) is None  # no item in both


def test_sft_before_and_after_is_one_row_with_both_answers_as_code(code_cfg_paths):
    from rleif_kit.sft.stage import before_after

    cfg, paths = code_cfg_paths
    assert "eval_before.jsonl does not exist" in before_after(cfg, paths)
    write_jsonl(paths.sft_heldout("before"), [{"id": "tiny_code-heldout-00000", "response": "??", "correct": False}])
    write_jsonl(paths.sft_heldout("after"), [{"id": "tiny_code-heldout-00000", "response": PROGRAM,
                                             "correct": True}])
    view = before_after(cfg, paths)
    got = rows(view)
    assert len(got) == 1 and list(got[0]) == ["task", "untrained", "untrained: passed?", "after SFT",
                                              "after SFT: passed?"]
    assert got[0]["task"].startswith("Write a Python function")  # the held-out task's own text
    assert (got[0]["untrained"], got[0]["untrained: passed?"], got[0]["after SFT: passed?"]) == (
        "??", "not passed", "passed")
    assert "monospace" in view.to_html() and "y &lt; 2" in view.to_html()


def test_ppo_before_and_after_reads_the_ab_answers_and_the_ab_line_uses_the_worlds_words(code_cfg_paths):
    from rleif_kit.ppo.stage import ab_summary, before_after

    cfg, paths = code_cfg_paths
    write_jsonl(paths.ppo_heldout("sft"), [{"id": "tiny_code-heldout-00001", "response": "x", "correct": True}])
    write_jsonl(paths.ppo_heldout("ppo"), [{"id": "tiny_code-heldout-00001", "response": "y", "correct": True}])
    got = rows(before_after(cfg, paths))
    assert len(got) == 1 and (got[0]["SFT policy"], got[0]["PPO policy"]) == ("x", "y")
    assert ab_summary(cfg, {"sft_accuracy": 0.4, "ppo_accuracy": 0.45, "n": 300}) == (
        "SFT 40.0%, PPO 45.0% pass@1 on 300 held-out tasks (greedy)")


def test_a_code_runs_rollouts_show_the_program_as_code(tmp_path, code_cfg_paths):
    paths = RunPaths(tmp_path)
    save_rollout_samples(paths.ppo_rollouts, 0, 2, False, BATCH, rollout([PROGRAM, "b"]),
                         {**SCORES, "rV": [1.0, 0.0]}, terms=frozenset({"rI", "rV"}))
    assert "monospace" in rollout_table(paths, code_cfg_paths[0]).to_html()
    assert "monospace" not in rollout_table(paths).to_html()  # without the run's config: as before


def test_the_irm_caption_names_the_runs_judge(code_cfg_paths):
    cfg, paths = code_cfg_paths
    write_jsonl(paths.dedup_instructions, [{"id": "g", "text": "Write f."}])
    write_jsonl(paths.irm_fanout, [sibling("g", "add_requirement", 2, None), sibling("g", "simplify", 2, None)])
    siblings, _ = ranked_siblings(cfg, paths)
    assert "ranked by the tiny-code judge (quality = well formed 8" in siblings.caption
    assert "arithmetic" not in siblings.caption


def test_one_example_of_each_reward_models_training_set(code_cfg_paths):
    from rleif_kit.rewards.examples import reward_example

    cfg, paths = code_cfg_paths
    assert all("does not exist yet" in v for v in reward_example(cfg, paths))
    write_jsonl(paths.rm_rows("irm"), [
        {"chosen": "held out", "rejected": "-", "chosen_id": "h-a", "split": "heldout"},
        {"chosen": "Write f(x).", "rejected": "Write.", "chosen_id": "t-a", "split": "train"}])
    write_jsonl(paths.rm_rows("prm"), [
        {"prompt": "q0", "completions": ["a", "b"], "labels": [True, True], "source": "verifier"},
        {"prompt": "q1", "completions": ["```python\ndef f(x):\n    y = x + 1", "return y < 2\n```"],
         "labels": [True, False], "source": "verifier"}])
    pair, steps = reward_example(cfg, paths)
    assert [r["instruction"] for r in rows(pair)] == ["Write f(x).", "Write."]  # the first train pair
    assert [(r["step"], r["label"]) for r in rows(steps)] == [("question", "—"), ("1", "correct"), ("2", "wrong")]
    assert "monospace" in steps.to_html()


def test_one_seed_and_its_first_evolution(tmp_path):
    from rleif_kit.evolve.lineages import evolve_example

    paths = RunPaths(tmp_path)
    assert "does not exist yet" in evolve_example(paths, SEEDS)
    write_evolve(paths)
    got = rows(evolve_example(paths, SEEDS))
    assert [(r[""], r["id"], r["operator"], r["text"]) for r in got] == [
        ("seed (in)", "s1", "—", "Ann has 2 apples."),
        ("evolved (out)", "s1-r1-add_constraint", "add_constraint (up)", "Ann has 2 apples and 1 bag.")]


def test_one_kept_and_one_removed_item_with_why(tmp_path):
    from rleif_kit.dedup.groups import dedup_example

    paths = RunPaths(tmp_path)
    write_jsonl(paths.dedup_removed, [
        {"id": "x", "duplicate_of": "k", "similarity": 1.0, "layer": "exact"},
        {"id": "y", "duplicate_of": "k", "similarity": 0.91, "layer": "semantic"},
        {"id": "z", "duplicate_of": "k", "similarity": 0.97, "layer": "semantic"},
        {"id": "e", "duplicate_of": "gsm8k-1", "similarity": 1.0, "layer": "decontam_ngram"}])
    pool = [{"id": "k", "text": "Ann has 2 apples."}, {"id": "z", "text": "Ann owns 2 apples."}]
    got = rows(dedup_example(paths, pool))
    # the semantic one closest under an exact copy: z (0.97)
    assert [(r[""], r["id"], r["text"]) for r in got] == [("kept", "k", "Ann has 2 apples."),
                                                         ("removed", "z", "Ann owns 2 apples.")]
    assert got[1]["why"] == "semantic layer: cosine similarity 0.970 to the kept one, at or above τ"


def test_one_probe_worked_through_with_how_the_term_moved():
    from rleif_kit.diagnostics.stage import Health, one_probe, probe_example

    edits = {"never": (lambda s: None, "down"), "wrong_answer": (lambda s: s.replace("10", "11"), "down")}
    solutions = [{"text": "Ann has 5, twice that?", "solution": "Step 1: 5 * 2 = 10. The answer is: 10"}]
    score = lambda records, sols: [1.0 if s.endswith("10") else 0.25 for s in sols]  # noqa: E731
    example = one_probe(score, "rV (the verifier)", solutions, edits)
    assert (example["edit"], example["before"], example["after"]) == ("wrong_answer", 1.0, 0.25)
    view = probe_example(Health(example=example))
    assert [r["rV (the verifier)"] for r in rows(view)] == [1.0, 0.25]
    assert view.caption.endswith("rV (the verifier) moved -0.750")  # 0.25 - 1.0
    assert isinstance(probe_example(Health()), Note)
    assert one_probe(score, "rV", solutions, {"never": edits["never"]}) is None


def test_the_healthy_band_only_on_the_panels_a_check_holds_to_it():
    from rleif_kit.core.plots import plot_score_histograms

    fig = plot_score_histograms({"IRM rI": [0.5, 0.6], "rV (sampled solutions)": [1.0, 0.0]}, (0.4, 0.85),
                                banded=["IRM rI"])
    labels = [[h for h in ax.get_legend_handles_labels()[1] if h.startswith("healthy")] for ax in fig.axes]
    assert labels == [["healthy mean 0.4–0.85"], []]
    fig = plot_score_histograms({"IRM rI": [0.5], "PRM rA": [0.5]}, (0.4, 0.7))  # no banded given: every panel
    assert all(any(h.startswith("healthy") for h in ax.get_legend_handles_labels()[1]) for ax in fig.axes)


def test_the_sft_bars_title_uses_the_runs_score_and_items(code_cfg_paths, cfg_paths):
    from rleif_kit.sft.stage import heldout_title

    assert heldout_title(code_cfg_paths[0]) == "Held-out pass@1 on tiny_code tasks (greedy)"
    assert heldout_title(cfg_paths[0]) == "Held-out accuracy on arith problems (greedy)"


def test_the_sft_bars_are_labelled_with_the_runs_score(code_cfg_paths, cfg_paths):
    from rleif_kit.sft.stage import SFTResult, plot_heldout

    result = SFTResult(None, "lora", 0, 0, 0.0, accuracy_before=0.1, accuracy_after=0.6)
    ax = plot_heldout(code_cfg_paths[0], result).axes[0]
    assert (ax.get_ylabel(), ax.get_title()) == ("pass@1 (%)", "Held-out pass@1 on tiny_code tasks (greedy)")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["untrained", "after SFT"]
    assert plot_heldout(cfg_paths[0], result).axes[0].get_ylabel() == "accuracy (%)"


def test_one_seed_in_and_the_prompt_it_becomes(code_cfg_paths):
    from rleif_kit.prepare.stage import setup_example
    from rleif_kit.worlds import world_for
    from rleif_kit.worlds.data import load_seeds

    cfg, paths = code_cfg_paths
    seed = next(iter(load_seeds(cfg, paths)))
    view = setup_example(cfg, paths)
    got = rows(view)
    assert [r[""] for r in got] == ["a seed task (in)", "the prompt the model reads (out)", "its reference answer"]
    assert got[0]["text"] == seed["text"] and got[1]["text"] == world_for(cfg).prompt_for(seed)
    assert got[2]["text"].startswith("```python") and "monospace" in view.to_html()

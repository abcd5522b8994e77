"""Hard negatives for the PRM (issue 29): the randomised edits worked by hand with a scripted draw, and the
examples they become, labelled by the arithmetic world's step verifier. Pure logic, no model."""

from __future__ import annotations

from rleif_kit.rewards.hard_negatives import hard_negative_examples
from rleif_kit.worlds import get_world
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.counterfactuals import HARD_NEGATIVES, slip_answer, slip_step

GOLD = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 6"


class Draws:
    """A stand-in for random.Random that returns what the test scripts: randrange -> step, choice -> slip size,
    random -> the carry coin."""

    def __init__(self, step: int = 0, size: int = 1, coin: float = 0.9):
        self.step, self.size, self.coin = step, size, coin

    def randrange(self, n: int) -> int:
        assert 0 <= self.step < n
        return self.step

    def choice(self, options):
        assert self.size in options
        return self.size

    def random(self) -> float:
        return self.coin


def test_slip_step_changes_one_result_and_carries_a_last_step_slip_to_the_answer_on_the_coin():
    assert slip_step(GOLD, Draws(step=0, size=2)) == "Step 1: 3 + 5 = 10. Step 2: 8 - 2 = 6. The answer is: 6"
    assert slip_step(GOLD, Draws(step=1, size=-1, coin=0.9)) == "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 5. The answer is: 6"
    assert slip_step(GOLD, Draws(step=1, size=-1, coin=0.1)) == "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 5. The answer is: 5"
    assert slip_step("Step 1: 3 - 3 = 0. The answer is: 0", Draws(step=0, size=-2)) is None  # no negative counts
    assert slip_step("The answer is: 6", Draws()) is None  # no steps


def test_slip_answer_and_the_fixed_edits():
    assert slip_answer(GOLD, Draws(size=3)) == "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 9"
    assert HARD_NEGATIVES["stop_early"](GOLD, Draws()) == "Step 1: 3 + 5 = 8. The answer is: 8"
    assert HARD_NEGATIVES["no_answer"](GOLD, Draws()) == "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6."


def test_each_instruction_gives_its_gold_and_one_edit_labelled_by_the_verifier():
    world = get_world("arith")
    pool = [{"id": p["id"], "text": p["question"], "answer": p["solution"], "problem": p["problem"]}
            for p in arith.generate_problems(40, seed=3) if p["n_steps"] >= 2]
    examples = hard_negative_examples(pool, world, n=20, seed=0)
    gold = [e for e in examples if e["source"] == "hard_negative:gold"]
    edits = [e for e in examples if e["source"] != "hard_negative:gold"]
    assert len(gold) == 20 and all(all(e["labels"]) for e in gold)  # every seed answer is right
    assert 15 <= len(edits) <= 20 and all(not all(e["labels"]) for e in edits)  # a slip may land out of range
    assert {e["source"] for e in edits} == {f"hard_negative:{k}" for k in HARD_NEGATIVES}  # the kinds in turn
    stops = [e for e in edits if e["source"] == "hard_negative:stop_early"]
    # an early stop's steps are right, its answer is not: only the last label (the answer's step) is wrong
    assert all(e["labels"][:-1] == [True] * (len(e["labels"]) - 1) and e["labels"][-1] is False for e in stops)
    assert {e["instruction_id"] for e in examples} <= {r["id"] for r in pool}


def test_a_record_without_a_right_answer_gives_nothing():
    world = get_world("arith")
    p = arith.generate_problems(1, seed=5)[0]
    wrong = {"id": "x", "text": p["question"], "answer": "Step 1: 1 + 1 = 3. The answer is: 3", "problem": p["problem"]}
    assert hard_negative_examples([wrong, {"id": "y", "text": "q", "answer": ""}], world, n=5, seed=0) == []


def test_stage_04_without_a_notebook_trains_the_prm_on_the_hard_negatives_too(tmp_path, monkeypatch):
    """``python -m rleif_kit.rewards`` (and accelerate's launch of it) writes the PRM's rows as the notebook passes
    them: the sampled solutions and the train-only extras; the checks after training read the sampled ones only."""
    import dataclasses
    from types import SimpleNamespace

    import rleif_kit.rewards.__main__ as cli
    from rleif_kit.core.paths import RunPaths
    from rleif_kit.rewards import stage

    @dataclasses.dataclass
    class Result:
        heldout_accuracy: float = 1.0
        heldout_pairs: int = 1
        step_accuracy: float = 1.0
        step_auc: float = 1.0
        heldout_steps: int = 1

    paths = RunPaths(tmp_path / "run")
    paths.rm_rows("prm").parent.mkdir(parents=True)
    sampled = [{"question": "q1", "solution": "Step 1: 1 + 1 = 2. The answer is: 2", "labels": [True]}]
    extra = [{"question": "q2", "solution": "Step 1: 2 + 2 = 5. The answer is: 5", "labels": [False],
              "train_only": True}]
    trained, checked = {}, []

    def train(which):
        def fn(cfg, paths, rows):
            trained[which] = rows
            return object(), object(), Result()
        return fn

    monkeypatch.setattr(cli, "setup", lambda params, overrides, stage: (SimpleNamespace(), paths))
    monkeypatch.setattr(stage, "build_irm_pairs", lambda cfg, paths, settings, progress: SimpleNamespace(
        pairs=[{"p": 1}]))
    monkeypatch.setattr(stage, "build_prm_examples", lambda cfg, paths, settings, progress: SimpleNamespace(
        examples=sampled, extra=extra))
    monkeypatch.setattr(stage, "train_irm", train("irm"))
    monkeypatch.setattr(stage, "train_prm", train("prm"))
    monkeypatch.setattr(stage, "score_sample", lambda cfg, paths, irm, prm, examples: checked.append(examples)
                        or SimpleNamespace(verdicts=[]))
    monkeypatch.setattr(stage, "format_verdicts", lambda verdicts: "")
    cli.main(["--params", "unused.toml"])
    assert trained["prm"] == sampled + extra  # train_prm writes them, with their split, to prm_steps.jsonl
    assert checked == [sampled]

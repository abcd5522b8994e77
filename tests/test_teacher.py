"""The loopback teacher: it answers every kind of request the kit sends, in real models' loose formats, and the
kit's parsers read each format right or refuse it — never a wrong label, ranking or verdict. No model, no network
beyond loopback."""

from __future__ import annotations

import random

import pytest

from conftest import ROOT
from rleif_kit.evolve.elimination import clean_evolved_text, parse_equality
from rleif_kit.rewards.judges import format_variants, parse_ranking, parse_step_labels
from rleif_kit.testing import teacher_styles as styles
from rleif_kit.testing.teacher import Teacher, World, write_data
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.math.answers import check_gsm8k
from rleif_kit.worlds.math.data import load_gsm8k, load_math

PROMPTS = ROOT / "params" / "prompts"


def _ask(teacher, prompt, max_tokens=None):
    return teacher.reply({"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens})


@pytest.mark.parametrize("seed", range(200))
def test_step_labels_in_every_style_are_read_right_or_refused(seed):
    rng = random.Random(seed)
    labels = [rng.random() < 0.6 for _ in range(rng.randint(1, 5))]
    text = styles.step_labels(labels, random.Random(seed + 1), noise=1.0)
    assert parse_step_labels(text, len(labels)) in (labels, None), text


@pytest.mark.parametrize("seed", range(150))
def test_rankings_in_every_style_are_read_right_or_refused(seed):
    rng = random.Random(seed)
    order = rng.sample("ABCD", rng.randint(2, 4))
    ids = sorted(order)
    got = parse_ranking(styles.ranking(order, random.Random(seed + 1), noise=1.0), ids)
    assert got in (order, None)


@pytest.mark.parametrize("same", [True, False])
def test_equality_verdicts_in_every_style_are_read_right(same):
    for seed in range(200):
        assert parse_equality(styles.equality(same, random.Random(seed), noise=1.0)) is same


def test_every_solution_style_states_its_answer_and_most_read_strictly():
    steps = [(3, "*", 4, 12), (12, "-", 5, 7)]
    strict = 0
    for seed in range(200):
        text = styles.solution(steps, random.Random(seed), noise=1.0)
        assert "7" in text.splitlines()[-1]
        strict += check_gsm8k(text, "7")["correct"]
    assert 100 < strict < 200  # the boxed / "Final Answer:" styles have no "The answer is:" line


def test_rewritten_problems_come_back_clean_or_flagged():
    problem = "Max has 5 apples. He buys 3 more. How many apples does Max have now?"
    seen = set()
    for seed in range(200):
        text = styles.rewritten(problem, "more_steps", random.Random(seed), noise=1.0)
        cleaned = clean_evolved_text(text)
        seen.add(cleaned == problem)
        if cleaned != problem:  # a note left after the problem: the elimination's leak check must see it
            from rleif_kit.evolve.elimination import elimination_reason
            assert elimination_reason("Max has 5 apples.", text) == "leaked_template", text
    assert seen == {True, False}


def test_the_teacher_answers_each_request_kind_from_its_world(tmp_path):
    world = World(3, n_train=40, n_test=10)
    paths = write_data(tmp_path, world)
    assert len(load_gsm8k(paths["gsm8k_train"])) == 30 and len(load_math(paths["math_train"])) == 10
    assert len(load_gsm8k(paths["gsm8k_test"])) == 10
    teacher = Teacher(world, noise=0.0)  # the plain asked-for forms: every answer checkable
    record = world.train[1]
    question, gold = record["question"], str(record["answer"])
    evolve = (PROMPTS / "math" / "evol" / "more_steps.txt").read_text().replace("{instruction}", question)
    child, finish = _ask(teacher, evolve, 400)
    assert finish == "stop" and child != question and world.lookup(child) is not None
    answer, _ = _ask(teacher, (PROMPTS / "math" / "answer.txt").read_text().replace("{instruction}", question))
    assert check_gsm8k(answer, gold)["correct"]
    equal = (PROMPTS / "evol" / "equality.txt").read_text()
    assert _ask(teacher, equal.replace("{parent}", question).replace("{child}", question))[0] == "Equal"
    assert _ask(teacher, equal.replace("{parent}", question).replace("{child}", child))[0] == "Different"
    ranking = (PROMPTS / "judges" / "irm_ranking.txt").read_text().replace("{k}", "3").replace(
        "{variants}", format_variants([question, "I'm sorry, but I can't help with that.", child]))
    assert parse_ranking(_ask(teacher, ranking)[0], ["q", "refusal", "child"])[-1] == "refusal"
    steps = [f"Step {i}: {a} {s} {b} = {r}." for i, (a, s, b, r) in
             enumerate(arith.Problem.from_record(record).step_values(), 1)]
    steps[-1] += f" The answer is: {gold}"
    wrong = steps[:-1] + [steps[-1].replace(f"The answer is: {gold}", f"The answer is: {int(gold) + 1}")]
    prm = (PROMPTS / "judges" / "prm_steps.txt").read_text().replace("{question}", question)
    for solution, last_ok in ((steps, True), (wrong, False)):
        text = prm.replace("{n_steps}", str(len(solution))).replace("{solution}", "\n".join(solution))
        labels = parse_step_labels(_ask(teacher, text)[0], len(solution))
        assert labels[-1] is last_ok and all(labels[:-1])
    assert set(teacher.kinds) == {"evolve", "answer", "equality", "ranking", "step_labels"}


def test_replies_are_cut_at_max_tokens_and_repeatable():
    world = World(0, n_train=20, n_test=5)
    evolve = (PROMPTS / "math" / "evol" / "deepen.txt").read_text().replace("{instruction}",
                                                                            world.train[0]["question"])
    text, finish = _ask(Teacher(world), evolve, max_tokens=5)
    assert finish == "length" and len(text.split()) == 5
    a, b = Teacher(World(0, n_train=20, n_test=5)), Teacher(World(0, n_train=20, n_test=5))
    assert [_ask(a, evolve) for _ in range(3)] == [_ask(b, evolve) for _ in range(3)]  # n-th asking, same reply
    assert len({_ask(a, evolve) for _ in range(5)}) > 1  # a re-ask is another draw


def test_a_problem_with_a_note_left_in_is_still_known():
    world = World(0, n_train=20, n_test=5)
    question = world.train[2]["question"]
    assert world.lookup(question + "\n\nIn this modified version, this adds an extra step.") is world.lookup(question)
    assert world.lookup("A problem nobody wrote.") is None


def test_unknown_problems_get_refusals_not_inventions():
    teacher = Teacher(World(0, n_train=10, n_test=2))
    evolve = (PROMPTS / "math" / "evol" / "simplify.txt").read_text().replace("{instruction}", "What is love?")
    assert _ask(teacher, evolve)[0] in styles.REFUSALS

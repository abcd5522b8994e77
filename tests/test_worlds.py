"""The World interface: no stage tests which world runs, every world answers the same questions, the reward terms
rV and rF, and the config keys that moved. Pure: no model, no network."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rleif_kit.core.config import ConfigError, load_config
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.worlds import WORLDS, UnknownWorld, get_world, world_for
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.base import World
from rleif_kit.worlds.benchmarks import BENCHMARKS, benchmark
from rleif_kit.worlds.steps import STEPWISE

ROOT = Path(__file__).resolve().parents[1]
NAMES = set(WORLDS) | set(BENCHMARKS) | {"world"}  # a comparison with one of these is a world branch
SUBJECTS = {"world", "domain", "benchmark", "bench"}  # ... and so is one of these compared with any string


def _branches(path: Path, root: Path = ROOT, source: str | None = None) -> list[str]:
    """``file:line`` of every comparison that asks which world, domain or benchmark runs, and every
    ``.startswith("<world>")``."""
    out = []
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            named = {p.id if isinstance(p, ast.Name) else p.attr for p in parts if isinstance(p, (ast.Name, ast.Attribute))}
            consts = {c.value for p in parts for c in ast.walk(p) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            if named & SUBJECTS and consts or consts & NAMES:  # `bench in BENCHMARKS` asks the registry: fine
                out.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
              and any(isinstance(a, ast.Constant) and str(a.value).rstrip(":") in NAMES for a in node.args)):
            out.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_world_branch_outside_worlds():
    """Stages ask the configured world; none tests which one it is (the loopback teacher in testing/ plays one
    world on purpose, and worlds/ is where the answers live)."""
    package = ROOT / "rleif_kit"
    found = [hit for path in sorted(package.rglob("*.py"))
             if not path.is_relative_to(package / "worlds") and not path.is_relative_to(package / "testing")
             for hit in _branches(path)]
    assert found == []


def test_no_world_branch_in_the_notebooks():
    """The notebooks hold calls, not logic: their code cells ask the world too."""
    import json

    found = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] == "code":
                found += [f"cell {i}: {hit}" for hit in _branches(nb, ROOT, "".join(cell["source"]))]
    assert found == []


def test_the_branch_finder_finds_branches(tmp_path):
    """The check above can fail: each spelling of a world branch is caught."""
    sample = tmp_path / "stage.py"
    sample.write_text('if cfg.base.world == "arith": pass\nif benchmark in ("gsm8k", "math"): pass\n'
                      'if ev.backend == "arith": pass\nif spec.startswith("arith:"): pass\nif name == "mbpp": pass\n'
                      'if cfg.domain != "physics": pass\nif b.runs_code: pass\nif bench in BENCHMARKS: pass\n')
    hits = [h.split(": ", 1)[1] for h in _branches(sample, tmp_path)]
    assert len(hits) == 6 and not any("runs_code" in h or "BENCHMARKS" in h for h in hits)


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_every_world_answers_the_interface(name):
    world = get_world(name)
    assert isinstance(world, World) and world.name == name and world.about
    assert world.operators and {"up", "down"} <= {op.direction for op in world.operators} <= {"up", "down", "breadth"}
    assert all(b.name in BENCHMARKS and benchmark(b.name) is b for b in world.benchmarks)
    templates = world.evol_templates(ROOT / "params" / "prompts")
    assert set(templates) == {op.name for op in world.operators}
    prompt = world.train_prompt("Add 2 and 3.")
    assert "Add 2 and 3." in prompt and prompt.endswith(("### Response:", "Let's think step by step."))


def test_registry_lookup_and_module_paths():
    assert get_world("math") is get_world("math")
    with pytest.raises(UnknownWorld, match="unknown world.*arith, math, code"):
        get_world("chemistry")
    assert get_world("rleif_kit.worlds.arith.world").name == "arith"  # a module path defining WORLD
    with pytest.raises(UnknownWorld, match="No module named .no_such_package"):
        get_world("no_such_package.world")


# ------------------------------------------------------------------ reward terms

def test_the_formula_takes_four_terms_worked_by_hand():
    f = parse_reward_formula("rI * (0.5 * rA + 0.5 * rV)")
    assert f.terms == {"rI", "rA", "rV"}
    assert f(rI=0.8, rA=0.5, rV=1.0) == pytest.approx(0.8 * (0.25 + 0.5))  # = 0.6
    g = parse_reward_formula("rI * rA * rV")
    assert g(0.9, 0.5, 0.0) == 0.0 and g(0.9, 0.5, 1.0) == pytest.approx(0.45)
    assert parse_reward_formula("rV + 0.1 * rF")(rV=0.0, rF=1.0) == pytest.approx(0.1)
    assert parse_reward_formula("rI * rA")(0.5, 0.5) == 0.25  # the two-term call of before still works


def test_the_verifier_term_per_world():
    problem = arith.generate_problems(1, seed=3, min_steps=2, max_steps=2)[0]
    record = {"text": problem["question"], "problem": problem}
    a = get_world("arith")
    assert a.verify(record, problem["solution"]) == 1.0
    wrong = problem["solution"].rsplit("The answer is:", 1)[0] + "The answer is: 999"
    assert a.verify(record, wrong) == 0.0 and a.verify(record, "no steps at all") == 0.0  # verifiable: wrong
    assert a.verify({"text": problem["question"]}, problem["solution"]) is None  # no problem to verify against
    m = get_world("math")
    assert m.verify({"text": "q", "gold": "12"}, "Step 1: 5 + 7 = 12. The answer is: 12") == 1.0
    assert m.verify({"text": "q", "gold": "12"}, "Step 1: 5 + 7 = 13. The answer is: 13") == 0.0
    assert m.verify({"text": "an evolved task: its answer is unknown"}, "The answer is: 12") is None


def test_the_format_term_by_hand():
    m = get_world("math")
    assert m.format_score("Step 1: 2 + 3 = 5. Step 2: 5 * 2 = 10. The answer is: 10") == 1.0
    assert m.format_score("Step 1: 2 + 3 = 5. Step 2: 5 * 2 = 10.") == 0.0  # no answer line
    assert m.format_score("The answer is: 10") == 0.0  # no step
    assert m.format_score("Step 1: 2 + 3 = 5. The answer is:") == 0.0  # an empty answer line
    assert m.format_score("The answer is: 5. Step 1: 2 + 3 = 5.") == 0.0  # a step after the answer
    assert m.format_score("2 + 3 = 5\n5 * 2 = 10\nThe answer is: 10") == 1.0  # one step per line
    assert STEPWISE.well_formed("Step 1: 1 + 1 = 2. The answer is: 2")


def _cfg(tmp_path, *overrides, text=""):
    path = tmp_path / "run.toml"
    path.write_text('[base]\nmodel_name = "tiny"\n' + text)
    return load_config(path, list(overrides), workdir=ROOT)


def test_a_term_the_world_cannot_compute_is_one_config_error(tmp_path, monkeypatch):
    (tmp_path / "plain_world.py").write_text("from rleif_kit.worlds.base import World\n\n\nclass Plain(World):\n"
                                             "    name = 'plain'\n\n\nWORLD = Plain()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = _cfg(tmp_path, 'base.world="plain_world"', 'ppo.reward_formula="rI * rV"')
    with pytest.raises(ConfigError, match="rV needs the world's verifier, and the plain world has none"):
        world_for(cfg)
    assert world_for(_cfg(tmp_path, 'base.world="code"', 'ppo.reward_formula="rI * rV"')).name == "code"  # its tests
    assert world_for(_cfg(tmp_path, 'ppo.reward_formula="rI * rA * rV"')).name == "math"  # gold answers
    with pytest.raises(ConfigError, match="answer_reward = 'verifier': the math world has no step verifier"):
        world_for(_cfg(tmp_path, 'reward_model.answer_reward="verifier"'))
    with pytest.raises(ConfigError, match="backend = 'world': the math world has no programmatic evolver"):
        world_for(_cfg(tmp_path, 'evol_instruct.backend="world"'))
    with pytest.raises(ConfigError, match="irm_samples_per_instruction = 7: .* the math world draws from 6"):
        world_for(_cfg(tmp_path, "reward_model.irm_samples_per_instruction=7"))
    with pytest.raises(ConfigError, match="unknown world"):
        world_for(_cfg(tmp_path, 'base.world="chemistry"'))
    with pytest.raises(ConfigError, match=r"\[eval\] benchmarks = \['gsm8k', 'mmlu'\]: unknown mmlu \(benchmarks: arith, gsm8k"):
        world_for(_cfg(tmp_path, 'eval.benchmarks=["gsm8k", "mmlu"]'))


def test_the_keys_that_moved_say_where(tmp_path):
    with pytest.raises(ConfigError, match=r"\[evol_instruct\] domain: \[base\] world names the domain now"):
        _cfg(tmp_path, text='[evol_instruct]\ndomain = "code"\n')
    with pytest.raises(ConfigError, match="backend = 'arith': .*one of 'openai', 'hf', 'world'"):
        _cfg(tmp_path, 'evol_instruct.backend="arith"')


def test_the_ppo_scorer_counts_what_the_verifier_cannot_judge():
    from rleif_kit.rewards.reward import RewardScorer

    scorer = RewardScorer.__new__(RewardScorer)  # the term math only: no reward model is loaded
    scorer.formula, scorer.world = parse_reward_formula("rI * rA * rV + 0.5 * rF"), get_world("math")
    records = [{"text": "q", "gold": "10"}, {"text": "q", "gold": "10"}, {"text": "evolved, no gold"}]
    responses = ["Step 1: 5 * 2 = 10. The answer is: 10", "Step 1: 5 * 2 = 11. The answer is: 11",
                 "Step 1: 5 * 2 = 10. The answer is: 10"]
    terms = scorer.verifiable_terms(records, responses)
    assert terms == {"rV": [1.0, 0.0, 0.0], "rV_missing": [False, False, True], "rF": [1.0, 1.0, 1.0]}
    # r = rI * rA * rV + 0.5 * rF with rI = 0.8, rA = 0.5: 0.4 + 0.5, 0 + 0.5, 0 + 0.5
    assert scorer.combine([0.8] * 3, [0.5] * 3, terms) == pytest.approx([0.9, 0.5, 0.5])


def test_the_terms_check_says_when_rv_is_mostly_its_fallback():
    from rleif_kit.checks.verdicts import check_reward_terms

    assert check_reward_terms({"rI": [0.5], "rA": [1.0]}) is None  # the formula names neither term
    fine = check_reward_terms({"rV": [1.0, 0.0, 1.0, 0.0], "rV_missing": [False] * 4, "rF": [1.0, 1.0, 0.0, 1.0]})
    assert fine.status == "ok" and fine.numbers == {"rV_mean": 0.5, "rF_mean": 0.75, "rV_missing_share": 0.0}
    gaps = check_reward_terms({"rV": [0.0, 0.0, 1.0], "rV_missing": [True, True, False]})
    assert gaps.status == "warn" and "could not judge 67%" in gaps.advice  # 2 of 3 scored 0 by the fallback
    flat = check_reward_terms({"rF": [1.0, 1.0]})
    assert flat.status == "warn" and "rF is 1 for every response" in flat.advice


def test_the_math_probe_set_is_the_test_items_in_the_step_format(tmp_path):
    from rleif_kit.worlds.math.probes import number_removed_pairs, probe_items

    test = tmp_path / "gsm8k_test.jsonl"
    test.write_text('{"question": "Ann has 3 pens and buys 4. How many?", "answer": "3 + 4 = <<3+4=7>>7\\n#### 7"}\n'
                    '{"question": "What is it?", "answer": "#### 5"}\n')  # no step to normalise: left out, counted
    items, skipped = probe_items("gsm8k", test)
    assert skipped == 1 and items == [{"id": "gsm8k:gsm8k-00000", "text": "Ann has 3 pens and buys 4. How many?",
                                       "solution": "Step 1: 3 + 4 = 7. The answer is: 7", "gold": "7",
                                       "source": "gsm8k"}]
    assert number_removed_pairs(items) == {"number_removed": [("Ann has 3 pens and buys 4. How many?",
                                                               "Ann has pens and buys 4. How many?")]}


def test_grpo_logs_one_column_per_term():
    from rleif_kit.ppo.grpo import RLEIFReward

    class Scorer:
        def __call__(self, records, responses):
            return {"rI": [0.5, 1.0], "rA": [0.25, 0.75], "rV": [1.0, 0.0], "rV_missing": [False, True],
                    "rF": [1.0, 1.0], "reward": [0.125, 0.0]}

    reward = RLEIFReward(Scorer(), {"p1": {"id": "a"}, "p2": {"id": "b"}})
    assert reward(["p1", "p2"], ["x", "y"]) == [0.125, 0.0]
    logged = reward.drain()
    assert logged == {"rI_mean": 0.75, "rA_mean": 0.5, "low_rA_share": 0.5, "rV_mean": 0.5, "rV_missing_share": 0.5,
                      "rF_mean": 1.0}
    assert reward.drain() == {}  # drained


def test_docs_worlds_names_every_member_of_the_interface():
    """A world's author reads docs/worlds.md: a member ``World`` gains must be named there too."""
    from rleif_kit.worlds.base import World

    page = (ROOT / "docs" / "worlds.md").read_text(encoding="utf-8")
    members = [name for name in vars(World) if not name.startswith("_")]
    assert len(members) > 40
    assert [name for name in members if f"`{name}" not in page] == []
    assert "`WORLD`" in page

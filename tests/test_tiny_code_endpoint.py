"""The code arm's reward-model judges through an OpenAI-compatible endpoint (issue 28), on the tiny-code run's own
SFT model and instructions (the ``code_run`` fixture, so nothing is trained twice): the IRM's siblings written by
the endpoint and ranked by its judge, the PRM's sampled programs labelled step by step by its judge — the requests a
real WizardCoder run sends in stage 04, played by the code loopback teacher. Stage 01 through the endpoint is
``tests/test_code_world_endpoint.py``; the whole preset through it is ``make demo-code-endpoint``
(``rleif_kit/testing/demo_code.py``)."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import CODE_PARAMS, tiny_overrides
from rleif_kit.core.config import load_config
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.settings import load_settings
from rleif_kit.rewards.stage import build_irm_pairs, build_prm_examples
from rleif_kit.testing.code_teacher import serve_code
from rleif_kit.testing.demo_code import ENDPOINT, KEY_ENV, settings_for
from rleif_kit.worlds import world_for
from rleif_kit.worlds.data import instruction_pool

pytestmark = pytest.mark.slow

KEY = "sk-lb-W5r9Tz3Kq7Md"  # random-looking, as real keys are: 6 characters of a key are redacted from replies


@pytest.fixture(scope="module")
def judged(code_run, tmp_path_factory):
    """(cfg, paths, IRM data, PRM data, the teacher) of stage 04's data steps on a copy of the tiny-code run, every
    chat-model request sent to the code loopback teacher."""
    root = tmp_path_factory.mktemp("tiny-code-endpoint")
    run = root / "run"
    shutil.copytree(code_run / "run", run, ignore=shutil.ignore_patterns("04_reward_models", "05_ppo", "06_eval",
                                                                           "07_reward_diagnostics"))
    cfg = load_config(CODE_PARAMS, [*ENDPOINT, *tiny_overrides(run), "reward_model.irm_groups=60",
                                    "reward_model.prm_samples=200"])
    paths = RunPaths(cfg.output_dir)
    server, teacher = serve_code(seed=cfg.base.seed)
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, KEY)
    try:
        teacher.learn(instruction_pool(cfg, paths))  # the run's kept instructions, which the fan-out rewrites
        settings_path = root / "settings.json"
        settings_path.write_text(json.dumps(settings_for(server.base_url)))
        settings = load_settings(settings_path)
        irm = build_irm_pairs(cfg, paths, settings, progress=False)
        prm = build_prm_examples(cfg, paths, settings, progress=False)
    finally:
        server.stop()
        mp.undo()
    return cfg, paths, irm, prm, teacher


def test_the_fanout_and_both_judges_went_through_the_endpoint(judged):
    cfg, paths, irm, prm, teacher = judged
    assert teacher.asked["evolve"] >= 60 * 4  # 60 instructions x 4 siblings (refusals are asked again)
    assert irm.groups == 60 and teacher.asked["ranking"] >= 50  # fewer than 2 siblings: no ranking; a reply it cannot
    # read is asked again
    assert irm.judge == "teacher" and irm.failed == 0 and irm.pairs
    assert teacher.asked["step_labels"] >= prm.samples - prm.flagged and prm.labeller == "judge"
    for name in ("irm_fanout", "irm_rankings", "prm_judged", "prm_samples"):  # the key is never written down
        assert KEY not in getattr(paths, name).read_text()


def test_the_judge_ranks_a_rewrite_that_lost_its_return_value_below_its_siblings(judged):
    _, _, irm, _, teacher = judged
    assert teacher.vague_texts, "the teacher wrote no vague rewrite: the test would not test anything"
    chosen = sum(teacher.is_vague(p["chosen"]) for p in irm.pairs)
    rejected = sum(teacher.is_vague(p["rejected"]) for p in irm.pairs)
    assert rejected > 3 * chosen, (chosen, rejected)  # ranked last but for the judge's noise


def test_the_step_labels_follow_the_sandbox_verdict_of_each_sampled_program(judged):
    cfg, _, _, prm, _ = judged
    world = world_for(cfg)
    assert len(prm.examples) >= 0.9 * prm.samples
    rights = [all(e["labels"]) for e in prm.examples]
    assert 0.1 < sum(rights) / len(rights) < 0.9  # the SFT model writes right and wrong programs: both classes
    pool = {str(r["id"]): r for r in instruction_pool(cfg, RunPaths(cfg.output_dir))}
    agree = [all(e["labels"]) == (world.verify(pool[str(e["instruction_id"])], e["solution"]) == 1.0)
             for e in prm.examples if str(e["instruction_id"]) in pool]
    assert len(agree) > 100 and sum(agree) / len(agree) >= 0.9, sum(agree) / max(len(agree), 1)  # 5% slips

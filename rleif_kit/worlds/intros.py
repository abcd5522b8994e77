"""The run-specific header of each stage's notebook: what this run's world is, what its reward is made of and
what the stage does with them, in the run's own words (``worlds/words.py``).

A notebook's first cell explains the recipe and holds for every world; the cell after ``setup`` displays
``stage_intro(cfg, stage)``, so a code run reads ``r = rI · rV``, "tasks" and "pass@1" where a math run reads
``r = rI · rA``, "problems" and "accuracy" — the words never come from a notebook's static text.
"""

from __future__ import annotations

from typing import Any, Callable

from rleif_kit.core.stages import DEDUP, DIAGNOSTICS, EVAL, EVOLVE, PPO, REWARD_MODELS, SETUP, SFT
from rleif_kit.worlds import world_for
from rleif_kit.worlds.words import RunWords, run_words

TITLES = {SETUP: "Setup", EVOLVE: "Evol-Instruct", DEDUP: "Dedup", SFT: "Supervised fine-tuning",
          REWARD_MODELS: "Reward models", PPO: "PPO", EVAL: "Evaluation", DIAGNOSTICS: "Reward diagnostics"}


def _reward(w: RunWords) -> str:
    """The run's formula and the source of each of its terms, as markdown lines."""
    return "\n".join([f"**This run's reward:** `{w.shown}` (`[ppo] reward_formula = \"{w.formula}\"`)", "",
                      *w.term_lines()])


def _setup(cfg: Any, world: Any, w: RunWords) -> list[str]:
    data = (f"The {w.world} world generates its {w.tasks} and their step data in the stages: nothing to build here."
            if world.programmatic else
            f"The seeds and the SFT set are built from {world.builds_from or 'your data files'} when missing.")
    return [data]


def _evolve(cfg: Any, world: Any, w: RunWords) -> list[str]:
    who = (f"the {w.world} world's own evolver (offline, `[evol_instruct] backend = \"world\"`)"
           if cfg.evol_instruct.backend == "world" else f"the `{cfg.evol_instruct.backend}` backend's model")
    return [f"Each seed is one {w.task} of the {w.world} world; its evolutions are written by {who}."]


def _dedup(cfg: Any, world: Any, w: RunWords) -> list[str]:
    return [f"The items compared are the {w.tasks}' texts; τ = {cfg.evol_instruct.dedup_threshold:g} on this run."]


def _sft(cfg: Any, world: Any, w: RunWords) -> list[str]:
    shown = w.answer_format.replace("`", "\\`")  # a ```python inside a sentence would open a code block
    lines = [f"The SFT model learns to answer a {w.task} in the {w.world} world's format: {shown}."]
    if world.heldout_benchmark and cfg.sft.eval_samples > 0:
        lines.append(f"Held-out {w.score} (greedy, `{world.heldout_benchmark}`, {cfg.sft.eval_samples} {w.tasks}) is "
                     f"measured before and after training; an answer counts when it is {w.right}.")
    else:
        lines.append(f"The {w.world} world has no held-out split of its own: no {w.score} before and after here "
                     "(06_eval measures the benchmarks).")
    return lines


def _rewards(cfg: Any, world: Any, w: RunWords) -> list[str]:
    lines = [f"The IRM (rI) learns from sibling sets ranked by {w.judge}.",
             f"The PRM's step labels: `[reward_model] prm_step_label = \"{cfg.reward_model.prm_step_label}\"`."]
    if "rA" not in w.terms:
        lines.append(f"This run's reward does not use the PRM (no rA in `{w.shown}`): it is trained and checked, "
                     "and the reward-health checks report it.")
    return lines + ["", _reward(w)]


def _ppo(cfg: Any, world: Any, w: RunWords) -> list[str]:
    ab = (f"The A/B compares SFT and PPO on held-out {w.tasks} by {w.score}." if world.heldout_benchmark else
          f"The {w.world} world has no held-out split: the A/B is 06_eval's.")
    return [_reward(w), "", f"Each rollout answers one {w.task}; it is {w.right} when the world says so. {ab}"]


def _diagnostics(cfg: Any, world: Any, w: RunWords) -> list[str]:
    lines = [_reward(w), ""]
    if "rA" not in w.terms:
        lines.append("No rA in this run's formula: the share of rA < 0.5 (check 2) is about a PRM PPO did not use.")
    return lines + [f"Reward against truth: the AUC of r over {w.right} vs not-{w.right} responses, as the world "
                    "judges them."]


STAGE_LINES: dict[str, Callable[[Any, Any, RunWords], list[str]]] = {
    SETUP: _setup, EVOLVE: _evolve, DEDUP: _dedup, SFT: _sft, REWARD_MODELS: _rewards, PPO: _ppo,
    DIAGNOSTICS: _diagnostics}


def stage_intro(cfg: Any, stage: str, world: Any = None) -> str:
    """Markdown: ``### <stage title> on this run`` with the run's world, formula and what the stage does with them."""
    world = world_for(cfg) if world is None else world
    w = run_words(cfg, world)
    head = [f"### {stage[:2]} · {TITLES.get(stage, stage)} on run `{cfg.run_name}`", "",
            f"**World:** `{w.world}` — {w.about}.", ""]
    body = STAGE_LINES[stage](cfg, world, w) if stage in STAGE_LINES else [_reward(w)]
    return "\n".join(head + body) + "\n"

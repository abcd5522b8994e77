"""The words every view of a run uses, from its world and its ``[ppo] reward_formula`` — never the arithmetic
world's by default.

Notebooks, the report, model cards and progress lines ask :func:`run_words` for their titles, formula, plot labels
and the names of what they score, so a code run reads ``r = rI · rV`` and "pass@1 on held-out tasks" where a math
run reads ``r = rI · rA`` and "accuracy on held-out problems". What a term means comes from where it is computed:
rA's source is ``[reward_model] answer_reward`` (the PRM or a verifier), rV the world's verifier, rF its format score.
The nouns come from the world (``World.task_noun``, ``score_name``, ``right_word``, ``judge_about``,
``code_language``, ``recipe``; docs/worlds.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rleif_kit.core.reward_formula import FORMULA_NAMES, parse_reward_formula
from rleif_kit.worlds import world_for

TERM_NAMES = {"rI": "instruction reward", "rA": "answer reward", "rV": "verifier reward", "rF": "format reward"}


def formula_shown(formula: str) -> str:
    """``"rI * rV"`` as a learner reads it: ``"r = rI · rV"``."""
    return "r = " + " ".join(formula.split()).replace(" * ", " · ").replace("*", " · ")


def term_sources(cfg: Any, world: Any) -> dict[str, str]:
    """What computes each term of the formula, in the run's own words (rI, rA, rV, rF order)."""
    answer = cfg.reward_model.answer_reward
    rA = ("the process reward model (PRM), its step scores aggregated" if answer == "prm"
          else f"the world's {answer} (`[reward_model] answer_reward = \"{answer}\"`)")
    verifier = world.verifier_about or "the world's verifier"
    out = {"rI": "the instruction reward model (IRM)", "rA": rA, "rV": verifier, "rF": "the world's format score"}
    terms = parse_reward_formula(cfg.ppo.reward_formula).terms
    return {t: out[t] for t in FORMULA_NAMES if t in terms}


@dataclass(frozen=True)
class RunWords:
    """A run's words; every field is plain text (markdown where it says so)."""

    world: str  # the world's name, "tiny_code"
    about: str  # the world's one line, "the offline code world: ..."
    formula: str  # the configured formula as written, "rI * rV"
    shown: str  # "r = rI · rV"
    terms: tuple[str, ...]  # the terms the formula uses, in rI, rA, rV, rF order
    sources: dict[str, str]  # term -> what computes it
    task: str  # "task" / "problem": what one item of the world is
    tasks: str  # its plural
    score: str  # "pass@1" / "accuracy": the held-out figure SFT and PPO are compared on
    right: str  # "passed" / "right": an answer the world counts as correct
    judge: str  # who ranks evolved siblings for the IRM
    answer_format: str  # the answer format a response is trained in
    code_language: str  # "python" where responses are programs (render as code), else ""
    recipe: str = "WizardMath"  # the published model whose recipe the world follows: "WizardMath", "WizardCoder"

    def term_lines(self) -> list[str]:
        """One markdown line per term: ``- **rV** (verifier reward): the tests of each task, run in the sandbox``."""
        return [f"- **{t}** ({TERM_NAMES[t]}): {self.sources[t]}" for t in self.terms]


def run_words(cfg: Any, world: Any = None) -> RunWords:
    """The words for ``cfg``'s run (``world``: the run's world when the caller has it already)."""
    if world is None:
        world = world_for(cfg)
    terms = tuple(t for t in FORMULA_NAMES if t in parse_reward_formula(cfg.ppo.reward_formula).terms)
    judge = (world.judge_about if world.evolves_offline(cfg)  # [evol_instruct] backend = "world": the world ranks
             else "the IRM judge (settings.json `models.irm_judge`)")
    return RunWords(world=world.name, about=world.about, formula=cfg.ppo.reward_formula,
                    shown=formula_shown(cfg.ppo.reward_formula), terms=terms, sources=term_sources(cfg, world),
                    task=world.task_noun, tasks=world.task_noun_plural or world.task_noun + "s",
                    score=world.score_name, right=world.right_word, judge=judge,
                    answer_format=world.format_name, code_language=world.code_language, recipe=world.recipe)

"""Where the modules of the flat layout went (before the package was laid out by stage).

Old spellings fail with one line naming the new one, instead of a bare ModuleNotFoundError:
``rleif_kit/__init__.py`` installs :class:`MovedFinder` last on ``sys.meta_path`` (it is asked only for a module
no other finder found), and the stage packages whose names the flat layout used for a module answer an old
``from rleif_kit.<stage> import name`` through :func:`moved_attribute`.
"""

from __future__ import annotations

import importlib.abc

GUIDE = "the kit is laid out by stage now: see docs/layout.md, the map of rleif_kit/"

MODULES = {
    "rleif_kit.api_keys": "rleif_kit.core.api_keys",
    "rleif_kit.arith": "rleif_kit.worlds.arith.problems",
    "rleif_kit.arith_evolver": "rleif_kit.worlds.arith.evolver",
    "rleif_kit.check_api": "rleif_kit.pipeline.check_api",
    "rleif_kit.cli": "rleif_kit.pipeline.cli",
    "rleif_kit.config": "rleif_kit.core.config",
    "rleif_kit.decontam": "rleif_kit.dedup.decontam",
    "rleif_kit.dedup_stage": "rleif_kit.dedup.stage",
    "rleif_kit.distributed": "rleif_kit.core.distributed",
    "rleif_kit.doctor": "rleif_kit.pipeline.doctor (DoctorReport is rleif_kit.diagnostics.stage.Health)",
    "rleif_kit.elimination": "rleif_kit.evolution.elimination",
    "rleif_kit.embeddings": "rleif_kit.dedup.embeddings",
    "rleif_kit.eval_stage": "rleif_kit.evaluation.stage",
    "rleif_kit.evaluation.answers": "rleif_kit.worlds.math.answers",
    "rleif_kit.evaluation.arith_bench": "rleif_kit.worlds.heldout_eval",
    "rleif_kit.evaluation.bench_data": "rleif_kit.worlds.benchmarks",
    "rleif_kit.evaluation.generate": "rleif_kit.models.generation",
    "rleif_kit.evaluation.math_compat": "rleif_kit.worlds.math.compat",
    "rleif_kit.evaluation.math_equiv": "rleif_kit.worlds.math.equiv",
    "rleif_kit.evaluation.prompts": "rleif_kit.worlds.prompts",
    "rleif_kit.evaluation.sandbox": "rleif_kit.sandbox.runner",
    "rleif_kit.evaluation.sandbox_launcher": "rleif_kit.sandbox.launcher",
    "rleif_kit.evaluation.value_tests": "rleif_kit.worlds.code.value_tests",
    "rleif_kit.evolvers": "rleif_kit.evolution.evolvers",
    "rleif_kit.fake_openai": "rleif_kit.testing.fake_openai",
    "rleif_kit.grpo": "rleif_kit.ppo.grpo",
    "rleif_kit.health": "rleif_kit.diagnostics.stage (run_health is run_diagnostics)",
    "rleif_kit.irm_data": "rleif_kit.rewards.irm_data",
    "rleif_kit.jsonl": "rleif_kit.core.jsonl",
    "rleif_kit.judge_labels": "rleif_kit.rewards.judge_labels",
    "rleif_kit.judges": "rleif_kit.rewards.judges",
    "rleif_kit.launch": "rleif_kit.core.launch",
    "rleif_kit.loop": "rleif_kit.pipeline.loop",
    "rleif_kit.math_data": "rleif_kit.worlds.math.data",
    "rleif_kit.memory": "rleif_kit.models.memory",
    "rleif_kit.metrics": "rleif_kit.core.metrics",
    "rleif_kit.model_shapes": "rleif_kit.models.shapes",
    "rleif_kit.operators": "rleif_kit.evolution.operators",
    "rleif_kit.paths": "rleif_kit.core.paths",
    "rleif_kit.planner": "rleif_kit.models.planner",
    "rleif_kit.plots": "rleif_kit.core.plots",
    "rleif_kit.ppo_math": "rleif_kit.ppo.ppo_math",
    "rleif_kit.ppo_policy": "rleif_kit.ppo.policy",
    "rleif_kit.ppo_rewards": "rleif_kit.ppo.rewards",
    "rleif_kit.ppo_stage": "rleif_kit.ppo.stage",
    "rleif_kit.prm": "rleif_kit.rewards.prm (scoring, encode, step ends: rleif_kit.reward_scoring.prm)",
    "rleif_kit.prm_labels": "rleif_kit.worlds.steps (verifier_labels: rleif_kit.worlds.arith.judge)",
    "rleif_kit.records": "rleif_kit.core.records",
    "rleif_kit.report": "rleif_kit.pipeline.report",
    "rleif_kit.resume": "rleif_kit.pipeline.resume",
    "rleif_kit.reward_models": "rleif_kit.rewards.irm (loading and scoring: rleif_kit.reward_scoring; training helpers: rleif_kit.rewards.rm_training; resolve_rm_base: rleif_kit.models.loading)",
    "rleif_kit.reward_stage": "rleif_kit.rewards.stage (instruction_pool: rleif_kit.worlds.data; launch_training: rleif_kit.rewards.launched)",
    "rleif_kit.runner": "rleif_kit.pipeline.runner",
    "rleif_kit.sections": "rleif_kit.core.sections",
    "rleif_kit.settings": "rleif_kit.core.settings",
    "rleif_kit.setup": "rleif_kit.core.run_setup",
    "rleif_kit.sft_build": "rleif_kit.worlds.math.sft",
    "rleif_kit.sft_data": "rleif_kit.worlds.data (the SFT file: rleif_kit.dedup.sft_data; the SFT examples: rleif_kit.sft.examples)",
    "rleif_kit.stepwise": "rleif_kit.worlds.math.stepwise",
    "rleif_kit.tiny": "rleif_kit.models.tiny",
    # one package per world (issue 27)
    "rleif_kit.worlds.answer_styles": "rleif_kit.worlds.math.answer_styles",
    "rleif_kit.worlds.answers": "rleif_kit.worlds.math.answers",
    "rleif_kit.worlds.arith_bench": "rleif_kit.worlds.heldout_eval",
    "rleif_kit.worlds.arith_evolver": "rleif_kit.worlds.arith.evolver",
    "rleif_kit.worlds.arith_words": "rleif_kit.worlds.arith.words",
    "rleif_kit.worlds.gsm8k_format": "rleif_kit.worlds.arith.gsm8k_format",
    "rleif_kit.worlds.math_compat": "rleif_kit.worlds.math.compat",
    "rleif_kit.worlds.math_data": "rleif_kit.worlds.math.data",
    "rleif_kit.worlds.math_equiv": "rleif_kit.worlds.math.equiv",
    "rleif_kit.worlds.math_sft": "rleif_kit.worlds.math.sft",
    "rleif_kit.worlds.math_sympy": "rleif_kit.worlds.math.symbolic",
    "rleif_kit.worlds.math_text": "rleif_kit.worlds.math.latex",
    "rleif_kit.worlds.mbpp": "rleif_kit.worlds.code.mbpp",
    "rleif_kit.worlds.stepwise": "rleif_kit.worlds.math.stepwise",
    "rleif_kit.worlds.overlap": "rleif_kit.core.overlap",
    "rleif_kit.worlds.step_labels": "rleif_kit.worlds.steps (verifier_labels: rleif_kit.worlds.arith.judge)",
    "rleif_kit.worlds.truth": "the world's is_correct (rleif_kit.worlds.world_for(cfg).is_correct)",
    "rleif_kit.worlds.probe_sets": "rleif_kit.checks.probe_sets",
    "rleif_kit.evaluation.postprocess": "rleif_kit.worlds.code.postprocess",
}

# old module (now a package) -> public name -> the module that defines it now ("module:new_name" if renamed)
NAMES = {
    "rleif_kit.models": {
        "ModelNotFound": "rleif_kit.models.loading",
        "resolve_model_name": "rleif_kit.models.loading",
        "tiny_build_target": "rleif_kit.models.loading",
        "tiny_corpus": "rleif_kit.worlds.tiny_corpus",
        "ensure_base_model": "rleif_kit.worlds.tiny_corpus",
        "use_bf16": "rleif_kit.models.loading",
        "load_tokenizer": "rleif_kit.models.loading",
        "nf4_config": "rleif_kit.models.loading",
        "load_for_training": "rleif_kit.models.loading",
        "trainable_parameters": "rleif_kit.models.loading",
        "report_to": "rleif_kit.models.loading",
    },
    "rleif_kit.rewards": {
        "FORMULA_NAMES": "rleif_kit.core.reward_math",
        "FormulaError": "rleif_kit.core.reward_math",
        "parse_reward_formula": "rleif_kit.core.reward_math",
        "AGGREGATIONS": "rleif_kit.core.reward_math",
        "aggregate_steps": "rleif_kit.core.reward_math",
        "ranking_to_pairs": "rleif_kit.core.reward_math",
        "balance_pairs": "rleif_kit.core.reward_math",
    },
    "rleif_kit.evolve": {
        "EvolveResult": "rleif_kit.evolve.stage",
        "load_seeds": "rleif_kit.worlds.data",
        "EvolveFiles": "rleif_kit.evolve.stage",
        "plan_round": "rleif_kit.evolve.stage",
        "summarize": "rleif_kit.evolve.stage",
        "fanout_tasks": "rleif_kit.evolution.fanout",
        "run_fanout_async": "rleif_kit.evolution.fanout",
        "run_fanout": "rleif_kit.evolution.fanout",
        "run_evolve_async": "rleif_kit.evolve.stage",
        "run_evolve": "rleif_kit.evolve.stage",
        "estimate_evolve": "rleif_kit.evolve.stage",
    },
    "rleif_kit.sft": {
        "load_sft_model": "rleif_kit.models.loading:load_merged",
        "SFTResult": "rleif_kit.sft.stage",
        "train_sft": "rleif_kit.sft.stage",
        "save_model": "rleif_kit.sft.stage",
        "run_sft": "rleif_kit.sft.stage",
    },
    "rleif_kit.ppo": {
        "STAGE": "rleif_kit.ppo.trainer",
        "RANK_MEANS": "rleif_kit.ppo.trainer",
        "KL_ADVICE": "rleif_kit.ppo.step_row",
        "Rollout": "rleif_kit.ppo.trainer",
        "generate_rollout": "rleif_kit.ppo.trainer",
        "response_view": "rleif_kit.ppo.passes",
        "score_rollout": "rleif_kit.ppo.passes",
        "PPOResult": "rleif_kit.ppo.trainer",
        "ppo_step": "rleif_kit.ppo.trainer",
        "kl_after_update": "rleif_kit.ppo.passes",
        "step_record": "rleif_kit.ppo.step_row",
        "guard": "rleif_kit.ppo.step_row",
        "reward_gate": "rleif_kit.ppo.trainer",
        "run_ppo": "rleif_kit.ppo.trainer",
    },
    "rleif_kit.dedup": {
        "EPS": "rleif_kit.dedup.near_duplicates",
        "Removal": "rleif_kit.dedup.near_duplicates",
        "DedupOutput": "rleif_kit.dedup.near_duplicates",
        "normalise_text": "rleif_kit.dedup.near_duplicates",
        "exact_dedup": "rleif_kit.dedup.near_duplicates",
        "minhash_dedup": "rleif_kit.dedup.near_duplicates",
        "semantic_dedup": "rleif_kit.dedup.near_duplicates",
        "brute_force_semantic_dedup": "rleif_kit.dedup.near_duplicates",
        "processing_order": "rleif_kit.dedup.near_duplicates",
        "dedup": "rleif_kit.dedup.near_duplicates",
    },
    "rleif_kit.diagnostics": {
        "STATUSES": "rleif_kit.core.verdict",
        "STEP_MARKER": "rleif_kit.checks.verdicts",
        "Verdict": "rleif_kit.core.verdict",
        "check_sft_learning": "rleif_kit.checks.verdicts",
        "has_step_markers": "rleif_kit.checks.verdicts",
        "check_step_format": "rleif_kit.checks.verdicts",
        "check_evolve_temperature": "rleif_kit.checks.verdicts",
        "check_kept_floor": "rleif_kit.checks.verdicts",
        "check_operator_share": "rleif_kit.checks.verdicts",
        "check_score_distribution": "rleif_kit.checks.verdicts",
        "check_low_ra_share": "rleif_kit.checks.verdicts",
        "check_low_ra_log": "rleif_kit.checks.verdicts",
        "check_ab": "rleif_kit.checks.verdicts",
        "check_duplicate_rate": "rleif_kit.checks.verdicts",
        "check_kl_blowup": "rleif_kit.checks.verdicts",
        "FAILURE_CAUSES": "rleif_kit.checks.verdicts",
        "failure_cause": "rleif_kit.checks.verdicts",
        "check_evolve_failures": "rleif_kit.checks.verdicts",
        "check_prompt_consistency": "rleif_kit.checks.verdicts",
        "format_verdict_table": "rleif_kit.checks.verdicts",
        "format_verdicts": "rleif_kit.checks.verdicts",
    },
}


class MovedFinder(importlib.abc.MetaPathFinder):
    """Answers an import of a module that moved with the module's new name."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MODULES:
            raise ModuleNotFoundError(f"{fullname} moved to {MODULES[fullname]} ({GUIDE})", name=fullname)
        return None


def moved_module(package: str, name: str) -> None:
    """``from rleif_kit[.evaluation] import <old module>``: the import machinery asks the package for the name and
    would say only "cannot import name"; this names the new module instead."""
    old = f"{package}.{name}"
    if old in MODULES:
        raise ImportError(f"{old} moved to {MODULES[old]} ({GUIDE})", name=old)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def moved_attribute(package: str, name: str):
    """A stage package's ``__getattr__``: an old ``from rleif_kit.<stage> import name`` names the new module."""
    where = NAMES.get(package, {}).get(name)
    if where is None:
        moved_module(package, name)  # a module of the flat layout, if it was one
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, _, new_name = where.partition(":")  # "module:new_name" where the name changed too
    raise ImportError(f"{package}.{name} moved to {module}.{new_name or name} ({GUIDE})", name=package)

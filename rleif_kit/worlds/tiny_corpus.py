"""The offline tiny base model of the demo and tests: its tokenizer is trained on the run's world's texts (the
arithmetic world's prompts and solutions unless the world brings its own, as the tiny code world does) and the
open-domain sample, so it is built here, where those corpora live.

    rleif build-tiny ./tiny-llama     # the same model by hand
"""

from __future__ import annotations

from pathlib import Path

from rleif_kit.core.config import RunConfig
from rleif_kit.models import tiny
from rleif_kit.models.loading import resolve_model_name, tiny_build_target
from rleif_kit.worlds import get_world
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.data import load_instructions
from rleif_kit.worlds.prompts import math_prompt


def tiny_corpus(cfg: RunConfig) -> list[str]:
    """Texts the tiny tokenizer is trained on: the run's world's own (``World.tokenizer_corpus``), else prompts and
    solutions of the arithmetic world; then the open-domain sample."""
    corpus = get_world(cfg.base.world).tokenizer_corpus(cfg) or _arith_corpus(cfg)
    open_domain = cfg.resolve(cfg.sft.open_domain_path) if cfg.sft.open_domain_path else None
    if open_domain and open_domain.exists():
        corpus.extend(math_prompt(r["instruction"]) + " " + r["response"]
                      for r in load_instructions(open_domain, "[sft] open_domain_path"))
    return corpus


def _arith_corpus(cfg: RunConfig) -> list[str]:
    problems = arith.generate_problems(cfg.tiny.corpus_problems, seed=cfg.base.seed, prefix="corpus",
                                       max_steps=cfg.arith.max_steps, max_operand=cfg.arith.max_operand)
    return [math_prompt(r["question"], cot=True) + " " + r["solution"] for r in problems]


def ensure_base_model(cfg: RunConfig) -> str:
    """Resolve ``[base].model_name``, building the offline tiny Llama first when the preset says so and no
    model is there yet. A model already at that path (a loop iteration's PPO policy, say) is never replaced."""
    target = tiny_build_target(cfg)
    if target is not None and not (target / "config.json").exists():
        shape = tiny.TinyShape(vocab_size=cfg.tiny.vocab_size, hidden_size=cfg.tiny.hidden_size,
                               layers=cfg.tiny.layers, heads=cfg.tiny.heads,
                               intermediate_size=cfg.tiny.intermediate_size)
        tiny.build_tiny_model(target, tiny_corpus(cfg), shape, seed=cfg.base.seed)
    return resolve_model_name(cfg.base.model_name, cfg)


def build_tiny(target: str, problems: int = 2000, seed: int = 0) -> Path:
    """``rleif build-tiny DIR``: the tiny Llama with its default shape, its tokenizer trained on
    ``problems`` arithmetic problems."""
    corpus = [r["question"] + " " + r["solution"] for r in arith.generate_problems(problems, seed=seed)]
    return tiny.build_tiny_model(target, corpus)

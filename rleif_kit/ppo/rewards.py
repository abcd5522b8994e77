"""The RLEIF reward for PPO and GRPO: rI from the IRM, rA from the PRM (or the step verifier), and the verifiable
terms rV (the world's verifier) and rF (format), combined by ``[ppo].reward_formula`` — and the error the
reward-health gate raises when that reward is broken.

A term is computed only when the formula uses it. A record the verifier cannot judge (no gold answer: an evolved
task whose answer nobody knows) gets rV = 0 and is counted (``rV_missing``, ``rV_missing_share`` in the log)."""

from __future__ import annotations

import gc
import json
import time
import statistics
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core.config import RunConfig
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.reward_math import parse_reward_formula
from rleif_kit.core.verdict import Verdict
from rleif_kit.reward_scoring.irm import irm_score
from rleif_kit.reward_scoring.load import load_rm
from rleif_kit.reward_scoring.scorers import irm_scorer, prm_scorer, step_verifier_scorer, verifiable_terms
from rleif_kit.worlds import world_for


class RewardGateFailed(RuntimeError):
    def __init__(self, verdicts: Sequence[Verdict]):
        self.verdicts = list(verdicts)
        bad = "; ".join(f"{v.check}: {v.advice}" for v in self.verdicts if v.status == "fail")
        super().__init__(f"the reward-health gate failed, PPO not started (set [ppo] force = true to override): {bad}")


def raise_if_failed(gate: Sequence[Verdict], force: bool) -> None:
    """The gate's decision, wherever PPO or GRPO starts: any fail stops it unless ``[ppo].force``."""
    if any(v.status == "fail" for v in gate) and not force:
        raise RewardGateFailed(gate)


def save_gate(path: Path, gate: Sequence[Verdict]) -> None:
    """``05_ppo/gate.json``: the gate's verdicts (also how the notebook hands its gate to launched ranks)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([v.to_dict() for v in gate], indent=2) + "\n")


def load_gate(path: Path) -> list[Verdict]:
    return [Verdict(**v) for v in json.loads(Path(path).read_text())]


def term_log_fields(scores: dict) -> dict:
    """The verifiable terms' columns of a log row, where the formula uses them: mean rV, the share of responses
    the verifier could not judge (scored rV = 0), mean rF."""
    out = {}
    if "rV" in scores:
        out.update(rV_mean=statistics.fmean(scores["rV"]),
                   rV_missing_share=sum(scores["rV_missing"]) / len(scores["rV"]))
    if "rF" in scores:
        out["rF_mean"] = statistics.fmean(scores["rF"])
    return out


class RewardScorer:
    """rI, rA and r for (instruction, response) pairs, from the stage-04 reward models."""

    def __init__(self, cfg: RunConfig, paths: RunPaths, irm: tuple[Any, Any] | None = None,
                 prm: tuple[Any, Any] | None = None):
        quantized = cfg.reward_model.rm_finetune == "qlora"  # 7B recipe: the reward models sit in 4-bit
        self.cfg = cfg
        self.irm = irm or load_rm(paths.irm_model, load_in_4bit=quantized, bf16=cfg.base.bf16)
        self.prm = None
        if cfg.reward_model.answer_reward == "prm":
            self.prm = prm or load_rm(paths.prm_model, load_in_4bit=quantized, bf16=cfg.base.bf16)
        self.formula = parse_reward_formula(cfg.ppo.reward_formula)
        self.world = world_for(cfg)
        self._ri: dict[str, float] = {}
        self.timings: dict[str, float] = {}  # the last call's seconds per part (verify_s: the world's verifier)

    def instruction_scores(self, instructions: Sequence[dict]) -> list[float]:
        new = [r for r in {r["id"]: r for r in instructions}.values() if r["id"] not in self._ri]
        if new:
            scores = irm_score(self.irm[0], self.irm[1], [r["text"] for r in new], batch_size=self.cfg.ppo.gen_batch,
                               max_length=self.cfg.reward_model.rm_max_len)
            self._ri.update(zip((r["id"] for r in new), scores))
        return [self._ri[r["id"]] for r in instructions]

    def answer_scores(self, instructions: Sequence[dict], responses: Sequence[str]) -> list[float | None]:
        """rA per response; None where the PRM finds no steps (the caller scores those 0 and counts them)."""
        if self.prm is None:
            return step_verifier_scorer(self.world)(instructions, responses)
        rm = self.cfg.reward_model
        # scored gen_batch at a time, the micro-batch that already bounds rollout memory: on one H200 the
        # reward models' default batches (64 / 32) peaked at 28 GiB in the 24 GB preset
        return prm_scorer(self.prm[0], self.prm[1], rm.prm_aggregate, batch_size=self.cfg.ppo.gen_batch,
                          max_len=rm.rm_max_len, world=self.world)(instructions, responses)

    def verifiable_terms(self, instructions: Sequence[dict], responses: Sequence[str],
                         checks: Sequence[Any] | None = None) -> dict[str, list]:
        """rV and rF where the formula uses them: ``{"rV": [...], "rV_missing": [...], "rF": [...]}``."""
        return verifiable_terms(self.world, self.formula.terms, instructions, responses, checks)

    def check(self, instructions: Sequence[dict], responses: Sequence[str]) -> list[Any]:
        """The world's verdict on every response at once (the code world: all programs in the sandbox in
        parallel), timed into ``timings["verify_s"]``."""
        t0 = time.perf_counter()
        checks = self.world.check_batch(instructions, responses)
        self.timings["verify_s"] = time.perf_counter() - t0
        return checks

    def combine(self, ri: Sequence[float], ra: Sequence[float], terms: dict[str, list]) -> list[float]:
        """r per response from its terms by ``[ppo] reward_formula``."""
        n = len(ri)
        rv, rf = terms.get("rV", [0.0] * n), terms.get("rF", [0.0] * n)
        return [self.formula(rI=i, rA=a, rV=v, rF=f) for i, a, v, f in zip(ri, ra, rv, rf)]

    def instruction_texts(self, texts: Sequence[str]) -> list[float]:
        """rI of bare instruction texts (the probes' edited instructions, which have no ids to cache under)."""
        return irm_scorer(self.irm[0], self.irm[1], batch_size=self.cfg.ppo.gen_batch,
                          max_length=self.cfg.reward_model.rm_max_len)(texts)

    def close(self) -> None:
        """Free both reward models (before launched ranks load their own copies on the same GPUs)."""
        import torch  # heavy: loaded on first use

        self.irm = self.prm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def __call__(self, instructions: Sequence[dict], responses: Sequence[str]) -> dict[str, list]:
        t0 = time.perf_counter()
        ri = self.instruction_scores(instructions)
        ra_raw = self.answer_scores(instructions, responses)
        ra = [0.0 if a is None else a for a in ra_raw]
        checks = self.check(instructions, responses)
        terms = self.verifiable_terms(instructions, responses, checks)
        self.timings["reward_s"] = time.perf_counter() - t0
        return {"rI": ri, "rA": ra, **terms, "flagged": [a is None for a in ra_raw],
                "reward": self.combine(ri, ra, terms),
                "correct": [c.correct for c in checks]}  # None: no verifier

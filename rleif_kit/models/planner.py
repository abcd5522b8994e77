"""GPU memory planner: the expected peak memory of each training stage, before anything is loaded.

    rleif plan params/wizardmath-7b.toml [--card 24] [--set ppo.mini_batch=2] [--shape llama-2-13b]

Pure arithmetic: the run config, the model's shape (``models/shapes.py``: ``config.json`` of a local
model, else a table of known shapes) and the memory terms with their sources (``memory.py``), added up
per stage the way each stage's code runs. Bytes throughout, GiB = 2**30. Unknowable here: real prompt
lengths (``prompt_len``) and allocator fragmentation (in ``OVERHEAD``); ``benchmarks/gpu_check.py``
measures the error on a GPU.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rleif_kit.models.memory import (
    inference_bytes,
    kv_cache_bytes,
    logit_bytes,
    lora_params,
    train_activation_bytes,
    weight_bytes,
)
from rleif_kit.models.shapes import Shape

GIB = 2**30
OVERHEAD = 1 * GIB  # CUDA context (~0.5 GiB with lazy module loading), cuBLAS workspace, allocator slack
# GiB that torch.cuda.mem_get_info reports as total on an RTX 3090/4090, A100-40GB, RTX A6000/L40S, A100/H100-80GB
CARDS = {24: 23.6, 40: 39.4, 48: 47.5, 80: 79.1}


# ------------------------------------------------------------------------------ stages

@dataclass
class StagePlan:
    stage: str
    settings: str
    parts: dict[str, int]  # weights, trainable (params + grads + AdamW), activations, logits, kv_cache, overhead
    phases: dict[str, int] = dataclasses.field(default_factory=dict)  # PPO: the total of each phase

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def fits(self, card_gib: float) -> bool:
        return self.total <= usable_gib(card_gib) * GIB


def usable_gib(card: float) -> float:
    return CARDS.get(int(card), card * 0.985) if float(card).is_integer() else card * 0.985


def _train_parts(shape: Shape, mode: str, d: int, lora: tuple, seqs: int, seq: int, gc: bool,
                 head_params: int, lm_head: bool) -> dict[str, int]:
    """A Trainer stage (SFT, IRM, PRM): model per ``mode`` (models.load_for_training and
    rewards.rm_training.load_rm_for_training), AdamW, activations, logits when the head is the LM head."""
    r, targets, _dropout = lora
    qlora = mode == "qlora"
    # prepare_model_for_kbit_training casts every non-4-bit parameter to fp32
    weights = weight_bytes(shape, "nf4-dq" if qlora else "", d, 4 if qlora else d, head_params)
    if mode == "full":
        trainable = 3 * weights  # grads + two AdamW states, in the weights' dtype
    else:
        trainable = 16 * (lora_params(shape, r, targets) + (0 if lm_head else head_params))  # fp32 p, g, m, v
    tokens = seqs * seq
    return {"weights": weights, "trainable": trainable,  # the Trainer's bf16 runs under autocast
            "activations": train_activation_bytes(shape, tokens, mode, lora, d, d < 4, gc, lm_head),
            "logits": logit_bytes(tokens, shape.vocab, d, 2 if d < 4 else 1) if lm_head else 0,
            "kv_cache": 0, "overhead": OVERHEAD}


def estimate_sft(cfg, shape: Shape) -> StagePlan:
    s, d = cfg.sft, dtype_bytes(cfg)
    parts = _train_parts(shape, s.finetune, d, (s.lora_r, s.lora_targets, s.lora_dropout), s.batch_size,
                         s.max_seq_len, s.gradient_checkpointing, 0 if shape.tied else shape.vocab * shape.hidden, True)
    r = "" if s.finetune == "full" else f" r{s.lora_r}"
    return StagePlan("SFT", f"{s.finetune}{r}, batch {s.batch_size} x {s.max_seq_len}"
                            f"{', ckpt' if s.gradient_checkpointing else ''}", parts)


def estimate_rm(cfg, shape: Shape, which: str) -> StagePlan:
    """IRM: TRL's RewardTrainer runs chosen and rejected together (2 x batch) and always checkpoints
    (RewardConfig's default); PRM: transformers' Trainer, checkpointed only via QLoRA's preparation."""
    rm, s, d = cfg.reward_model, cfg.sft, dtype_bytes(cfg)
    seqs = rm.rm_batch_size * (2 if which == "irm" else 1)
    gc = which == "irm" or (rm.rm_finetune == "qlora" and s.gradient_checkpointing)
    labels = 1 if which == "irm" else 2
    parts = _train_parts(shape, rm.rm_finetune, d, (s.lora_r, s.lora_targets, s.lora_dropout), seqs, rm.rm_max_len,
                         gc, labels * shape.hidden, False)
    r = "" if rm.rm_finetune == "full" else f" r{s.lora_r}"
    return StagePlan(which.upper(), f"{rm.rm_finetune}{r}, {seqs} seqs x {rm.rm_max_len}"
                                    f"{', ckpt' if gc else ''}", parts)


def estimate_ppo(cfg, shapes: dict[str, Shape], prompt_len: int = 256, checkpointing: bool = False) -> StagePlan:
    """PPO as ppo/trainer.py runs it: persistent policy + adapter + AdamW + reward models, plus the largest of
    the rollout (KV cache), scoring (no grad, hidden states kept), update (no recomputation unless
    ``checkpointing``) and reward-model scoring phases."""
    ppo, s, rm, d = cfg.ppo, cfg.sft, cfg.reward_model, dtype_bytes(cfg)
    base, four_bit = shapes["base"], s.finetune == "qlora"  # ppo.policy.load_policy: 4-bit iff SFT was QLoRA
    weights = weight_bytes(base, "nf4-dq" if four_bit else "", d, d, 0 if base.tied else base.vocab * base.hidden)
    trainable = 16 * (lora_params(base, ppo.lora_r, s.lora_targets) + base.hidden + 1)  # adapter + value head
    rms = [("irm", 1)] + ([("prm", 2)] if rm.answer_reward == "prm" else [])
    # rewards.reward.RewardScorer → load_rm: 4-bit (no double quant) or fp32
    for which, labels in rms:
        sh = shapes[which]
        weights += weight_bytes(sh, "nf4" if four_bit else "", 4, 2 if four_bit else 4, labels * sh.hidden)
        if four_bit and rm.rm_finetune != "full":  # the adapter stays unmerged on a 4-bit base, in fp32
            weights += 4 * lora_params(sh, s.lora_r, s.lora_targets)
    S, mb, gen = prompt_len + ppo.max_new_tokens, ppo.mini_batch, ppo.gen_batch
    update = (train_activation_bytes(base, mb * S, "qlora" if four_bit else "lora", (ppo.lora_r, s.lora_targets, 0.0),
                                     d, False, checkpointing, True)  # no autocast in ppo/trainer.py
              + mb * S * 4 * base.hidden  # the fp32 last hidden state the value head reads
              + (0 if checkpointing else mb * S * base.layers * d * base.hidden))  # output_hidden_states keeps all
    kv, rm_d = kv_cache_bytes(base, gen, S, d), 2 if four_bit else 4
    phases = {  # phase → (its sizes, its transient parts)
        "rollout": (f"{gen} x {S}", {"kv_cache": kv + kv // base.layers,  # + one layer's torch.cat growth
                                     "activations": inference_bytes(base, gen * prompt_len, d)}),
        "score": (f"{mb} x {S}", {"activations": inference_bytes(base, mb * S, d)
                                  + mb * S * (base.layers + 1) * d * base.hidden,  # output_hidden_states
                                  "logits": logit_bytes(mb * S, base.vocab, d, 3)}),
        "update": (f"{mb} x {S}", {"activations": update, "logits": logit_bytes(mb * S, base.vocab, d, 3)}),
        "rewards": (f"{gen} x {prompt_len}, {gen} x {min(S, rm.rm_max_len)}",  # rewards.reward scores gen_batch at a time
                    {"activations": max(inference_bytes(shapes["irm"], gen * prompt_len, rm_d),
                                        inference_bytes(shapes["prm"], gen * min(S, rm.rm_max_len), rm_d))}),
    }
    fixed = {"weights": weights, "trainable": trainable, "activations": 0, "logits": 0, "kv_cache": 0,
             "overhead": OVERHEAD}
    totals = {name: sum(fixed.values()) + sum(t.values()) for name, (_, t) in phases.items()}
    name = max(totals, key=totals.get)
    return StagePlan("PPO", f"{len(rms)} RMs {'4-bit' if four_bit else 'fp32'}, r{ppo.lora_r}; peak: {name} "
                            f"{phases[name][0]}{', ckpt' if checkpointing else ''}", {**fixed, **phases[name][1]}, totals)


def plan(cfg, shapes: dict[str, Shape], prompt_len: int = 256, ppo_checkpointing: bool = False) -> list[StagePlan]:
    return [estimate_sft(cfg, shapes["base"]), estimate_rm(cfg, shapes["irm"], "irm"),
            estimate_rm(cfg, shapes["prm"], "prm"), estimate_ppo(cfg, shapes, prompt_len, ppo_checkpointing)]


# ------------------------------------------------------------------------------ proposals

def with_values(cfg, section: str, **values):
    """``cfg`` with ``values`` in ``section`` (no re-validation: the planner only reads them)."""
    return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **values)})


KNOBS = {"SFT": ("sft", ["batch_size"], "max_seq_len"), "IRM": ("reward_model", ["rm_batch_size"], "rm_max_len"),
         "PRM": ("reward_model", ["rm_batch_size"], "rm_max_len"), "PPO": ("ppo", ["mini_batch", "gen_batch"], "max_new_tokens")}


def propose(cfg, shapes, stage: str, card: float, prompt_len: int = 256, ppo_checkpointing: bool = False,
            max_batch: int = 64) -> dict[str, int] | None:
    """The largest power-of-two micro-batch(es) that fit ``card`` at the configured length, else at the
    longest halved length that fits with batch 1; None when neither the configured length nor any halving of it
    down to 128 tokens fits."""
    section, batch_keys, len_key = KNOBS[stage]
    cap = cfg.ppo.rollout_batch if stage == "PPO" else max_batch

    def fits(c) -> bool:
        est = {p.stage: p for p in plan(c, shapes, prompt_len, ppo_checkpointing)}
        return est[stage].fits(card)

    length = getattr(getattr(cfg, section), len_key)
    first = True
    while first or length >= 128:  # the configured length always, however short (a tiny preset's 80 tokens)
        first = False
        c, found = with_values(cfg, section, **{len_key: length, **{k: 1 for k in batch_keys}}), {}
        for key in batch_keys:
            b = 1
            while b * 2 <= cap and fits(with_values(c, section, **{key: b * 2})):
                b *= 2
            found[key] = b
        if fits(with_values(c, section, **found)):
            return {**found, len_key: length}
        length //= 2
    return None


# ------------------------------------------------------------------------------ report

COLUMNS = {"weights": "weights", "trainable": "train", "activations": "activ", "logits": "logits",
           "kv_cache": "kv", "overhead": "ovhd"}


def format_plan(cfg, shapes: dict[str, Shape], cards=(24, 40, 48, 80), prompt_len: int = 256,
                ppo_checkpointing: bool = False) -> str:
    """The table ``rleif plan`` prints: GiB per part and stage, fit per card, and per card the proposal."""
    b = shapes["base"]
    precision = "bf16" if cfg.base.bf16 else "fp16" if cfg.base.fp16 else "fp32"
    lines = [(f"{cfg.source}: {b.name} ({b.arch}: hidden {b.hidden}, {b.layers} layers, {b.heads}/{b.kv_heads} heads, "
              f"vocab {b.vocab}), {precision}; PPO prompts taken as {prompt_len} tokens"),
             "GiB; train = trainable weights + grads + AdamW; activ = kept for backward or the largest transient",
             f"{'stage':5} {'settings':46}" + "".join(f"{c:>8}" for c in COLUMNS.values()) + f"{'total':>8}  "
             + " ".join(f"{c:>3}GB" for c in cards)]
    for p in plan(cfg, shapes, prompt_len, ppo_checkpointing):
        cells = "".join(f"{p.parts[c] / GIB:8.2f}" for c in COLUMNS)
        fit = " ".join(f"{'yes' if p.fits(c) else 'no':>5}" for c in cards)
        lines.append(f"{p.stage:5} {p.settings[:46]:46}{cells}{p.total / GIB:8.2f}  {fit}")
    lines.append("\nlargest power-of-two micro-batch that fits (at the configured length unless one is shown):")
    for card in cards:
        props = []
        for stage, (section, _, length_key) in KNOBS.items():
            got = propose(cfg, shapes, stage, card, prompt_len, ppo_checkpointing)
            if got and got[length_key] == getattr(getattr(cfg, section), length_key):
                got.pop(length_key)
            props.append(f"{stage} " + (", ".join(f"{k} {v}" for k, v in got.items()) if got else "does not fit"))
        lines.append(f"  {card} GB ({usable_gib(card):.1f} GiB usable): " + " | ".join(props))
    s = cfg.sft
    problem = target_problem(cfg, b)
    if problem:
        lines.append(f"error: {problem}")
    if getattr(cfg.ppo, "algorithm", "ppo") != "ppo":
        lines.append("note: the PPO row models our own loop (ppo/trainer.py); [ppo] algorithm = 'grpo' (TRL) is "
                     "not modelled")
    lines.append(f"(a smaller [sft] batch_size keeps {s.batch_size * s.grad_accum} examples per step with a larger "
                 "grad_accum; rm_batch_size and mini_batch have no accumulation)")
    return "\n".join(lines)


def target_problem(cfg, shape: Shape) -> str:
    """Why ``[sft] lora_targets`` cannot be this model's (a name none of its Linears has: Llama's q_proj on
    StarCoder adapts nothing, and peft stops), or ''."""
    if cfg.sft.finetune == "full" and cfg.reward_model.rm_finetune == "full":
        return ""
    unknown = [t for t in cfg.sft.lora_targets if t not in shape.lora_targets]
    if not unknown:
        return ""
    return (f"[sft] lora_targets = {list(cfg.sft.lora_targets)!r}: {', '.join(unknown)} not a Linear of {shape.name} "
            f"({shape.arch}: {', '.join(shape.lora_targets)})")


def dtype_bytes(cfg) -> int:
    """Bytes per value the stages train in: 2 for bf16 or fp16, 4 for fp32."""
    return 2 if cfg.base.bf16 or cfg.base.fp16 else 4


# ------------------------------------------------------------------------------ presets that fit

def model_params(shape: Shape) -> int:
    """Decoder parameters (every layer's linears, the embeddings and an untied LM head): the size presets of
    other models are sorted by."""
    embeddings = shape.vocab * shape.hidden * (1 if shape.tied else 2)
    return shape.layers * sum(i * o for i, o in shape.linears().values()) + embeddings


def same_model(a: Shape, b: Shape) -> bool:
    """Same architecture and size: a name does not tell ("/models/Llama-2-7b-hf" and "Llama-2-7b-hf" are one)."""
    return dataclasses.replace(a, name="") == dataclasses.replace(b, name="")


def format_fitting_presets(shape: Shape, presets: list[tuple], cards,
                           prompt_len: int = 256, ppo_checkpointing: bool = False, world: str = "") -> list[str]:
    """One line per card in ``cards``: the presets ``(label, cfg, shapes)`` whose every stage fits it.

    Only presets of the planned run's ``world`` count (CodeLlama-7B has Llama-2-7B's shape, and its preset is no
    advice for a math run). Presets of the planned model (``same_model``) are the advice when there are any: they
    change batches and lengths, not the model. Only when none is for this model do presets of other models count,
    largest model first, and never a preset that builds the offline tiny model ([tiny] build): it fits any card,
    and says nothing about training a real model on one."""
    presets = [p for p in presets if not world or p[1].base.world == world]  # a code preset is no math advice
    mine = [p for p in presets if same_model(p[2]["base"], shape)]
    others = sorted((p for p in presets if not p[1].tiny.build), key=lambda p: (-model_params(p[2]["base"]), p[0]))
    lines = []
    for card in cards:
        fit = [(label, sh["base"].name) for label, c, sh in (mine or others)
               if all(s.fits(card) for s in plan(c, sh, prompt_len, ppo_checkpointing))]
        if mine:
            lines.append(f"  {card} GB: " + (f"{', '.join(label for label, _ in fit)} (same model)" if fit
                                             else f"no shipped preset for {shape.name} fits"))
        else:
            lines.append(f"  {card} GB: no shipped preset is for {shape.name}; " + (
                "these for other models fit, largest first: " + ", ".join(f"{label} ({name})" for label, name in fit)
                if fit else "none for another model fits either"))
    return lines

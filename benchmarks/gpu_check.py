"""GPU check of the 7B recipe: QLoRA SFT speed and peak memory, one PPO step's peak, the planner's error.

    benchmarks/gpu_check.sh [--params params/wizardmath-7b-24gb.toml]   # a CUDA machine, <= 4 minutes
    .venv/bin/python benchmarks/gpu_check.py --dry-run                   # CPU: a tiny shape, same code path

Builds random-init models of Llama-2-7B's shape directly on the GPU (no download) and quantises their
decoder Linears to NF4 in memory, swapping in bitsandbytes ``Linear4bit`` as transformers' loader does.
Why not save and reload with a BitsAndBytesConfig: that writes and reads 13 GB per model, a minute or
more of the four; in memory each model is ready in seconds and is the same module tree.

1. SFT: ``prepare_model_for_kbit_training`` + the LoRA of [sft], checkpointing on, bf16 autocast (as the
   Trainer runs it), AdamW; tokens/s and peak memory at [sft] batch_size x 2048 tokens.
2. PPO: a ``ppo.policy.Policy`` (4-bit policy, PPO adapter, value head) and both reward models in 4-bit
   with their unmerged adapters (as ``rewards.reward.load_rm`` loads them), then the real
   ``ppo.trainer.generate_rollout``, ``score_rollout`` and ``ppo_step``; the peak of each phase.
3. The planner's figure for each, without its OVERHEAD (CUDA context, allocator slack), against
   ``torch.cuda.max_memory_allocated``.
Writes reports/bench/gpu.json after each part, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rleif_kit.models import planner as P  # noqa: E402
from rleif_kit.core.config import load_config  # noqa: E402
from rleif_kit.models.shapes import KNOWN_SHAPES, Shape  # noqa: E402

LLAMA2_7B = next(s for _, s in KNOWN_SHAPES if s.name == "Llama-2-7B")
TINY = Shape(64, 128, 2, 4, 4, 512, name="tiny (dry run)")
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def build(cls, shape: Shape, device: str, dtype, double_quant: bool, **config):
    """A random-init Llama of ``shape`` made on ``device``, decoder Linears swapped for NF4 Linear4bit."""
    import bitsandbytes as bnb
    import torch
    from transformers import LlamaConfig

    cfg = LlamaConfig(vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                      num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                      num_key_value_heads=shape.kv_heads, max_position_embeddings=4096, pad_token_id=0,
                      bos_token_id=1, eos_token_id=2, tie_word_embeddings=False, **config)
    torch.manual_seed(0)
    with torch.device(device):
        model = cls._from_config(cfg, dtype=dtype)
    for layer in model.model.layers:
        for block in (layer.self_attn, layer.mlp):
            for name in LINEARS:
                lin = getattr(block, name, None)
                if lin is None:
                    continue
                q = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=False, compute_dtype=dtype,
                                      compress_statistics=double_quant, quant_type="nf4", device="meta")
                q.weight = bnb.nn.Params4bit(lin.weight.data, requires_grad=False, compress_statistics=double_quant,
                                             quant_type="nf4", blocksize=64).to(device)  # .to() quantises
                setattr(block, name, q)
    model.to(device)  # a no-op when the device context placed everything already
    model.is_loaded_in_4bit = True  # what peft and prepare_model_for_kbit_training look for
    for p in model.parameters():
        p.requires_grad_(False)
    _free()
    return model


def _free():
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _reset():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak() -> int | None:
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def _compare(measured: int | None, planned_total: int) -> dict:
    planned = planned_total - P.OVERHEAD
    out = {"planned_gib": round(planned / P.GIB, 3), "measured_gib": None, "planner_error": None}
    if measured is not None:
        out.update(measured_gib=round(measured / P.GIB, 3), planner_error=round((planned - measured) / measured, 3))
    return out


class IdTokenizer:
    """Stands in for a tokenizer (no vocabulary files): every prompt is ``prompt_len`` random token ids."""

    pad_token_id, eos_token_id, padding_side = 0, 2, "left"

    def __init__(self, vocab: int, prompt_len: int):
        self.vocab, self.prompt_len = vocab, prompt_len

    def __call__(self, texts, return_tensors="pt", padding=True, **_):
        import torch
        from transformers import BatchEncoding

        ids = torch.randint(3, self.vocab, (len(texts), self.prompt_len))
        return BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})

    def decode(self, ids, skip_special_tokens=True) -> str:
        return ""


def check_sft(cfg, shape: Shape, device: str, dtype, seq: int, steps: int) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    s, t0 = cfg.sft, time.perf_counter()
    model = build(__import__("transformers").LlamaForCausalLM, shape, device, dtype, double_quant=True)
    model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    model = get_peft_model(model, LoraConfig(r=s.lora_r, lora_alpha=s.lora_alpha, lora_dropout=s.lora_dropout,
                                             target_modules=list(s.lora_targets), task_type="CAUSAL_LM", bias="none"))
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=s.lr)
    ids = torch.randint(3, shape.vocab, (s.batch_size, seq), device=device)
    built, warmup = time.perf_counter() - t0, 1
    for step in range(warmup + steps):
        if step == warmup:
            _reset()
            start = time.perf_counter()
        with torch.autocast(device_type=device, dtype=dtype, enabled=dtype != torch.float32):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    peak = _peak()
    seconds, last_loss = time.perf_counter() - start, loss.item()
    planned = P.estimate_sft(P.with_values(cfg, "sft", max_seq_len=seq), shape)
    del model, optimizer, loss
    _free()
    return {"batch": s.batch_size, "seq": seq, "lora_r": s.lora_r, "steps": steps, "build_s": round(built, 1),
            "seconds_per_step": round(seconds / steps, 3), "tokens_per_s": round(steps * s.batch_size * seq / seconds, 1),
            "loss": round(last_loss, 3), **_compare(peak, planned.total)}


def reward_model(cls, labels: int, shape: Shape, cfg, device: str, dtype):
    """A 4-bit reward model (no double quant) with an unmerged LoRA adapter of [sft], as load_rm gives."""
    from peft import LoraConfig, get_peft_model

    model = build(cls, shape, device, dtype, double_quant=False, num_labels=labels)
    if cfg.reward_model.rm_finetune != "full":
        s = cfg.sft
        model = get_peft_model(model, LoraConfig(r=s.lora_r, lora_alpha=s.lora_alpha, target_modules=list(s.lora_targets),
                                                 task_type="SEQ_CLS" if labels == 1 else "TOKEN_CLS", bias="none"))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def check_ppo(cfg, shape: Shape, device: str, dtype, prompt_len: int) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM, LlamaForSequenceClassification, LlamaForTokenClassification

    from rleif_kit.ppo.trainer import generate_rollout, ppo_step, score_rollout
    from rleif_kit.ppo.policy import Policy

    ppo, s, t0 = cfg.ppo, cfg.sft, time.perf_counter()
    cfg = P.with_values(cfg, "ppo", rollout_batch=ppo.gen_batch, ppo_epochs=1)  # one micro-batch: same peaks
    _reset()
    base = build(LlamaForCausalLM, shape, device, dtype, double_quant=True)
    torch.manual_seed(cfg.base.seed)
    model = get_peft_model(base, LoraConfig(r=ppo.lora_r, lora_alpha=ppo.lora_alpha, lora_dropout=0.0,
                                            target_modules=list(s.lora_targets), task_type="CAUSAL_LM", bias="none"))
    value_head = torch.nn.Linear(shape.hidden, 1).to(device=device, dtype=torch.float32)
    policy = Policy(model, value_head, IdTokenizer(shape.vocab, prompt_len))
    irm = reward_model(LlamaForSequenceClassification, 1, shape, cfg, device, dtype)
    prm = reward_model(LlamaForTokenClassification, 2, shape, cfg, device, dtype)
    loaded = torch.cuda.memory_allocated() if torch.cuda.is_available() else None
    built, measured = time.perf_counter() - t0, {}
    _reset()
    roll = generate_rollout(policy, ["prompt"] * ppo.gen_batch, cfg)
    measured["rollout"] = _peak()
    _reset()
    score_rollout(policy, roll, ppo.mini_batch)
    measured["score"] = _peak()
    _reset()
    S = roll.input_ids.shape[1]
    with torch.no_grad():  # rewards.reward.RewardScorer scores gen_batch at a time
        ri = torch.sigmoid(irm(input_ids=torch.randint(3, shape.vocab, (ppo.gen_batch, prompt_len), device=device)
                               ).logits[:, 0].float())
        pl = min(S, cfg.reward_model.rm_max_len)
        ra = prm(input_ids=torch.randint(3, shape.vocab, (ppo.gen_batch, pl), device=device)).logits[:, -1].float()
        ra = torch.softmax(ra, dim=-1)[:, 1]
    measured["rewards"] = _peak()
    reward = (ri * ra).tolist()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=ppo.lr)
    _reset()
    stats = ppo_step(policy, optimizer, roll, {"reward": reward}, cfg, ppo.kl_coef)
    measured["update"] = _peak()
    planned = P.estimate_ppo(cfg, {"base": shape, "irm": shape, "prm": shape}, prompt_len=prompt_len)
    peaks = [m for m in measured.values() if m is not None]
    out = {"gen_batch": ppo.gen_batch, "mini_batch": ppo.mini_batch, "prompt_len": prompt_len,
           "response_len": S - roll.prompt_width, "build_s": round(built, 1),
           "loaded_gib": None if loaded is None else round(loaded / P.GIB, 3),
           "seconds": round(time.perf_counter() - t0, 1), "policy_loss": stats.get("policy_loss"),
           "phases": {k: _compare(measured[k], planned.phases[k]) for k in measured},
           **_compare(max(peaks) if peaks else None, planned.total),
           "note": "rollout and score run before the first update: no AdamW state yet (the planner counts it)"}
    del policy, model, base, irm, prm, optimizer, roll
    _free()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params" / "wizardmath-7b-24gb.toml"))
    parser.add_argument("--seq", type=int, default=2048, help="SFT tokens per sequence")
    parser.add_argument("--steps", type=int, default=3, help="timed SFT steps (after one warm-up step)")
    parser.add_argument("--prompt-len", type=int, default=256)
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench" / "gpu.json"))
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shape: exercise the code path only")
    args = parser.parse_args(argv)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU visible (torch.cuda.is_available() is False); run it on a CUDA machine, "
              "or pass --dry-run for the CPU path", file=sys.stderr)
        return 2
    cfg = load_config(args.params)
    if args.dry_run:  # fp32 on CPU, tiny sizes; the memory figures stay None
        cfg = P.with_values(P.with_values(P.with_values(cfg, "base", bf16=False), "sft", batch_size=2, lora_r=4),
                            "ppo", gen_batch=2, mini_batch=1, max_new_tokens=4)
        shape, device, dtype, seq, prompt_len = TINY, "cpu", torch.float32, 32, 8
    else:
        shape, device, dtype, seq, prompt_len = LLAMA2_7B, "cuda", torch.bfloat16, args.seq, args.prompt_len
    import bitsandbytes
    import transformers

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu (dry run)",
              "torch": torch.__version__, "transformers": transformers.__version__,
              "bitsandbytes": bitsandbytes.__version__, "params": args.params, "shape": shape.name}
    t0 = time.perf_counter()
    for part, run in (("sft", lambda: check_sft(cfg, shape, device, dtype, seq, args.steps)),
                      ("ppo", lambda: check_ppo(cfg, shape, device, dtype, prompt_len))):
        report[part] = run()
        report["seconds"] = round(time.perf_counter() - t0, 1)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"{part}: {json.dumps(report[part])}", flush=True)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

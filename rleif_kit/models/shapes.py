"""Model shapes for the memory planner: hidden size, layers, heads, vocabulary — without loading weights.

A model's shape comes from its ``config.json`` (a local directory, or a hub id already in the Hugging
Face cache), else from the preset's ``[tiny]`` sizes when the tiny model is built on first use, else
from a table of known models matched on substrings of the name (so "Wizard-E-7B" is a Llama-2-7B).

Two architectures: Llama's (GQA attention in q/k/v/o_proj, a SwiGLU MLP; CodeLlama and deepseek-coder are
Llama-shaped) and GPTBigCode's (StarCoder, WizardCoder-15B's base: multi-query attention — one K and one V head
shared by every query head — fused into one ``c_attn`` Linear, ``c_proj`` after it, a GELU MLP of ``c_fc`` and
``c_proj``, learned position embeddings, LayerNorms with biases).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class ShapeError(ValueError):
    pass


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool = False
    name: str = ""
    arch: str = "llama"  # or "gpt_bigcode"
    positions: int = 0  # learned position embeddings (GPTBigCode's wpe); 0 = rotary (Llama)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each Linear of one decoder layer, by module name (LoRA's ``target_modules`` match the last
        part: ``c_proj`` adapts GPTBigCode's ``attn.c_proj`` and ``mlp.c_proj`` both)."""
        h, i, kv = self.hidden, self.intermediate, self.kv_heads * self.head_dim
        if self.arch == "gpt_bigcode":
            return {"attn.c_attn": (h, h + 2 * kv), "attn.c_proj": (h, h), "mlp.c_fc": (h, i), "mlp.c_proj": (i, h)}
        return {"q_proj": (h, self.heads * self.head_dim), "k_proj": (h, kv), "v_proj": (h, kv),
                "o_proj": (self.heads * self.head_dim, h), "gate_proj": (h, i), "up_proj": (h, i),
                "down_proj": (i, h)}

    @property
    def lora_targets(self) -> list[str]:
        """Every Linear of a layer as LoRA's ``target_modules`` name it (QLoRA's all-linear choice)."""
        return list(dict.fromkeys(name.split(".")[-1] for name in self.linears()))


# Llama-2 paper Table 1 / the published config.json files; first match on lower-cased name substrings wins
KNOWN_SHAPES = [
    (("starcoder",), Shape(6144, 24576, 40, 48, 1, 49152, name="StarCoder-15B", arch="gpt_bigcode", positions=8192)),
    (("deepseek-coder", "33b"), Shape(7168, 19200, 62, 56, 8, 32256, name="DeepSeek-Coder-33B")),
    (("codellama", "34b"), Shape(8192, 22016, 48, 64, 8, 32000, name="CodeLlama-34B")),
    (("codellama", "7b"), Shape(4096, 11008, 32, 32, 32, 32000, name="CodeLlama-7B")),
    (("mistral", "7b"), Shape(4096, 14336, 32, 32, 8, 32000, name="Mistral-7B")),
    (("70b",), Shape(8192, 28672, 80, 64, 8, 32000, name="Llama-2-70B")),
    (("34b",), Shape(8192, 22016, 48, 64, 8, 32000, name="CodeLlama-34B")),
    (("13b",), Shape(5120, 13824, 40, 40, 40, 32000, name="Llama-2-13B")),
    (("7b",), Shape(4096, 11008, 32, 32, 32, 32000, name="Llama-2-7B")),
]


def shape_from_config(path: Path, name: str = "") -> Shape:
    c = json.loads(Path(path).read_text())
    if c.get("model_type") == "gpt_bigcode":  # n_embd / n_inner / n_layer / n_head, one KV head when multi_query
        h = c["n_embd"]
        return Shape(h, c.get("n_inner") or 4 * h, c["n_layer"], c["n_head"], 1 if c.get("multi_query", True)
                     else c["n_head"], c["vocab_size"], bool(c.get("tie_word_embeddings", True)),
                     name or str(Path(path).parent), arch="gpt_bigcode", positions=c.get("n_positions", 0))
    return Shape(c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
                 c.get("num_key_value_heads") or c["num_attention_heads"], c["vocab_size"],
                 bool(c.get("tie_word_embeddings", False)), name or str(Path(path).parent))


def resolve_shape(name: str, cfg=None) -> Shape:
    """The shape of model ``name``: a local config.json, the HF cache, the tiny preset, or the table."""
    local = cfg.resolve(name) if cfg is not None else Path(name).expanduser()
    if (local / "config.json").exists():
        return shape_from_config(local / "config.json", name)
    if cfg is not None and cfg.tiny.build and local == cfg.resolve(cfg.base.model_name):
        t = cfg.tiny  # built on first use by models.ensure_base_model with these sizes
        return Shape(t.hidden_size, t.intermediate_size, t.layers, t.heads, t.heads, t.vocab_size, name="tiny")
    if name.count("/") == 1:
        try:
            from huggingface_hub import try_to_load_from_cache  # heavy: loaded on first use

            cached = try_to_load_from_cache(name, "config.json")
            if isinstance(cached, str):
                return shape_from_config(Path(cached), name)
        except ImportError:  # pragma: no cover
            pass
    low = name.lower()
    for keys, shape in KNOWN_SHAPES:
        if all(k in low for k in keys):
            return shape
    known = ", ".join(sorted({s.name.lower() for _, s in KNOWN_SHAPES}))
    raise ShapeError(f"cannot tell the shape of model {name!r}: no local config.json and no known size in the name; "
                    f"pass --shape with one of {known}, or a local model directory")


def resolve_shapes(cfg, override: str | None = None) -> dict[str, Shape]:
    """Shapes of the policy ('base') and the two reward models ('sft' as a base means the policy's)."""
    if override:
        one = resolve_shape(override)
        return {"base": one, "irm": one, "prm": one}
    base = resolve_shape(cfg.base.model_name, cfg)
    rm = cfg.reward_model
    return {"base": base, "irm": base if rm.irm_base == "sft" else resolve_shape(rm.irm_base, cfg),
            "prm": base if rm.prm_base == "sft" else resolve_shape(rm.prm_base, cfg)}

"""GPU memory arithmetic, one function per term, in bytes — the planner (``planner.py``) adds them up.

Each term models the code that allocates it, named in its docstring: change that code, change this.
Sources:
- NF4: Dettmers et al. 2023, "QLoRA" §3, and bitsandbytes ``quantize_4bit``: 4 bits per weight plus
  one fp32 absmax per 64 weights (0.5 bit/weight), or, double-quantised, an 8-bit absmax plus one fp32
  per 256 blocks and one fp32 offset per tensor (8/64 + 32/(64*256) = 0.127 bit/weight). Embeddings,
  lm_head, norms and reward heads stay unquantised.
- Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models" §4.1 (34sbh + 5as²b bytes per GPT layer), adapted to Llama in ``layer_activation_bytes`` and
  ``linear_input_bytes``; tests/test_planner.py checks both against what autograd saves on a tiny Llama.
- AdamW (torch): two states shaped like each trainable parameter, in its dtype.
"""

from __future__ import annotations

import math

from rleif_kit.models.shapes import Shape


def nf4_bytes(n: int, double_quant: bool = True) -> int:
    """One weight tensor of ``n`` values in NF4: packed nibbles plus its quantisation constants."""
    blocks = math.ceil(n / 64)
    consts = blocks + 4 * math.ceil(blocks / 256) + 4 if double_quant else 4 * blocks
    return math.ceil(n / 2) + consts


def weight_bytes(shape: Shape, quant: str, d: int, rest_bytes: int, head_params: int) -> int:
    """Decoder Linears in ``quant`` ('nf4-dq', 'nf4', or '' = ``d`` bytes each); the embedding, the head
    (``head_params``: lm_head V*h, a reward head labels*h) and the 2L+1 RMSNorms at ``rest_bytes`` each."""
    per_layer = sum(i * o for i, o in shape.linears().values())
    if quant:
        linears = shape.layers * sum(nf4_bytes(i * o, quant == "nf4-dq") for i, o in shape.linears().values())
    else:
        linears = shape.layers * per_layer * d
    norms = (2 * shape.layers + 1) * shape.hidden * (2 if shape.arch == "gpt_bigcode" else 1)  # LayerNorm: + bias
    biases = shape.layers * sum(o for _, o in shape.linears().values()) if shape.arch == "gpt_bigcode" else 0
    rest = (shape.vocab + shape.positions) * shape.hidden + head_params + norms + biases
    return linears + rest * rest_bytes


def lora_params(shape: Shape, r: int, targets) -> int:
    """r * (in + out) per adapted Linear per layer (A is r x in, B is out x r); unknown targets count 0."""
    lin = shape.linears()
    return shape.layers * sum(r * (i + o) for name, (i, o) in lin.items() if name.split(".")[-1] in targets)


def precision(mode: str, d: int, autocast: bool) -> tuple[int, int]:
    """Bytes per value of (the residual stream and norm outputs, the MLP intermediates). QLoRA under the
    Trainer's autocast runs both in fp32: prepare_model_for_kbit_training makes the embedding and norms
    fp32, and bnb's Linear4bit returns its output in its input's dtype."""
    return (4, 4) if mode == "qlora" and autocast and d < 4 else (d, d)


def layer_activation_bytes(shape: Shape, d: int, mlp: int | None = None) -> int:
    """Bytes one token keeps for backward in one Llama layer besides the Linears' inputs (``d``-byte
    attention, ``mlp``-byte MLP values).

    Korthikanti et al. tally a GPT layer as 34sbh + 5as²b; for Llama under SDPA/flash attention:
    - 2 x (4h + 4): each RMSNorm keeps its input upcast to fp32, and the fp32 rsqrt (their 4sbh);
    - d(h + 2 kv) + d h + 4a: Q, K, V, the output and fp32 log-sum-exp per head that flash attention
      keeps (their 4sbh + 2sbh + 2sbh; no s² scores, so their 5as²b drops; with GQA, kv < h);
    - 3 mlp i: the gate output (SiLU's input), SiLU and up outputs (the product's inputs); their GeLU MLP
      kept 8sbh + 8sbh at i = 4h;
    - no dropout masks (Llama has none). The Linears' inputs: ``linear_input_bytes``.
    tests/test_planner.py checks this against the bytes autograd saves on a tiny Llama.
    """
    h, i, kv = shape.hidden, shape.intermediate, shape.kv_heads * shape.head_dim
    if shape.arch == "gpt_bigcode":
        return bigcode_layer_bytes(shape, d, mlp)
    return 8 * h + 8 + d * (2 * h + 2 * kv) + 4 * shape.heads + 3 * (mlp or d) * i


def bigcode_layer_bytes(shape: Shape, d: int, mlp: int = 0) -> int:
    """The same for a GPTBigCode layer (StarCoder), counted from what autograd saves (tests/test_planner.py):
    the two LayerNorms' inputs and their mean and rstd (4 values), the fused c_attn output (h + 2 kv: the query
    is a view of it), contiguous copies of the one K and V head, SDPA's fp32 log-sum-exp per head, attention's
    output (c_proj's input) and the GELU's input (c_fc's output); the Linears' other inputs are
    ``linear_input_bytes``'. Dropout is left out: flash attention applies it in the kernel, and StarCoder's
    resid_pdrop adds a 1-byte mask of h per token twice, which fine-tuning recipes set to 0 or accept."""
    h, i, kv = shape.hidden, shape.intermediate, shape.kv_heads * shape.head_dim
    m = mlp or d
    return 2 * h * m + 4 * m + d * (h + 2 * kv) + d * 2 * kv + 4 * shape.heads + d * h + m * i


# which input a Linear reads: 0 the normed attention input, 1 attention's output, 2 the normed MLP input, 3 the
# MLP's intermediate (SwiGLU's product, GELU's output)
GROUP = {"q_proj": 0, "k_proj": 0, "v_proj": 0, "o_proj": 1, "gate_proj": 2, "up_proj": 2, "down_proj": 3,
         "attn.c_attn": 0, "attn.c_proj": 1, "mlp.c_fc": 2, "mlp.c_proj": 3}


def linear_input_bytes(shape: Shape, mode: str, targets, r: int, dropout: float, d: int, autocast: bool) -> int:
    """Bytes one token keeps per layer for the Linears' weight gradients: their inputs.

    Full fine-tuning keeps the normed attention and MLP inputs, the SwiGLU product (their 2sbh + 2sbh +
    8sbh) and, as the norms' weights train, the two normalised inputs; o_proj's input is flash
    attention's output, already counted. With a frozen base only the LoRA paths (peft
    ``lora_B(lora_A(dropout(x)))``) keep anything: a dropout keeps a 1-byte mask (CUDA) and its output;
    peft's plain Linear casts x to the fp32 adapters first (autocast then keeps a bf16 copy), bnb's
    Linear4bit only without autocast, where under autocast lora_A keeps a bf16 cast of an fp32 x (QLoRA's
    norm outputs and product) or else the shared x itself. Plus lora_A's output, r values.
    """
    h, i = shape.hidden, shape.intermediate
    res, mlp = precision(mode, d, autocast)
    if mode == "full":  # GPTBigCode: c_attn's and c_fc's inputs and the GELU output (c_proj's: attention's output)
        return d * (2 * h + i) if shape.arch == "gpt_bigcode" else d * (4 * h + i)
    width = {0: (h, res), 1: (h, 0), 2: (h, res), 3: (i, mlp)}  # group: (input width, bytes if kept shared)
    shared, total, a_dtype = set(), 0, d if autocast else 4
    for t in (t for t in shape.linears() if t in GROUP and t.split(".")[-1] in targets):
        x_bytes = width[GROUP[t]][1] or d
        if dropout > 0:
            copy = a_dtype + 1
        elif not autocast:
            copy = 4 if x_bytes < 4 else 0
        else:
            copy = d if mode == "lora" or (x_bytes == 4 and d < 4) else 0
        total += copy * width[GROUP[t]][0] + a_dtype * r
        if not copy:
            shared.add(GROUP[t])
    return total + sum(width[g][0] * width[g][1] for g in shared)


def activation_bytes(shape: Shape, tokens: int, per_layer: int, keep: int, checkpointing: bool) -> int:
    """Without recomputation every layer keeps ``per_layer`` per token; with HF's per-layer gradient
    checkpointing each layer keeps its input (``keep`` bytes x h; Korthikanti's "full recomputation"
    2sbhL) and one layer's full set exists at a time during backward."""
    if checkpointing:
        return tokens * (shape.layers * keep * shape.hidden + per_layer)
    return tokens * shape.layers * per_layer


def train_activation_bytes(shape: Shape, tokens: int, mode: str, lora: tuple, d: int, autocast: bool,
                           checkpointing: bool, lm_head: bool) -> int:
    """A training forward: the layers (above), the final norm's fp32 input, and what autocast adds once —
    bf16 copies of the fp32 LoRA weights (kept while the graph lives; recomputed per layer under
    checkpointing) and, for QLoRA's fp32 lm_head, a bf16 copy kept for the input gradient."""
    r, targets, dropout = lora
    res, mlp = precision(mode, d, autocast)
    per_layer = layer_activation_bytes(shape, d, mlp) + linear_input_bytes(shape, mode, targets, r, dropout, d, autocast)
    total = activation_bytes(shape, tokens, per_layer, res, checkpointing) + tokens * (4 * shape.hidden + 4)
    if autocast and mode != "full" and not checkpointing:
        total += d * lora_params(shape, r, targets)
    if autocast and mode == "qlora" and lm_head:
        total += d * shape.vocab * shape.hidden
    return total


def logit_bytes(tokens: int, vocab: int, d: int, fp32_copies: int) -> int:
    """Vocabulary-sized tensors: the lm_head output in ``d`` bytes plus ``fp32_copies`` fp32 buffers
    (the loss's upcast and log-softmax; in PPO also its gradient / the entropy's exp)."""
    return tokens * vocab * (d + 4 * fp32_copies)


def kv_cache_bytes(shape: Shape, batch: int, seq: int, d: int) -> int:
    """K and V of every layer for ``batch`` sequences of ``seq`` tokens (HF DynamicCache, dtype ``d``)."""
    return batch * seq * shape.layers * 2 * shape.kv_heads * shape.head_dim * d


def inference_bytes(shape: Shape, tokens: int, d: int) -> int:
    """Working set of a no-grad forward (one layer at a time): residual, normed input, gate, up and SiLU
    outputs in ``d`` bytes and the norm's fp32 upcast, per token."""
    return tokens * (4 * shape.hidden + d * (2 * shape.hidden + 3 * shape.intermediate))

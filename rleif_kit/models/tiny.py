"""The offline tiny Llama: a random-init ``LlamaForCausalLM`` plus a BPE tokenizer trained on the fly.

Tests and the CPU demo cannot download a checkpoint, so they build one here and save it in the
standard transformers format; every stage then loads it by path exactly like a real model.

Why these choices:
- digits are always single tokens (``Digits(individual_digits=True)``), so ``123`` is ``1 2 3`` and
  column arithmetic is learnable by a model this small;
- byte-level BPE, so any text round-trips (no unknown token) and spaces survive decoding;
- ``</s>`` is both EOS and padding, ``<s>`` is BOS, as in Llama-2;
- a chat template (``CHAT_TEMPLATE``) that writes the Alpaca prompt the kit fine-tunes on, so a chat server
  (``transformers serve``, docs/testing.md) can serve the model: without one it answers 500.

Build one by hand::

    rleif build-tiny ./tiny-llama   # from the arithmetic world's corpus (worlds/tiny_corpus.py)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from rleif_kit.core.paths import staged_dir

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]

# The user turns, joined by a blank line, in the Alpaca prompt without chain of thought: character for character
# what llm/hf_backend.messages_to_prompt writes for a model without a template (evolution's ``alpaca_prompt``;
# tests/test_tiny.py pins the two together), so the local backend asks the tiny model exactly as before. Other
# roles are left out as there. Content may be a string or OpenAI-style parts ({"type": "text", "text": ...}).
CHAT_TEMPLATE = (
    "{%- set ns = namespace(turns=[]) -%}"
    "{%- for m in messages if m['role'] == 'user' -%}"
    "{%- if m['content'] is string -%}{%- set ns.turns = ns.turns + [m['content']] -%}"
    "{%- elif m['content'] -%}"
    "{%- set ns.turns = ns.turns + [m['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') "
    "| join(' ')] -%}"
    "{%- else -%}{%- set ns.turns = ns.turns + [''] -%}{%- endif -%}"
    "{%- endfor -%}"
    "{{- 'Below is an instruction that describes a task. Write a response that appropriately completes the "
    "request.\\n\\n### Instruction:\\n' + ns.turns | join('\\n\\n') + '\\n\\n### Response:' -}}"
)


@dataclass(frozen=True)
class TinyShape:
    """Sizes of the tiny Llama (defaults: about 0.4M parameters with a 1,000-token vocabulary)."""

    vocab_size: int = 1000
    hidden_size: int = 128
    layers: int = 2
    heads: int = 4
    intermediate_size: int = 256
    max_position_embeddings: int = 512


def train_tokenizer(corpus: Iterable[str], vocab_size: int):
    """Train a byte-level BPE with single-digit tokens and wrap it as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # heavy: loaded on first use
    from transformers import PreTrainedTokenizerFast  # heavy: loaded on first use

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="</s>",
        padding_side="left",  # generation pads on the left; training collators pad explicitly
        model_max_length=512,
    )
    fast.chat_template = CHAT_TEMPLATE  # saved as chat_template.jinja beside the tokenizer
    return fast


def build_tiny_model(out_dir: str | Path, corpus: Iterable[str], shape: TinyShape = TinyShape(),
                     seed: int = 0) -> Path:
    """Train the tokenizer on ``corpus``, build a random-init Llama of ``shape`` and save both.

    Built in a sibling folder and renamed into place, so a crash never leaves half a model at ``out_dir``.
    """
    import torch  # heavy: loaded on first use
    from transformers import LlamaConfig, LlamaForCausalLM  # heavy: loaded on first use

    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: the tiny model is built only where no model is")
    tokenizer = train_tokenizer(corpus, shape.vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        max_position_embeddings=shape.max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    with staged_dir(out, replace=False) as building:  # never over a model that appeared meanwhile
        model.save_pretrained(building)
        tokenizer.save_pretrained(building)
        (building / "tiny_shape.json").write_text(json.dumps(asdict(shape), indent=2) + "\n")
    return out

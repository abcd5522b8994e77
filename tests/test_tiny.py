"""The offline tiny model factory: builds, saves in the standard format, loads back by path."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def is_tiny_model_dir(path) -> bool:
    """True when ``path`` holds a complete tiny model (config, weights, tokenizer)."""
    return all((path / f).exists() for f in ("config.json", "tokenizer.json", "tiny_shape.json")) and any(
        path.glob("*.safetensors"))


def test_round_trip_loads_like_a_checkpoint(small_model_dir):
    assert is_tiny_model_dir(small_model_dir)
    tok = AutoTokenizer.from_pretrained(small_model_dir)
    model = AutoModelForCausalLM.from_pretrained(small_model_dir)
    assert model.config.model_type == "llama"
    assert model.config.vocab_size == len(tok)
    ids = tok("Tom has 12 apples.", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok))


def test_digits_are_single_tokens_and_text_round_trips(small_model_dir):
    tok = AutoTokenizer.from_pretrained(small_model_dir)
    text = "Step 1: 128 + 7 = 135. The answer is: 135"
    ids = tok(text, add_special_tokens=False).input_ids
    assert tok.decode(ids) == text
    pieces = tok.convert_ids_to_tokens(tok("9041", add_special_tokens=False).input_ids)
    assert pieces == ["9", "0", "4", "1"]  # one token per digit: arithmetic is learnable


def test_special_tokens_are_llama_like(small_model_dir):
    tok = AutoTokenizer.from_pretrained(small_model_dir)
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<s>", "</s>", "</s>")
    model = AutoModelForCausalLM.from_pretrained(small_model_dir)
    assert model.config.eos_token_id == tok.eos_token_id


def test_an_incomplete_directory_is_not_a_tiny_model(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert not is_tiny_model_dir(tmp_path)


def test_a_model_already_at_base_model_name_is_never_replaced(small_model_dir, tmp_path):
    """[tiny] build makes the model only where none is: a loop iteration's PPO policy (a Llama without
    tiny_shape.json) stays as it is, byte for byte."""
    import shutil

    import pytest

    from conftest import TINY_PARAMS
    from rleif_kit.core.config import load_config
    from rleif_kit.worlds.tiny_corpus import ensure_base_model
    from rleif_kit.models.tiny import build_tiny_model

    policy = tmp_path / "05_ppo" / "model"
    shutil.copytree(small_model_dir, policy)
    (policy / "tiny_shape.json").unlink()
    before = (policy / "model.safetensors").read_bytes()
    cfg = load_config(TINY_PARAMS, [f'base.output_dir="{tmp_path}"', f'base.model_name="{policy}"'])
    assert cfg.tiny.build and ensure_base_model(cfg) == str(policy)
    assert (policy / "model.safetensors").read_bytes() == before and not (policy / "tiny_shape.json").exists()
    with pytest.raises(FileExistsError, match="is not empty"):
        build_tiny_model(policy, ["a b c"])


def test_the_chat_template_writes_the_prompt_the_kit_asks_without_one(small_model_dir):
    """A chat server needs a template (`transformers serve` answers 500 without one); the tiny model's writes the
    Alpaca prompt character for character as the local backend's fallback does, so nothing the kit asks changes."""
    from rleif_kit.evolve.evolvers import alpaca_prompt
    from rleif_kit.llm.hf_backend import messages_to_prompt

    assert (small_model_dir / "chat_template.jinja").exists()  # where transformers 5 saves it
    tok = AutoTokenizer.from_pretrained(small_model_dir)

    class NoTemplate:
        chat_template = None

    for messages in ([{"role": "user", "content": "Tom has 3 apples. How many?"}],
                     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "A"},
                      {"role": "assistant", "content": "B"}, {"role": "user", "content": "C"}],
                     [{"role": "user", "content": None}]):
        assert messages_to_prompt(messages, tok, alpaca_prompt) == messages_to_prompt(messages, NoTemplate(),
                                                                                      alpaca_prompt)
    parts = [{"role": "user", "content": [{"type": "text", "text": "Tom has 3 apples."}]}]  # OpenAI content parts
    assert tok.apply_chat_template(parts, tokenize=False, add_generation_prompt=True) == alpaca_prompt(
        "Tom has 3 apples.")


def test_the_presets_tiny_model_is_built_under_a_moved_output_dir(tmp_path):
    """--set base.output_dir alone: the tiny model is built at <output_dir>/tiny-llama, nowhere in the checkout."""
    from conftest import ROOT, TINY_PARAMS
    from rleif_kit.core.config import load_config
    from rleif_kit.worlds.tiny_corpus import ensure_base_model

    small = ["tiny.vocab_size=300", "tiny.hidden_size=32", "tiny.intermediate_size=64", "tiny.heads=2",
             "tiny.corpus_problems=100", "sft.open_domain_path=\"\""]
    cfg = load_config(TINY_PARAMS, [f'base.output_dir="{tmp_path / "run"}"', *small], workdir=ROOT)
    assert ensure_base_model(cfg) == str(tmp_path / "run" / "tiny-llama")
    assert is_tiny_model_dir(tmp_path / "run" / "tiny-llama")

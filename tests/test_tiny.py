"""The offline tiny model factory: builds, saves in the standard format, loads back by path."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rleif_kit.tiny import is_tiny_model_dir


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

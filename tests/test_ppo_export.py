"""PPO's export folder: every tensor in safetensors (the merged model and the value head), no pickle a Hub upload
would carry; ``from_pretrained`` loads it as it is and the value head comes back as it was trained.

On the small test model with a fresh LoRA adapter (nothing trained: the export's format is the point), under
pytest's tmp dirs; no network.
"""

from __future__ import annotations

import torch

from rleif_kit.ppo.policy import PICKLED_VALUE_HEAD, VALUE_HEAD, Policy, export_policy, load_value_head

PICKLE_SUFFIXES = {".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt"}


def test_the_export_has_no_pickle_and_the_value_head_round_trips(tmp_path, small_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(small_model_dir)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            task_type="CAUSAL_LM"))
    torch.manual_seed(0)
    head = torch.nn.Linear(base.config.hidden_size, 1)
    weight, bias = head.weight.detach().clone(), head.bias.detach().clone()
    out = tmp_path / "model"
    out.mkdir()
    torch.save(head.state_dict(), out / PICKLED_VALUE_HEAD)  # what an export before safetensors left here
    export_policy(Policy(model, head, AutoTokenizer.from_pretrained(small_model_dir)), out, "# card\n")

    files = [p for p in out.rglob("*") if p.is_file()]
    assert not [p.name for p in files if p.suffix in PICKLE_SUFFIXES]
    # torch.save writes a zip archive (or a bare pickle): no file of the folder starts like either
    assert not [p.name for p in files if p.read_bytes().startswith((b"PK\x03\x04", b"\x80"))]
    assert (out / "model.safetensors").exists() and (out / VALUE_HEAD).exists()

    again = load_value_head(out / VALUE_HEAD)
    assert isinstance(again, torch.nn.Linear) and (again.in_features, again.out_features) == (64, 1)
    assert torch.equal(again.weight, weight) and torch.equal(again.bias, bias)
    x = torch.randn(3, 64)
    assert torch.equal(again(x), head(x))
    assert AutoModelForCausalLM.from_pretrained(out).config.hidden_size == 64  # the folder loads as it is

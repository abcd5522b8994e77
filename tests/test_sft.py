"""SFT on the tiny model: the loss falls and every trainable parameter changes (full, LoRA, QLoRA).

Small data and few steps, so each test takes seconds on 2 CPU cores; no network.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from card_checks import absolute_paths_in, front_matter, run_usage
from rleif_kit.models.generation import generate
from rleif_kit.models.loading import load_merged
from rleif_kit.sft.stage import run_sft, train_sft
from rleif_kit.sft.examples import build_sft_examples
from rleif_kit.worlds.prompts import math_prompt

pytestmark = pytest.mark.slow

FAST = ("sft.dataset=\"arith:400\"", "sft.eval_samples=0", "sft.logging_steps=2", "sft.batch_size=16",
        "sft.open_domain_samples=4", "tiny.corpus_problems=300", "tiny.vocab_size=400", "tiny.hidden_size=64",
        "tiny.intermediate_size=128")


def _changed(initial: dict, model) -> list[str]:
    now = dict(model.named_parameters())
    return [n for n, p in initial.items() if not torch.equal(p, now[n].detach())]


def _losses(paths) -> list[float]:
    return [json.loads(line)["loss"] for line in paths.sft_log.read_text().splitlines() if '"loss"' in line]


def _train(cfg, paths):
    from rleif_kit.worlds.tiny_corpus import ensure_base_model

    return train_sft(cfg, paths, build_sft_examples(cfg, paths), ensure_base_model(cfg))


def test_full_finetuning_lowers_loss_and_changes_every_parameter(tiny_cfg):
    cfg, paths = tiny_cfg(*FAST, "sft.max_steps=20", "sft.finetune=\"full\"")
    trainer, _, initial = _train(cfg, paths)
    assert len(initial) == sum(1 for p in trainer.model.parameters())  # full: everything trains
    assert _changed(initial, trainer.model) == list(initial)
    losses = _losses(paths)
    assert losses[-1] < 0.8 * losses[0], losses


def test_lora_changes_every_adapter_parameter_and_only_those(tiny_cfg):
    cfg, paths = tiny_cfg(*FAST, "sft.max_steps=12", "sft.finetune=\"lora\"", "sft.lora_r=4", "sft.lr=1e-2")
    trainer, _, initial = _train(cfg, paths)
    assert initial and all("lora_" in n for n in initial)
    assert _changed(initial, trainer.model) == list(initial)  # LoRA B starts at 0, A moves from step 2
    losses = _losses(paths)
    assert losses[-1] < losses[0], losses


def test_qlora_loads_4bit_on_cpu_and_trains_the_adapters(tiny_cfg):
    import bitsandbytes as bnb

    cfg, paths = tiny_cfg(*FAST, "sft.max_steps=8", "sft.finetune=\"qlora\"", "sft.lora_r=4", "sft.lr=1e-2",
                          "sft.gradient_checkpointing=false")
    trainer, _, initial = _train(cfg, paths)
    quantized = [m for m in trainer.model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert quantized, "the base model's linear layers should be 4-bit NF4"
    assert quantized[0].weight.quant_state.quant_type == "nf4"
    assert _changed(initial, trainer.model) == list(initial)
    assert all(torch.isfinite(torch.tensor(x)) for x in _losses(paths))


def test_rerun_resumes_from_the_last_checkpoint(tiny_cfg):
    cfg, paths = tiny_cfg(*FAST, "sft.max_steps=6", "sft.save_steps=3", "sft.finetune=\"full\"")
    _train(cfg, paths)
    assert (paths.sft_checkpoints / "checkpoint-6").is_dir()
    cfg2, paths2 = tiny_cfg(*FAST, "sft.max_steps=9", "sft.save_steps=3", "sft.finetune=\"full\"")
    trainer, _, _ = _train(cfg2, paths2)
    assert trainer.state.global_step == 9
    steps = [json.loads(line)["step"] for line in paths.sft_log.read_text().splitlines() if '"loss"' in line]
    assert steps[-1] == 8 and max(steps[:3]) == 6  # second run logged only steps 7..9 (every 2nd)


def test_a_resumed_run_logs_each_step_once_as_an_uninterrupted_run_does(tiny_cfg):
    # issue 42: rows the interrupted run logged after its last checkpoint were appended to again (step 5 twice)
    small = ("sft.dataset=\"arith:200\"", "sft.batch_size=8", "tiny.corpus_problems=200", "tiny.hidden_size=32",
             "tiny.intermediate_size=64")
    cfg, paths = tiny_cfg(*FAST, *small, "sft.max_steps=6", "sft.save_steps=3", "sft.logging_steps=1",
                          "sft.finetune=\"full\"")
    _train(cfg, paths)
    whole = [json.loads(line) for line in paths.sft_log.read_text().splitlines()]
    shutil.rmtree(paths.sft_checkpoints / "checkpoint-6")  # killed after logging steps 4..6, before saving step 6
    _train(cfg, paths)  # resumes from checkpoint-3
    resumed = [json.loads(line) for line in paths.sft_log.read_text().splitlines()]
    fields = ("step", "loss", "grad_norm", "learning_rate")
    assert [[r.get(k) for k in fields] for r in resumed if "loss" in r] == \
        [[r.get(k) for k in fields] for r in whole if "loss" in r]  # steps 1..6, each once, the same figures
    assert [r["step"] for r in resumed if "loss" in r] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in resumed if "train_runtime" in r] == [6]  # one summary: the run that ended


def test_run_sft_saves_a_loadable_model_with_its_tokenizer(tiny_cfg, tmp_path):
    cfg, paths = tiny_cfg(*FAST, "sft.max_steps=4", "sft.finetune=\"lora\"", "sft.lora_r=4",
                          "sft.eval_samples=8", "sft.save_steps=2")
    result = run_sft(cfg, paths)
    assert (paths.sft_model / "adapter_config.json").exists()
    assert (paths.sft_model / "tokenizer.json").exists()
    model, tok = load_merged(paths.sft_model)
    assert not any("lora_" in n for n, _ in model.named_parameters())  # merged for inference
    assert result.accuracy_before is not None and result.accuracy_after is not None
    assert {v.check for v in result.verdicts} == {"step_format", "sft_learning"}
    assert tok.eos_token == "</s>"

    # the card: hub metadata, a snippet that generates what the kit generates, no TRL draft beside the checkpoints
    meta = front_matter(paths.sft_model)
    assert (meta.library_name, meta.pipeline_tag) == ("peft", "text-generation") and "sft" in meta.tags
    assert (paths.sft_checkpoints / "checkpoint-4").is_dir() and not (paths.sft_checkpoints / "README.md").exists()
    assert (paths.sft_model / "figures" / "training_loss.png").exists()
    card = run_usage(paths.sft_model)
    prompt = math_prompt(card["instruction"], cot=cfg.eval.cot_prompt)
    assert card["response"] == generate(model, tok, [prompt], cfg.eval.max_new_tokens, progress=False)[0]

    # no absolute path: the base is named from the model folder, and the run loads where it is moved to
    assert json.loads((paths.sft_model / "sft_info.json").read_text())["base_model"] == "../../tiny-llama"
    assert absolute_paths_in(paths.sft_model, tmp_path) == []
    moved = tmp_path / "elsewhere" / "run"
    shutil.move(paths.output_dir, moved)
    model2, _ = load_merged(moved / "03_sft" / "model")
    assert all(torch.equal(p, model2.state_dict()[n]) for n, p in model.state_dict().items())
    assert run_usage(moved / "03_sft" / "model")["response"] == card["response"]


def test_the_loss_is_on_the_response_only(tiny_cfg):
    """Prompt tokens are masked (-100) in the labels; every response token, and EOS, is learned."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    from rleif_kit.worlds.prompts import math_prompt, sft_completion
    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.worlds.tiny_corpus import ensure_base_model
    from rleif_kit.sft.stage import _trainer_args

    cfg, paths = tiny_cfg(*FAST)
    base = ensure_base_model(cfg)
    tok = load_tokenizer(base)
    prompt, completion = math_prompt("Tom has 3 pens. He buys 2 more pens."), sft_completion("Step 1: 3 + 2 = 5. The answer is: 5")
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(base), args=_trainer_args(cfg, paths, False),
                         train_dataset=Dataset.from_list([{"prompt": prompt, "completion": completion}]),
                         processing_class=tok)
    labels = trainer.data_collator([trainer.train_dataset[0]])["labels"][0].tolist()
    n_prompt = len(tok(prompt).input_ids)
    assert set(labels[:n_prompt]) == {-100}
    assert -100 not in labels[n_prompt:] and labels[-1] == tok.eos_token_id
    assert tok.decode(labels[n_prompt:], skip_special_tokens=True) == completion


def test_balanced_batches_keep_each_steps_random_examples_and_pad_less(tiny_cfg):
    """[sft] balance_batches (issue 32): each optimizer step still takes batch_size x grad_accum examples drawn at
    random (another seed draws others), split into grad_accum micro-batches sorted by length, which together pad
    fewer tokens than the same examples in one batch; the Trainer builds its loader from this sampler."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.sft.stage import _seeded_sampler, _trainer_args
    from rleif_kit.worlds.tiny_corpus import ensure_base_model

    def first_steps(seed: int) -> tuple[list[list[int]], list[int]]:
        cfg, paths = tiny_cfg(*FAST, "sft.batch_size=4", "sft.grad_accum=4", "sft.balance_batches=true",
                              f"base.seed={seed}")
        base = ensure_base_model(cfg)
        examples = build_sft_examples(cfg, paths)[:256]
        trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(base), args=_trainer_args(cfg, paths, False),
                             train_dataset=Dataset.from_list([{k: e[k] for k in ("prompt", "completion")}
                                                              for e in examples]),
                             processing_class=load_tokenizer(base))
        _seeded_sampler(trainer, seed)
        sampler = trainer._get_train_sampler()
        assert type(sampler).__name__ == "BatchRebalanceSampler" and sampler.seed == seed
        lengths = [len(ids) for ids in trainer.train_dataset["input_ids"]]
        return [list(mb) for _, mb in zip(range(8), iter(sampler))], lengths

    micro, lengths = first_steps(42)
    for step in (micro[:4], micro[4:]):
        rows = [i for mb in step for i in mb]
        assert len(rows) == 16 and len(set(rows)) == 16
        padded = sum(len(mb) * max(lengths[i] for i in mb) for mb in step)
        assert padded < 16 * max(lengths[i] for i in rows)  # one batch of the same 16 pads every row to the longest
        ranges = sorted((min(lengths[i] for i in mb), max(lengths[i] for i in mb)) for mb in step)
        assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))  # micro-batches split the step by length
    again, _ = first_steps(42)
    other, _ = first_steps(7)
    assert again == micro
    assert {i for mb in other[:4] for i in mb} != {i for mb in micro[:4] for i in mb}


def test_batched_tokenization_gives_trls_own_tokens_and_labels(tiny_cfg):
    """sft/tokenize.py: the examples tokenized in batches are, token for token and label for label, what SFTTrainer
    makes of the same prompt-completion rows itself (EOS added, the prompt masked), including a completion that
    already ends with EOS and one whose first word could merge with the prompt's last."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.sft.stage import _trainer_args
    from rleif_kit.sft.tokenize import tokenized_examples
    from rleif_kit.worlds.tiny_corpus import ensure_base_model

    cfg, paths = tiny_cfg(*FAST)
    base = ensure_base_model(cfg)
    tok = load_tokenizer(base)
    examples = [{k: e[k] for k in ("prompt", "completion")} for e in build_sft_examples(cfg, paths)[:60]]
    examples += [{"prompt": examples[0]["prompt"], "completion": examples[0]["completion"] + tok.eos_token},
                 {"prompt": examples[1]["prompt"] + " Step", "completion": "s 1: 2 + 2 = 4."}]

    def prepared(data):
        trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(base), args=_trainer_args(cfg, paths, False),
                             train_dataset=data, processing_class=tok)
        return [(row["input_ids"], row["labels"]) for row in trainer.train_dataset]

    ours = prepared(Dataset.from_dict(tokenized_examples(tok, examples, batch=16)))
    assert ours == prepared(Dataset.from_list(examples))
    assert all(labels[-1] == tok.eos_token_id and labels[0] == -100 for _, labels in ours)

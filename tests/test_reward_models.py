"""IRM training on the tiny model: loss falls, every trainable parameter changes, scores in [0, 1]."""

from __future__ import annotations

import pytest
import torch

from card_checks import front_matter, run_usage
from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.rewards.irm import train_irm
from rleif_kit.rewards.rm_datasets import split_by_group
from rleif_kit.rewards.reward import irm_score
from rleif_kit.core.run_setup import setup

pytestmark = pytest.mark.slow


def test_split_holds_out_whole_sibling_groups():
    pairs = [{"group": f"g{i // 3}", "chosen": i} for i in range(30)]  # 10 groups of 3 pairs
    train, held = split_by_group(pairs, 0.2, seed=0)
    assert len(held) == 2 * 3 and len(train) == 8 * 3  # 20% of 10 groups = 2 groups
    assert not {p["group"] for p in train} & {p["group"] for p in held}


def test_irm_trains_and_scores(tmp_path, small_model_dir):
    from datasets import load_dataset

    from rleif_kit.evolve.fanout import run_fanout
    from rleif_kit.worlds.data import load_seeds
    from rleif_kit.rewards.irm_data import quality_pairs
    from rleif_kit.worlds.arith.judge import arith_quality
    from rleif_kit.models.loading import trainable_parameters
    from rleif_kit.rewards.rm_training import load_rm_for_training
    from rleif_kit.rewards.reward import load_rm

    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", f'reward_model.irm_base="{small_model_dir}"',
                                                         "reward_model.rm_epochs=1", "evol_instruct.defect_rate=0.5",
                                                         "reward_model.rm_batch_size=16"),
                       stage="04_reward_models", report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    fanout = run_fanout(cfg, paths.stage("01_evolve") / "fanout.jsonl", list(load_seeds(cfg, paths))[:60], k=4,
                        progress=False)
    pairs = quality_pairs(fanout, arith_quality)
    initial = trainable_parameters(load_rm_for_training(str(small_model_dir), "sequence", cfg, False)[0])
    model, tok, result = train_irm(cfg, paths, pairs)
    now = dict(model.named_parameters())
    assert set(initial) == set(now)  # the head starts from the same seeded init in both loads
    unchanged = [n for n, p in initial.items() if torch.equal(p, now[n].detach())]
    assert unchanged == []  # every weight moved, the new score head included
    losses = [r["loss"] for r in result.log]
    assert losses[-1] < losses[0]
    scores = irm_score(model, tok, [p["chosen"] for p in pairs[:10]])
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert (result.model_dir / "README.md").exists() and result.heldout_pairs > 0
    reloaded, tok2 = load_rm(result.model_dir)
    assert irm_score(reloaded, tok2, [pairs[0]["chosen"]]) == pytest.approx(scores[:1], abs=1e-5)

    # the card's snippet reads rI as the kit does; the pairs lie beside the model as a hub-loadable dataset
    meta = front_matter(result.model_dir)
    assert meta.pipeline_tag == "text-classification" and "reward-model" in meta.tags
    assert not (result.model_dir / "checkpoints").exists()  # the Trainer's empty output_dir is not left behind
    card = run_usage(result.model_dir)
    assert card["r_i"] == pytest.approx(irm_score(reloaded, tok2, [card["instruction"]])[0], abs=1e-5)
    rows = load_dataset("json", data_files=str(paths.rm_rows("irm")), cache_dir=str(tmp_path / "hf"))["train"]
    assert rows["split"].count("train") == result.train_pairs and rows["split"].count("heldout") == result.heldout_pairs
    assert rows[0]["id"] == f"{rows[0]['chosen_id']}>{rows[0]['rejected_id']}" and rows[0]["chosen"]


@pytest.mark.slow
def test_irm_reads_the_eos_it_was_trained_at_when_pad_differs(small_model_dir):
    """TRL's RewardTrainer appends EOS to every text; with a pad token that is not EOS (Llama-3, Qwen,
    WizardLM's [PAD]) the head reads the EOS position in training, so scoring must append it too."""
    from transformers import AutoModelForSequenceClassification

    from rleif_kit.models.loading import load_tokenizer

    tok = load_tokenizer(str(small_model_dir))
    tok.add_special_tokens({"pad_token": "[PAD]"})
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(small_model_dir, num_labels=1)
    model.resize_token_embeddings(len(tok))
    model.config.pad_token_id = tok.pad_token_id
    assert tok.pad_token_id != tok.eos_token_id
    texts = ["Tom has 3 apples.", "How many apples does Mia have now? She had 12."]
    with torch.no_grad():  # one text at a time, as trained: text + EOS, head at the last (EOS) token
        trained_at = [torch.sigmoid(model(**tok(t + tok.eos_token, return_tensors="pt")).logits[0, 0]).item()
                      for t in texts]
        without_eos = [torch.sigmoid(model(**tok(t, return_tensors="pt")).logits[0, 0]).item() for t in texts]
    assert irm_score(model, tok, texts) == pytest.approx(trained_at, abs=1e-5)
    assert irm_score(model, tok, [t + tok.eos_token for t in texts]) == pytest.approx(trained_at, abs=1e-5)
    assert trained_at != pytest.approx(without_eos, abs=1e-4)  # the two positions really differ

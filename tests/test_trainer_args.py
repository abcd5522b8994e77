"""``[sft|reward_model|ppo] trainer_args``: checked when the config loads against the TRL config's fields (with a
"did you mean"), refused for a key the kit sets itself (naming the kit's key), and passed through to the config
object the stage builds. Pure config tests: no model is loaded, no network."""

from __future__ import annotations

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.config import ConfigError, load_config, parse_override, to_toml
from rleif_kit.core.paths import RunPaths


def _cfg(tmp_path, *extra):
    return load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", *extra), workdir=ROOT)


def _errors(tmp_path, *extra) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _cfg(tmp_path, *extra)
    return info.value.errors


def test_an_unknown_key_is_one_line_with_a_did_you_mean(tmp_path):
    text = 'sft.trainer_args={optimm = "adafactor"}'
    assert _errors(tmp_path, text) == [f"--set {text}: [sft] trainer_args.optimm: not a field of trl.SFTConfig "
                                       "(did you mean 'optim'?)"]
    errors = _errors(tmp_path, 'reward_model.trainer_args={gradient_checkpointing_kwarg = {use_reentrant = false}}')
    assert errors[0].endswith("[reward_model] trainer_args.gradient_checkpointing_kwarg: not a field of "
                              "trl.RewardConfig (did you mean 'gradient_checkpointing_kwargs'?)")


def test_a_key_the_kit_sets_names_the_kit_key_to_set_instead(tmp_path):
    errors = _errors(tmp_path, "sft.trainer_args={learning_rate = 1e-4, max_length = 512}")
    assert [e.split(": ", 1)[1] for e in errors] == [
        "[sft] trainer_args.learning_rate: the kit sets it from [sft] lr: set that instead",
        "[sft] trainer_args.max_length: the kit sets it from [sft] max_seq_len: set that instead"]
    errors = _errors(tmp_path, 'reward_model.trainer_args={output_dir = "/tmp/x", num_train_epochs = 3}')
    assert [e.split(": ", 1)[1] for e in errors] == [
        "[reward_model] trainer_args.output_dir: the kit sets it (the stage's checkpoints folder under [base] "
        "output_dir)",
        "[reward_model] trainer_args.num_train_epochs: the kit sets it from [reward_model] rm_epochs: set that "
        "instead"]
    errors = _errors(tmp_path, 'ppo.algorithm="grpo"', "ppo.trainer_args={beta = 0.1}")
    assert errors[0].endswith("[ppo] trainer_args.beta: the kit sets it from [ppo] kl_coef: set that instead")


def test_ppo_trainer_args_need_grpo_and_a_table_is_a_table(tmp_path):
    errors = _errors(tmp_path, 'ppo.trainer_args={loss_type = "dr_grpo"}')  # the tiny preset runs our PPO loop
    assert len(errors) == 1 and "used with algorithm = 'grpo' only" in errors[0]
    assert _cfg(tmp_path, 'ppo.algorithm="grpo"', 'ppo.trainer_args={loss_type = "dr_grpo"}').ppo.trainer_args == {
        "loss_type": "dr_grpo"}
    assert _errors(tmp_path, 'sft.trainer_args="adafactor"')[0].endswith("expected a table, e.g. {optim = "
                                                                         "\"adafactor\"}")


def test_good_keys_reach_the_sft_config_the_stage_builds(tmp_path):
    from rleif_kit.sft.stage import _trainer_args

    cfg = _cfg(tmp_path, 'sft.trainer_args={optim = "adafactor", dataloader_num_workers = 2, packing = true, '
                         'gradient_checkpointing_kwargs = {use_reentrant = false}}')
    args = _trainer_args(cfg, RunPaths(cfg.output_dir), bf16=False)
    assert args.optim == "adafactor" and args.dataloader_num_workers == 2 and args.packing is True  # kit: 0, False
    assert args.gradient_checkpointing_kwargs == {"use_reentrant": False}
    assert args.learning_rate == cfg.sft.lr  # the kit's keys still set the rest
    plain = _trainer_args(_cfg(tmp_path), RunPaths(cfg.output_dir), bf16=False)
    assert plain.optim != "adafactor" and plain.dataloader_num_workers == 0 and plain.packing is False


def test_reward_model_keys_reach_the_irm_and_the_prm_keys_they_have(tmp_path):
    from transformers import TrainingArguments
    from trl import RewardConfig

    from rleif_kit.rewards.rm_training import trainer_args_for

    cfg = _cfg(tmp_path, 'reward_model.trainer_args={optim = "adafactor", center_rewards_coefficient = 0.01, '
                         "logging_steps = 3}")
    irm = trainer_args_for(RewardConfig, cfg, tmp_path / "irm", 100, False, max_length=64)
    assert irm.optim == "adafactor" and irm.center_rewards_coefficient == 0.01 and irm.logging_steps == 3
    assert irm.max_length == 64 and irm.learning_rate == cfg.reward_model.rm_lr
    prm = trainer_args_for(TrainingArguments, cfg, tmp_path / "prm", 100, False, remove_unused_columns=False)
    assert prm.optim == "adafactor" and prm.logging_steps == 3  # RewardConfig's own key is not the PRM's
    assert not hasattr(prm, "center_rewards_coefficient") and prm.remove_unused_columns is False


def test_grpo_keys_reach_trls_grpo_config(tmp_path):
    from rleif_kit.ppo.grpo import grpo_config

    cfg = _cfg(tmp_path, 'ppo.algorithm="grpo"', 'ppo.trainer_args={loss_type = "dr_grpo", warmup_steps = 2}')
    args = grpo_config(cfg, RunPaths(cfg.output_dir), bf16=False, progress=False)
    assert args.loss_type == "dr_grpo" and args.warmup_steps == 2  # the kit's default was 0
    assert args.beta == cfg.ppo.kl_coef


def test_a_table_is_written_back_as_toml_and_an_empty_one_leaves_the_resume_hash_alone(tmp_path):
    from rleif_kit.pipeline import resume

    cfg = _cfg(tmp_path, 'sft.trainer_args={optim = "adafactor", gradient_checkpointing_kwargs = '
                         '{use_reentrant = false, "odd key" = 1}}')  # a key that is no bare TOML key is quoted
    line = next(x for x in to_toml(cfg).splitlines() if x.startswith("trainer_args = {optim"))
    assert parse_override(f"sft.{line.replace(' = ', '=', 1)}")[2] == cfg.sft.trainer_args
    plain = _cfg(tmp_path)
    assert not any(k.endswith("trainer_args") for k in resume.stage_config(plain, "07_reward_diagnostics"))
    # a table set in [sft] reaches the SFT's config only: 03_sft reruns, 02_dedup does not
    assert "sft.trainer_args" not in resume.stage_config(cfg, "02_dedup")
    assert resume.stage_config(cfg, "03_sft")["sft.trainer_args"] == cfg.sft.trainer_args

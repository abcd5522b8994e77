"""The run config (rleif_kit.core.config): presets, validation messages, overrides, round trip, paths, CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rleif_kit.core.config import ConfigError, load_config, parse_override, to_toml

ROOT = Path(__file__).resolve().parent.parent
PRESET_7B = ROOT / "params" / "wizardmath-7b.toml"
PRESET_TINY = ROOT / "params" / "tiny-cpu.toml"
BASE = '[base]\nmodel_name = "m"\n'  # the one required key, so a case shows only its own problem

# The paper's 7B recipe (WizardMath-7B); TOML integers in float keys come back as floats (3 -> 3.0).
REFERENCE_7B = {
    "base": {"model_name": "Llama-2-7b-hf", "output_dir": "./rleif_output", "seed": 42, "bf16": True},
    "sft": {"dataset": "gsm8k_math_stepwise_15k.jsonl", "open_domain_samples": 1500, "max_seq_len": 2048,
            "epochs": 3.0, "lr": 2e-5, "batch_size": 4, "grad_accum": 8, "warmup_ratio": 0.03},
    "evol_instruct": {"rounds": 8, "evolve_down_ratio": 0.3, "evolve_up_ratio": 0.7, "temperature": 0.9,
                      "top_p": 0.95, "max_new_tokens": 1024, "dedup_threshold": 0.85},
    "reward_model": {"irm_base": "Wizard-E-7B", "prm_base": "Llama-2-7b-hf", "irm_samples_per_instruction": 4,
                     "prm_step_label": "chatgpt_judged", "rm_lr": 1e-5, "rm_epochs": 2.0, "rm_batch_size": 8},
    "ppo": {"total_steps": 2000, "lr": 1e-6, "kl_coef": 0.05, "gamma": 1.0, "lam": 0.95, "clip_range": 0.2,
            "reward_formula": "rI * rA", "rollout_batch": 64, "mini_batch": 8},
    "eval": {"benchmarks": ["gsm8k", "math"], "cot_prompt": True, "max_new_tokens": 512},
}


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def errors_of(path: Path, overrides=()) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return info.value.errors


# ---------------------------------------------------------------- presets

@pytest.mark.parametrize("preset", [PRESET_7B, PRESET_TINY], ids=["wizardmath-7b", "tiny-cpu"])
def test_preset_loads(preset):
    cfg = load_config(preset)
    assert cfg.source == str(preset) and cfg.overrides == ()


def test_7b_preset_has_reference_values():
    got = load_config(PRESET_7B).to_dict()
    for section, expected in REFERENCE_7B.items():
        assert {k: got[section][k] for k in expected} == expected, section


# ---------------------------------------------------------------- bad inputs, one problem each
# (id, TOML text, fragments the single error line must contain besides the file name)

BAD = [
    ("unknown_section_did_you_mean", BASE + "[ppoo]\nlr = 1e-6\n",
     ["unknown section [ppoo]", "did you mean [ppo]?"]),
    ("section_not_a_table", "ppo = 1\n" + BASE, ["'ppo' must be a [ppo] section", "got 1"]),
    ("unknown_key_did_you_mean", BASE + "[ppo]\nkl_coeff = 0.1\n",
     ["[ppo]", "unknown key 'kl_coeff'", "did you mean 'kl_coef'?"]),
    ("unknown_key_lists_known_keys", BASE + "[ppo]\nzzz = 1\n",
     ["[ppo]", "unknown key 'zzz'", "known keys: total_steps, lr,"]),
    ("string_for_int", BASE + '[ppo]\ntotal_steps = "2000"\n',
     ["[ppo]", "total_steps = '2000'", "must be an integer > 0"]),
    ("int_for_bool", '[base]\nmodel_name = "m"\nbf16 = 1\n', ["[base]", "bf16 = 1", "expected true or false"]),
    ("float_for_int", BASE + "[sft]\nbatch_size = 4.5\n", ["[sft]", "batch_size = 4.5", "must be an integer > 0"]),
    ("ints_for_list_of_strings", BASE + "[sft]\nlora_targets = [1, 2]\n",
     ["[sft]", "lora_targets = [1, 2]", "expected a list of strings"]),
    ("missing_model_name", "[base]\nseed = 1\n", ["[base]", "missing required key 'model_name'"]),
    ("empty_model_name", '[base]\nmodel_name = " "\n', ["[base]", "model_name = ' '", "a non-empty string"]),
    ("negative_lr", BASE + "[ppo]\nlr = -1e-6\n", ["[ppo]", "lr = -1e-06", "expected a value > 0"]),
    ("zero_lr", BASE + "[sft]\nlr = 0.0\n", ["[sft]", "lr = 0.0", "expected a value > 0"]),
    # 0.5 + 0.7 = 1.2, not 1
    ("ratios_not_summing_to_1", BASE + "[evol_instruct]\nevolve_down_ratio = 0.5\nevolve_up_ratio = 0.7\n",
     ["[evol_instruct]", "evolve_up_ratio = 0.7", "evolve_up_ratio + evolve_down_ratio = 1", "sum to 1.2"]),
    ("ratio_above_1", BASE + "[sft]\nwarmup_ratio = 1.5\n", ["[sft]", "warmup_ratio = 1.5", "a value in [0, 1]"]),
    ("gamma_above_1", BASE + "[ppo]\ngamma = 1.01\n", ["[ppo]", "gamma = 1.01", "a value in [0, 1]"]),
    ("lam_below_0", BASE + "[ppo]\nlam = -0.1\n", ["[ppo]", "lam = -0.1", "a value in [0, 1]"]),
    ("clip_range_zero", BASE + "[ppo]\nclip_range = 0\n", ["[ppo]", "clip_range = 0", "a value > 0"]),
    ("formula_import", BASE + "[ppo]\nreward_formula = \"__import__('os')\"\n",
     ["[ppo]", "reward_formula = \"__import__('os')\"", "an expression over rI, rA, rV and rF"]),
    ("formula_power", BASE + '[ppo]\nreward_formula = "rI ** 2"\n',
     ["[ppo]", "reward_formula = 'rI ** 2'", "is not allowed"]),
    ("formula_unknown_name", BASE + '[ppo]\nreward_formula = "rX * rA"\n',
     ["[ppo]", "reward_formula = 'rX * rA'", "unknown name 'rX'"]),
    ("formula_empty", BASE + '[ppo]\nreward_formula = ""\n', ["[ppo]", "reward_formula = ''", "empty formula"]),
    ("formula_lambda", BASE + '[ppo]\nreward_formula = "lambda: 1"\n',
     ["[ppo]", "reward_formula = 'lambda: 1'", "is not allowed"]),
    ("bad_enum", BASE + '[sft]\nfinetune = "qlora4"\n',
     ["[sft]", "finetune = 'qlora4'", "one of 'qlora', 'lora', 'full'"]),
    # 64 % 6 = 4, so 6 does not divide 64
    ("mini_batch_not_dividing", BASE + "[ppo]\nrollout_batch = 64\nmini_batch = 6\n",
     ["[ppo]", "mini_batch = 6", "a divisor of rollout_batch (64)"]),
    ("min_steps_above_max", BASE + "[arith]\nmin_steps = 4\nmax_steps = 3\n",
     ["[arith]", "min_steps = 4", "<= max_steps (3)"]),
    ("invalid_toml", "[ppo\nlr = 1\n", ["not valid TOML"]),
    # 128 % 3 = 2
    ("heads_not_dividing_hidden", BASE + "[tiny]\nhidden_size = 128\nheads = 3\n",
     ["[tiny]", "heads = 3", "a divisor of hidden_size (128)"]),
    ("heads_zero", BASE + "[tiny]\nheads = 0\n", ["[tiny]", "heads = 0", "a value > 0"]),  # was a ZeroDivisionError
    ("top_p_zero", BASE + "[evol_instruct]\ntop_p = 0.0\n", ["[evol_instruct]", "top_p = 0.0", "a value in (0, 1]"]),
    ("benchmark_not_a_name", BASE + '[eval]\nbenchmarks = ["gsm8k", "mm lu"]\n',
     ["[eval]", "benchmarks = ['gsm8k', 'mm lu']", "a list of names"]),
]


@pytest.mark.parametrize("text, fragments", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_is_one_clear_error(tmp_path, text, fragments):
    path = write(tmp_path, text)
    errors = errors_of(path)
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"{path}: ")
    for fragment in fragments:
        assert fragment in errors[0]


def test_missing_file_names_the_path(tmp_path):
    errors = errors_of(tmp_path / "nope.toml")
    assert errors == [f"{tmp_path / 'nope.toml'}: config file not found (looked in {tmp_path / 'nope.toml'})"]


def test_all_errors_of_a_file_reported_at_once(tmp_path):
    path = write(tmp_path, BASE + '[ppo]\nlr = -1.0\nkl_coeff = 0.1\n[sft]\nfinetune = "qlora4"\nepochs = "3"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert len(info.value.errors) == 4  # lr, kl_coeff, finetune, epochs
    assert str(info.value).count("\n") == 3  # 4 lines
    assert all(line.startswith(f"{path}: ") for line in str(info.value).splitlines())


def test_mistyped_ratio_gives_no_sum_error_from_the_default(tmp_path):
    # down = "0.5" is reported; the sum check would otherwise read the default 0.3 (0.3 + 0.5 = 0.8)
    path = write(tmp_path, BASE + '[evol_instruct]\nevolve_down_ratio = "0.5"\nevolve_up_ratio = 0.5\n')
    errors = errors_of(path)
    assert len(errors) == 1 and "evolve_down_ratio = '0.5': expected a finite number" in errors[0]


# ---------------------------------------------------------------- overrides

def test_override_number_applies():
    assert load_config(PRESET_TINY, ["ppo.lr=1e-5"]).ppo.lr == 1e-5


def test_override_unquoted_string():
    assert load_config(PRESET_TINY, ["base.model_name=./my-model"]).base.model_name == "./my-model"


def test_override_list():
    assert load_config(PRESET_TINY, ['sft.lora_targets=["q_proj"]']).sft.lora_targets == ["q_proj"]


def test_override_bad_value_is_validated():
    errors = errors_of(PRESET_TINY, ["ppo.clip_range=-1"])
    assert errors == ["--set ppo.clip_range=-1: [ppo] clip_range = -1: expected a value > 0"]  # the --set, not the file


@pytest.mark.parametrize("text", ["ppo.lr", "lr=1"])
def test_malformed_override(text):
    with pytest.raises(ConfigError, match="expected section.key=value"):
        parse_override(text)
    assert errors_of(PRESET_TINY, [text]) == [f"override '{text}': expected section.key=value, e.g. ppo.lr=1e-6"]


def test_override_unknown_key_did_you_mean():
    (error,) = errors_of(PRESET_TINY, ["ppo.kl_coeff=0.1"])
    assert "[ppo] unknown key 'kl_coeff' (did you mean 'kl_coef'?)" in error


def test_override_unknown_section_did_you_mean():
    (error,) = errors_of(PRESET_TINY, ["pppo.lr=1"])
    assert "unknown section [pppo] (did you mean [ppo]?)" in error


# ---------------------------------------------------------------- round trip, paths

@pytest.mark.parametrize("preset", [PRESET_7B, PRESET_TINY], ids=["wizardmath-7b", "tiny-cpu"])
def test_to_toml_round_trip(tmp_path, preset):
    cfg = load_config(preset, ["ppo.lr=1e-5"])
    again = load_config(write(tmp_path, to_toml(cfg), "resolved.toml"))
    assert again.to_dict() == cfg.to_dict()


def test_to_toml_round_trip_awkward_string(tmp_path):
    # quote, backslash, newline, tab: a raw newline inside "..." is not valid TOML
    # (a free-form string key: run_name is a folder name, checked)
    cfg = load_config(PRESET_TINY, ['base.accelerate_config="a\\"b\\\\c\\nd\\te"'])
    assert cfg.base.accelerate_config == 'a"b\\c\nd\te'
    again = load_config(write(tmp_path, to_toml(cfg), "resolved.toml"))
    assert again.base.accelerate_config == cfg.base.accelerate_config


def test_resolve_relative_to_workdir(tmp_path):
    cfg = load_config(PRESET_TINY, workdir=tmp_path)
    assert cfg.resolve("x/y") == (tmp_path / "x" / "y").resolve()
    assert cfg.output_dir == (tmp_path / "rleif_output" / "tiny-cpu").resolve()


def test_resolve_keeps_absolute_paths(tmp_path):
    cfg = load_config(PRESET_TINY, workdir=tmp_path)
    assert cfg.resolve("/abs/model") == Path("/abs/model")


def test_relative_params_path_found_under_workdir():
    assert load_config("params/tiny-cpu.toml", workdir=ROOT).source == "params/tiny-cpu.toml"


def test_run_name_defaults_to_file_stem():
    assert load_config(PRESET_TINY).run_name == "tiny-cpu"
    assert load_config(PRESET_TINY, ["base.run_name=mine"]).run_name == "mine"


# ---------------------------------------------------------------- CLI

def test_cli_config_error_exits_2_without_traceback(tmp_path):
    path = write(tmp_path, BASE + "[tiny]\nheads = 0\n[ppo]\nlr = -1.0\n")
    proc = subprocess.run([sys.executable, "-m", "rleif_kit.pipeline.cli", "config", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"{path}: [tiny] heads = 0: expected a value > 0" in proc.stderr
    assert f"{path}: [ppo] lr = -1.0: expected a value > 0" in proc.stderr
    assert "Traceback" not in proc.stderr

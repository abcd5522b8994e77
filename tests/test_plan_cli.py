"""``rleif plan``: the planner's table on the command line (the arithmetic itself: test_planner.py)."""

from __future__ import annotations

from conftest import ROOT


def test_cli_prints_the_table_and_exits_1_when_a_stage_does_not_fit(capsys):
    from rleif_kit.pipeline.cli import main

    assert main(["plan", str(ROOT / "params" / "wizardmath-7b-24gb.toml"), "--card", "24"]) == 0
    out = capsys.readouterr().out
    assert "PPO" in out and "24 GB (23.6 GiB usable): SFT batch_size" in out
    assert main(["plan", str(ROOT / "params" / "wizardmath-7b.toml"), "--card", "24"]) == 1
    assert main(["plan", str(ROOT / "params" / "wizardmath-7b.toml")]) == 0  # every card, no verdict
    assert "80 GB (79.1 GiB usable)" in capsys.readouterr().out
    assert main(["plan", str(ROOT / "params" / "wizardmath-7b.toml"), "--set", 'base.model_name="x"']) == 2


def test_a_preset_changed_by_set_is_offered_as_shipped(monkeypatch, capsys):
    from rleif_kit.pipeline.cli import main

    monkeypatch.chdir(ROOT)
    # mini_batch 8 makes the PPO update 8 x 768 tokens (68.18 GiB, as in wizardmath-7b); as shipped (1) it fits
    assert main(["plan", "params/wizardmath-7b-24gb.toml", "--card", "24", "--set", "ppo.mini_batch=8"]) == 1
    assert capsys.readouterr().out.endswith("\n  24 GB: params/wizardmath-7b-24gb.toml (same model)\n")


def test_model_params_by_hand():
    from rleif_kit.models.planner import model_params
    from rleif_kit.models.shapes import KNOWN_SHAPES

    shapes = {s.name: s for _, s in KNOWN_SHAPES}
    # Llama-2-7B: 32 x (4 x 4096^2 + 3 x 4096 x 11008) + 2 x 32000 x 4096 = 32 x 202,375,168 + 262,144,000
    assert model_params(shapes["Llama-2-7B"]) == 6_738_149_376
    # Mistral-7B (8 KV heads: k, v are 4096 x 1024): 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) + 262,144,000
    assert model_params(shapes["Mistral-7B"]) == 7_241_465_856


def test_other_models_presets_come_largest_first_and_the_tiny_ones_only_for_the_tiny_model():
    import dataclasses

    from rleif_kit.core.config import load_config
    from rleif_kit.models.planner import format_fitting_presets, same_model
    from rleif_kit.models.shapes import KNOWN_SHAPES, resolve_shapes

    shapes = {s.name: s for _, s in KNOWN_SHAPES}
    cfg24, tiny = load_config(ROOT / "params" / "wizardmath-7b-24gb.toml"), load_config(ROOT / "params" / "tiny-cpu.toml")
    tiny_shapes = resolve_shapes(tiny)
    presets = [("llama.toml", cfg24, dict.fromkeys(("base", "irm", "prm"), shapes["Llama-2-7B"])),
               ("mistral.toml", cfg24, dict.fromkeys(("base", "irm", "prm"), shapes["Mistral-7B"])),
               ("tiny.toml", tiny, tiny_shapes)]
    # peaks under the 24gb settings: Mistral-7B 21.81 GiB (PPO), Llama-2-7B 20.48 (PPO), both <= 23.6 usable;
    # Mistral first: 7,241,465,856 > 6,738,149,376 parameters; the tiny preset fits too, and is left out
    assert format_fitting_presets(shapes["Llama-2-13B"], presets, [24]) == [
        ("  24 GB: no shipped preset is for Llama-2-13B; these for other models fit, largest first: "
         "mistral.toml (Mistral-7B), llama.toml (Llama-2-7B)")]
    # 16 GB = 15.76 GiB usable: SFT alone needs 17.26 (Mistral) and 16.61 (Llama)
    assert format_fitting_presets(shapes["Llama-2-13B"], presets, [16]) == [
        "  16 GB: no shipped preset is for Llama-2-13B; none for another model fits either"]
    # the tiny model itself: tiny-cpu peaks at 1.55 GiB (SFT) <= 2 x 0.985 = 1.97 usable
    assert format_fitting_presets(tiny_shapes["base"], presets, [2]) == ["  2 GB: tiny.toml (same model)"]
    # a config.json read from a local folder names the shape after the folder: the same model all the same
    assert same_model(dataclasses.replace(shapes["Llama-2-7B"], name="/models/Llama-2-7b-hf"), shapes["Llama-2-7B"])

"""[reasons] attach only to a key the run moved to the value the file gives: a reason for a key the config leaves at
the kit's default, that the file does not set, or that a --set gives another value is not shown beside any value,
only named in a one-line note (the resolved config, run.json, the report) — a preset copied to another world keeps
reasons nobody should read as the new run's."""

from __future__ import annotations

import pytest

from rleif_kit.core.config import config_changes, load_config, reason_notes, to_toml

PRESET = '''[base]
model_name = "m"

[sft]
lr = 0.001

[reasons]
"sft.lr" = "tiny models want a larger lr"
"diagnostics.low_ra_healthy_max" = "the tiny model's arithmetic samples are wrong 70% of the time"
'''


@pytest.fixture
def preset(tmp_path):
    path = tmp_path / "copied.toml"
    path.write_text(PRESET)
    return path


def reasons_shown(cfg) -> dict[str, str]:
    return {c["key"]: c["reason"] for c in config_changes(cfg)}


def test_a_reason_for_a_key_left_at_the_default_is_a_note_not_a_row(preset):
    cfg = load_config(preset)
    assert reasons_shown(cfg) == {"base.model_name": "", "sft.lr": "tiny models want a larger lr"}
    assert reason_notes(cfg) == ["[reasons] 'diagnostics.low_ra_healthy_max' not shown: the config leaves "
                                 "diagnostics.low_ra_healthy_max at the kit's default (0.4)"]


def test_a_set_to_another_value_drops_the_reason_and_says_why(preset):
    cfg = load_config(preset, ["sft.lr=0.01"])
    assert reasons_shown(cfg)["sft.lr"] == ""
    assert reason_notes(cfg)[0] == ("[reasons] 'sft.lr' not shown: --set sft.lr=0.01 replaces the file's 0.001, the "
                                    "value the reason speaks of")
    same = load_config(preset, ["sft.lr=0.001"])  # the value the reason was written for: it still applies
    assert reasons_shown(same)["sft.lr"] == "tiny models want a larger lr"
    assert [c["override"] for c in config_changes(same) if c["key"] == "sft.lr"] == [True]


def test_a_key_only_a_set_moves_is_not_the_files_to_explain(preset):
    cfg = load_config(preset, ["diagnostics.low_ra_healthy_max=0.8"])
    assert reasons_shown(cfg)["diagnostics.low_ra_healthy_max"] == ""
    assert reason_notes(cfg) == ["[reasons] 'diagnostics.low_ra_healthy_max' not shown: the file does not set "
                                 "diagnostics.low_ra_healthy_max (--set diagnostics.low_ra_healthy_max=0.8 does)"]


def test_the_resolved_config_carries_the_notes_as_comments_and_reads_back(preset, tmp_path):
    cfg = load_config(preset)
    text = to_toml(cfg)
    assert ("[reasons]\n# [reasons] 'diagnostics.low_ra_healthy_max' not shown: the config leaves "
            "diagnostics.low_ra_healthy_max at the kit's default (0.4)\n") in text
    (tmp_path / "resolved.toml").write_text(text)
    applied = {k: v for k, v in cfg.reasons.items() if k not in cfg.reason_notes}  # the rest are their notes
    assert "low_ra_healthy_max\" = " not in text and applied
    assert load_config(tmp_path / "resolved.toml").reasons == applied


def test_the_report_shows_the_notes_under_the_config_table():
    from rleif_kit.pipeline.report import config_table

    note = "[reasons] 'dedup.min_kept' not shown: the config leaves dedup.min_kept at the kit's default (8000)"
    row = {"key": "sft.lr", "value": 0.001, "default": 2e-05, "override": False, "reason": "why"}
    assert config_table([row], [note]).endswith(f'</table><p class="muted">{note.replace(chr(39), "&#39;")}</p>')
    assert note.replace("'", "&#39;") in config_table([], [note])


def test_the_shipped_presets_reasons_all_apply():
    from conftest import ROOT

    for path in sorted((ROOT / "params").glob("*.toml")):
        assert reason_notes(load_config(path, workdir=ROOT)) == [], path.name


def test_a_run_moved_to_another_world_by_a_set_shows_none_of_the_files_reasons(tmp_path):
    """tiny-cpu's reasons speak of the arithmetic world: run in another world by --set, not one is shown."""
    from conftest import TINY_PARAMS, tiny_overrides

    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", 'base.world="tiny_code"'))
    notes = reason_notes(cfg)
    assert len(notes) == len(cfg.reasons) > 0
    assert notes[0].endswith("written for the file's world 'arith'; --set base.world=\"tiny_code\" runs 'tiny_code'")
    assert not [c for c in config_changes(cfg) if c["reason"]]
    same = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", 'base.world="arith"'))  # the file's own world
    assert [c["key"] for c in config_changes(same) if c["reason"]]

"""The parts of a stage's section and the rules the page follows (``pipeline/report_sections.py``): figures as text,
never raw braces; each check's link into docs/troubleshooting.md (every check the kit can emit has a row there);
each check counted once; failed requests by cause; the probes' rows and chart; a PNG's width; the preset's marks.

Pure: in-memory, no pipeline runs, no browser (``test_report.py`` renders the page)."""

from __future__ import annotations

import ast
import re

import pytest
from conftest import ROOT
from test_report import DOC, METRICS, _png

from rleif_kit.core.stages import STAGES
from rleif_kit.pipeline.report_sections import (
    STAGE_COLOURS,
    TOP,
    check_anchor,
    check_cell,
    counted,
    doc_entry,
    docs_href,
    failures_table,
    fmt,
    md_inline,
    owners,
    page_anchors,
    png_width,
    preset_marks,
    probe_chart,
    probe_rows,
    stage_about,
    text_cell,
    value_cell,
)


def _emittable() -> set[str]:
    """Every check name the kit can emit: the literal ``Verdict("name"`` ones, and each family over what the kit
    registers (roles, benchmarks, every world's probe edits)."""
    from rleif_kit.checks.probes import IRM_ADVICE
    from rleif_kit.core.settings import ROLES
    from rleif_kit.worlds import all_worlds

    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "rleif_kit").rglob("*.py"))
    names = set(re.findall(r'Verdict\(\s*"([a-z_]+)"', source))
    names |= {"base_model", "irm_base", "prm_base", "evolve_model", "data_seeds", "data_sft", "data_gsm8k_train",
              "data_math_train", "irm_distribution", "prm_distribution", "sft_vs_ppo"}
    names |= {f"{kind}_{role}" for role in ROLES for kind in ("key", "endpoint")}
    for world in all_worlds():
        names |= {f"{kind}_{b.name}" for b in world.benchmarks for kind in ("eval", "sft_vs_ppo")}
        names |= {f"{model}_probe_{edit}" for edit in world.solution_edits for model in ("prm", "verifier")}
    return names | {f"irm_probe_{edit}" for edit in IRM_ADVICE}


def test_every_check_the_kit_can_emit_has_a_troubleshooting_entry():
    text = DOC.read_text(encoding="utf-8")
    names = _emittable()
    assert {"kl_blowup", "reward_terms", "probes", "key_evolve", "prm_probe_off_by_one", "irm_probe_ambiguous",
            "sft_vs_ppo_humaneval", "eval_gsm8k"} <= names and len(names) > 60
    missing = sorted(n for n in names if check_anchor(n) == TOP)
    assert missing == [], "add a row with <a id=...> to docs/troubleshooting.md for these"
    rowless = sorted(n for n in names if not doc_entry(check_anchor(n)).get("what to do"))
    assert rowless == [], "each entry's row says what to do"
    ids = re.findall(r'<a id="([^"]+)"', text)
    assert len(ids) == len(set(ids)), "an anchor given twice"


def test_a_check_links_to_its_row_or_its_family_and_an_unknown_one_to_the_top():
    anchors = page_anchors(DOC.read_text(encoding="utf-8"))
    assert check_anchor("kl_blowup", anchors) == "kl_blowup"
    assert check_anchor("key_irm_judge", anchors) == "key_role"
    assert check_anchor("verifier_probe_corrupt_step", anchors) == "probe_corrupt_step"
    assert check_anchor("sft_vs_ppo_gsm8k", anchors) == "sft_vs_ppo"
    assert check_anchor("prm_probe_new_edit", anchors) == "the_probes"  # a world's edit not listed yet
    assert check_anchor("something_new", anchors) == TOP and TOP in anchors
    assert docs_href(ROOT / "reports" / "tiny-cpu") == "../../docs"
    assert docs_href(ROOT, docs=ROOT / "no-such-folder") is None  # an installed kit without docs: no links


def test_each_check_is_counted_once_in_the_latest_current_stage_that_records_it():
    statuses = {s: {"status": "ok"} for s in STAGES}
    owner = owners(METRICS, statuses, STAGES)
    assert owner["step_format"] == "07_reward_diagnostics" and owner["sft_learning"] == "03_sft"
    assert owner["sft_vs_ppo"] == "05_ppo" and owner["prm_probe_cut_answer"] == "07_reward_diagnostics"
    rows = counted(METRICS, statuses, STAGES)
    assert len(rows) == 14 and len({v["check"] for _, v in rows}) == 14  # of 27 rows: 2 + 2 + 3 + 8 + 1 + 11
    assert [v["status"] for _, v in rows].count("warn") == 2  # 07's step_format and prm_probe_commute
    # 07 stale: its checks count in the latest current stage that records them, 05's gate for the probes
    statuses["07_reward_diagnostics"] = {"status": "stale"}
    owner = owners(METRICS, statuses, STAGES)
    assert owner["step_format"] == "03_sft" and owner["prm_probe_cut_answer"] == "05_ppo"
    assert "kl_blowup" not in owner  # only 07 records it


def test_figures_never_show_raw_braces():
    assert fmt({}) == "none" and fmt([]) == "none" and fmt("") == "none" and fmt(None) == "—"
    assert fmt({"timeout": 3, "connection": {"n": 1}}) == "timeout: 3; connection: n: 1"
    assert fmt(["tensorboard", "wandb"]) == "tensorboard, wandb" and fmt([0.2, 0.8]) == "[0.2, 0.8]"
    cell = value_cell({"ppo": {}, "sft": {}})
    assert "{" not in cell and cell.count("none") == 2
    rows = value_cell([{"id": "a", "n": 1}, {"id": "b", "n": 2}])
    assert "<th>id</th><th>n</th>" in rows and "[" not in rows


def test_failures_table_one_row_per_cause_with_its_count_and_example():
    failures = {"total": 400, "failed": 130, "causes": {
        "connection": {"count": 100, "example": "e-1: connection error: refused"},
        "http 4xx": {"count": 30, "example": "e-9: http 404: model not found"}}}
    html = failures_table(failures, "../../docs")
    assert "130 of 400 requests failed, by cause" in html
    assert html.count("<tr>") == 3 and "e-9: http 404: model not found" in html
    assert 'href="../../docs/troubleshooting.md#failure-http-4xx"' in html
    assert failures_table({"total": 5, "failed": 0, "causes": {}}, None) == ""  # nothing failed: no table


def test_probe_rows_and_chart():
    rows = probe_rows(METRICS["07_reward_diagnostics"])
    assert [r["check"] for r in rows] == ["prm_probe_wrong_answer", "prm_probe_cut_answer", "prm_probe_commute"]
    svg = probe_chart(rows, 0.8, 0.4)
    assert svg.count('class="bar"') == 3 and "ok from 80%" in svg and "fail at 40% or below" in svg
    widths = [float(w) for w in re.findall(r'class="bar" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg)]
    assert widths[0] / widths[1] == pytest.approx(0.99 / 0.2, rel=0.01)  # bars in proportion to the share
    # 07's summary alone (no verdict kept whole) still draws, with the default lines
    assert len(probe_rows({"probes": {"irm_probe_unsolvable": {"moved_right": 0.5, "status": "warn"}}})) == 1


def test_png_width_reads_the_header(tmp_path):
    _png(tmp_path / "w.png", (0, 0, 0), size=(1210, 40))
    assert png_width((tmp_path / "w.png").read_bytes()) == 1210 and png_width(b"GIF89a") == 0


def test_parts_by_hand():
    # a moved key marks the checks whose thresholds it sets, by name: a probe's ok_at of 0.8 is not the moved
    # low_ra_healthy_max of 0.8, and score_mean_min's 0.2 is not low_ra_share's band end of 0.2
    changed = {k: {"key": k, "value": v} for k, v in (("diagnostics.low_ra_healthy_max", 0.8),
                                                       ("diagnostics.score_mean_min", 0.2), ("ppo.lr", 0.2))}
    assert [c["key"] for c in preset_marks("low_ra_share", changed)] == ["diagnostics.low_ra_healthy_max"]
    assert [c["key"] for c in preset_marks("prm_distribution", changed)] == ["diagnostics.score_mean_min"]
    assert preset_marks("prm_probe_early_stop", changed) == [] and preset_marks("kl_blowup", changed) == []
    # a dict of dicts is one table with a column per inner key, never JSON
    cell = value_cell({"a": {"kept": 1, "x": 2.5}, "b": {"kept": 3}})
    assert "<th>kept</th><th>x</th>" in cell and "<td>2.5</td>" in cell and "<td>—</td>" in cell
    assert set(STAGE_COLOURS) >= {"ok", "skipped", "failed", "stale", "not run", "stopped"}


def test_every_threshold_key_names_a_config_key():
    from dataclasses import fields

    from rleif_kit.checks.threshold_keys import THRESHOLD_KEYS, threshold_keys
    from rleif_kit.core.config import SECTIONS

    known = {f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in fields(cls)}
    assert {k for keys in THRESHOLD_KEYS.values() for k in keys} <= known
    assert threshold_keys("irm_probe_unsolvable") == ("diagnostics.probe_ok", "diagnostics.probe_fail")
    assert threshold_keys("sft_vs_ppo_arith") == ("diagnostics.ab_min_gain",) and threshold_keys("config") == ()


def test_text_of_several_lines_is_code_and_a_figure_with_nothing_in_it_is_left_out():
    from rleif_kit.pipeline.report_sections import empty, figures_table

    program = "def f(xs, n):\n    return xs[-n:]  # <n = 0>"
    assert text_cell(program) == "<pre>def f(xs, n):\n    return xs[-n:]  # &lt;n = 0&gt;</pre>"  # whole, escaped
    assert text_cell("one line") == "one line" and text_cell(None) == "—"
    assert value_cell(program) == text_cell(program)
    rows = value_cell([{"id": "a", "gold": None, "response": program}, {"id": "b", "gold": None, "response": "x"}])
    assert "<th>gold</th>" not in rows and "<pre>def f(xs, n):" in rows  # the column no row has, left out
    cell = value_cell({"sft": {"gsm8k": 0.5, "math": None}, "ppo": {"gsm8k": 0.75, "math": None}})
    assert "<th>math</th>" not in cell and "<th>gsm8k</th>" in cell
    assert empty({"sft": {}, "ppo": {}}) and empty({}) and empty(None) and empty([]) and empty("")
    assert not empty({"sft": {"gsm8k": 0.0}}) and not empty(0)
    table = figures_table({"compat_accuracy": {"sft": {}, "ppo": {}}, "accuracy": {"sft": {"x": 0.5}}})
    assert "compat_accuracy" not in table and "<th>accuracy</th>" in table


def test_each_stage_says_what_it_does_in_the_runs_words():
    from rleif_kit.core.config import load_config
    from rleif_kit.worlds.words import run_words

    code = run_words(load_config(ROOT / "params" / "tiny-code.toml", workdir=ROOT))
    assert stage_about("05_ppo", code) == "PPO on the reward <code>r = rI · rV</code>"
    assert "held-out pass@1" in stage_about("03_sft", code) and "tasks" in stage_about("01_evolve", code)
    assert "<b>rV</b>: the task's tests" in stage_about("04_reward_models", code)
    assert "passed or not" in stage_about("07_reward_diagnostics", code)
    arith = run_words(load_config(ROOT / "params" / "tiny-cpu.toml", workdir=ROOT))
    assert stage_about("05_ppo", arith) == "PPO on the reward <code>r = rI · rA</code>"
    assert "held-out accuracy" in stage_about("03_sft", arith) and stage_about("06_eval", None) == ""


def test_a_part_escapes_its_values_once_and_keeps_the_kits_markup():
    """Each part renders through an autoescaping template: a value is escaped (in an attribute too), a part inside
    another is kept as markup, never escaped twice."""
    assert md_inline("`<x>` then **a <b> `c`** [docs](x.md) <script>") == \
        "<code>&lt;x&gt;</code> then <b>a &lt;b&gt; <code>c</code></b> docs &lt;script&gt;"
    link = check_cell('kl"><script>', "../docs")
    assert link.startswith('<a class="check" href="../docs/troubleshooting.md#') and "<script>" not in link
    assert link.count('"') == 4 and link.endswith("&gt;&lt;script&gt;</a>")  # the quote in it is text too
    assert text_cell("{{ 7*7 }} {% raw %}") == "{{ 7*7 }} {% raw %}"  # a value is never a template
    cell = value_cell({"probe": {"status": "<i>ok</i>"}})
    assert "<td>&lt;i&gt;ok&lt;/i&gt;</td>" in cell and "&amp;lt;" not in cell  # escaped once
    table = failures_table({"total": 2, "failed": 1, "causes": {"timeout": {"count": 1, "example": "</td><td>"}}},
                           "../../docs")
    assert '<td class="example">&lt;/td&gt;&lt;td&gt;</td>' in table and 'href="../../docs/troubleshooting.md' in table


def test_the_report_writes_no_markup_around_a_value_by_hand():
    """Markup comes from the templates (``pipeline/markup.py``): no f-string of report.py or report_sections.py
    holds a tag, and the one escape call left is markdown's plain text (``_md_text``)."""
    for name in ("report.py", "report_sections.py"):
        tree = ast.parse((ROOT / "rleif_kit" / "pipeline" / name).read_text(encoding="utf-8"))
        by_hand = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) and any(
            isinstance(v, ast.Constant) and re.search(r"</?[a-z]", v.value) for v in n.values)]
        assert by_hand == [], f"{name}: markup written around a value at lines {by_hand}"
        escapes = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                   and getattr(n.func, "attr", getattr(n.func, "id", "")) in ("escape", "esc")]
        assert len(escapes) == (1 if name == "report_sections.py" else 0), f"{name}: escape calls at {escapes}"


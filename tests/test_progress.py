"""Progress lines (core/progress.py), what the runner streams of a stage (pipeline/run_status.py), and where the
trainers log (models/trainer_logs.py). Pure: a fake clock, StringIO terminals, tmp_path files."""

from __future__ import annotations

import io
import json

from conftest import TINY_PARAMS, tiny_overrides
from rleif_kit.core.config import load_config
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.progress import LINE, ProgressLines, fmt_duration
from rleif_kit.models import trainer_logs
from rleif_kit.pipeline.run_status import RunStatus, StageStream


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_a_line_per_interval_with_the_eta_from_the_pace_and_the_last_step_always():
    clock, out = Clock(), io.StringIO()
    lines = ProgressLines("03_sft", 500, every_s=10, enabled=True, clock=clock, stream=out)
    clock.t += 20
    assert lines.update(100, loss=0.8342) == "[03_sft] step 100/500 · loss 0.8342 · ETA 1m20s"  # 20 s / 100 x 400
    clock.t += 5
    assert lines.update(120, loss=0.8) is None  # 5 s after the last line: too soon
    clock.t += 5
    assert lines.update(140, loss=0.7).endswith("ETA 1m17s")  # 30 s / 140 x 360 = 77 s
    clock.t += 1
    assert lines.update(500, loss=0.2) == "[03_sft] step 500/500 · loss 0.2 · done in 31s"  # the last: always
    assert out.getvalue().count("\n") == 3 and all(LINE.match(x) for x in out.getvalue().splitlines())


def test_a_resumed_run_counts_its_pace_from_where_it_started_and_silent_unless_asked(monkeypatch):
    clock = Clock()
    lines = ProgressLines("05_ppo", 40, start=30, enabled=True, clock=clock, stream=io.StringIO())
    clock.t += 10
    assert lines.update(35, kl=0.1).endswith("ETA 10s")  # 10 s for 5 steps, 5 to go
    monkeypatch.delenv("RLEIF_PROGRESS_LINES", raising=False)
    assert ProgressLines("05_ppo", 40).update(40) is None  # JupyterLab: the bars alone
    monkeypatch.setenv("RLEIF_PROGRESS_LINES", "1")
    assert ProgressLines("05_ppo", 40, stream=io.StringIO()).update(40).startswith("[05_ppo] step 40/40")
    assert [fmt_duration(s) for s in (0, 59.6, 61, 3725)] == ["0s", "1m00s", "1m01s", "1h02m"]


def test_the_stage_stream_keeps_everything_in_the_log_and_shows_progress_and_warnings(tmp_path):
    terminal = io.StringIO()
    stream = StageStream(tmp_path / "logs" / "03_sft.log", terminal)
    stream.write("loading the model\n[03_sft] step 20/500 · loss 1.2")  # a line arrives in pieces
    stream.write(" · ETA 4m\nwarning: bf16 off\r 40%|####  | 2/5\n")
    stream.write("[04_reward_models irm] step 3/9 · loss 0.7\ncolumns: a b\n")
    stream.close()
    assert terminal.getvalue().splitlines() == ["    [03_sft] step 20/500 · loss 1.2 · ETA 4m", "    warning: bf16 off",
                                                "    [04_reward_models irm] step 3/9 · loss 0.7"]
    assert stream.shown == 3
    assert "loading the model" in (tmp_path / "logs" / "03_sft.log").read_text()


def test_run_status_keeps_the_wall_time_of_the_run_that_made_a_skipped_stage(tmp_path):
    status = RunStatus(tmp_path, {"run": "x"})
    status.set("03_sft", "ok", "not run yet", seconds=248.04, log=tmp_path / "logs" / "03_sft.log")
    again = RunStatus(tmp_path, {"run": "x"})
    again.set("03_sft", "skipped", "complete and config unchanged")
    entry = json.loads((tmp_path / "run.json").read_text())["stages"]["03_sft"]
    assert entry["status"] == "skipped" and entry["seconds"] == 248.0 and entry["log"] == "logs/03_sft.log"


def test_base_report_to_drives_every_trainer_and_sft_may_override_it(tmp_path):
    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", 'base.report_to=["tensorboard", "wandb"]'))
    assert [trainer_logs.requested(cfg, m) for m in ("sft", "irm", "ppo")] == [["tensorboard", "wandb"]] * 3
    assert trainer_logs.report_to(cfg, "prm") == ["wandb"]  # TensorBoard is the kit's own callback
    none = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", 'sft.report_to=["none"]', "base.report_to=[]"))
    assert trainer_logs.requested(none, "sft") == [] and trainer_logs.report_to(none, "irm") == ["none"]
    assert RunPaths(tmp_path).tensorboard("irm") == tmp_path / "tensorboard" / "04_irm"


def test_the_ppo_step_log_writes_every_numeric_column_as_a_scalar(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run"))
    paths = RunPaths(tmp_path / "run")
    log = trainer_logs.StepLog(cfg, paths, "ppo", total=2)
    log.add({"step": 0, "reward_mean": 0.25, "kl": -0.01, "flagged": True, "note": "x"}, 0)
    log.add({"step": 1, "reward_mean": 0.5, "kl": 0.02, "rA_truth_auc": None}, 1)
    log.close()
    events = EventAccumulator(str(paths.tensorboard("ppo")))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["ppo/kl", "reward/reward_mean"]  # no bool, text, None or step
    assert [(e.step, e.value) for e in events.Scalars("reward/reward_mean")] == [(0, 0.25), (1, 0.5)]


def test_a_bar_also_prints_lines_under_rleif_run(monkeypatch, capsys):
    from rleif_kit.core.progress import Bar

    monkeypatch.setenv("RLEIF_PROGRESS_LINES", "1")
    bar = Bar(3, "judge (prm)", "04_reward_models", initial=1, file=io.StringIO())  # tqdm's own output aside
    bar.set_postfix(failed=0, refresh=False)
    bar.update(1)  # the first line: no throttle yet
    bar.update(1)  # the last: always
    bar.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[04_reward_models judge] item 2/3 · failed 0 · ETA")
    assert lines[1].startswith("[04_reward_models judge] item 3/3 · failed 0 · done in")
    assert all(LINE.match(x) for x in lines)


def test_a_rerun_makes_later_stages_stale_and_a_stage_run_on_stale_inputs_is_stale(tmp_path):
    from rleif_kit.pipeline.runner import _mark_later_stale, _not_current

    status = RunStatus(tmp_path, {"run": "x"})
    status.set("04_reward_models", "ok")
    status.set("05_ppo", "failed", "cell 3: KeyError")
    (tmp_path / "06_eval.ipynb").write_text("{}")  # no run.json entry (an older report folder), but a notebook
    _mark_later_stale(status, tmp_path, [(1, "04_reward_models"), (1, "05_ppo"), (1, "06_eval"),
                                         (1, "07_reward_diagnostics")], "03_sft")
    got = {k: v["status"] for k, v in status.data["stages"].items()}
    assert got == {"04_reward_models": "stale", "05_ppo": "failed", "06_eval": "stale"}  # 07: nothing to be stale
    assert _not_current(status, [(1, "03_sft"), (1, "04_reward_models")]) == "04_reward_models, which is stale"
    assert _not_current(status, [(1, "03_sft")]) == ""


def test_a_tqdm_redraw_before_a_progress_line_does_not_hide_it(tmp_path):
    terminal = io.StringIO()
    stream = StageStream(tmp_path / "x.log", terminal)
    stream.write(" 24%|##    | 120/500")  # a redraw without its newline (a launched stage's relayed bar)
    stream.write("[06_eval gpt-4o-mini] item 120/500 · ETA 1m\n")
    stream.close()
    assert terminal.getvalue() == "    [06_eval gpt-4o-mini] item 120/500 · ETA 1m\n"


def test_the_ppo_progress_line_shows_the_terms_of_the_reward_formula():
    """A code run's r = rI * rV says rV, not the PRM's low_rA it does not use; the math recipe keeps low_rA."""
    assert trainer_logs.line_terms("rI * rV") == [("rI", "rI_mean"), ("rV", "rV_mean")]
    assert trainer_logs.line_terms("rI * rA") == [("rI", "rI_mean"), ("rA", "rA_mean"), ("low_rA", "low_rA_share")]
    assert trainer_logs.line_terms("0.5 * rF + rA") == [("rA", "rA_mean"), ("rF", "rF_mean"), ("low_rA", "low_rA_share")]

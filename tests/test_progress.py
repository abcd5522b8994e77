"""Progress lines (core/progress.py), what the runner streams of a stage (pipeline/run_status.py), and where the
trainers log (models/trainer_logs.py). Pure: a fake clock, StringIO terminals, tmp_path files."""

from __future__ import annotations

import io
import json

import pytest

from conftest import TINY_PARAMS, tiny_overrides
from rleif_kit.core.config import load_config
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.progress import LINE, ProgressLines, fmt_duration
from rleif_kit.models import trackers, trainer_logs
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


def test_base_report_to_drives_every_trainer_and_sft_may_override_it(tmp_path, monkeypatch):
    monkeypatch.setattr(trackers, "missing_package", lambda name: "")  # as if wandb were installed
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


class FakeTracker:
    """A tracker that records what it is given; ``fail_at``: the step whose log raises (a network error)."""

    def __init__(self, name, fail_at=None, fail_start=False):
        self.name, self.fail_at, self.fail_start = name, fail_at, fail_start
        self.rows, self.config, self.finished = [], None, False

    def start(self):
        if self.fail_start:
            raise PermissionError("api_key not configured")

    def store_init_configuration(self, values):
        self.config = values

    def log(self, values, step=None):
        if step == self.fail_at:
            raise ConnectionError("Max retries exceeded with url: /graphql\n(a long traceback)")
        self.rows.append((step, values))

    def finish(self):
        self.finished = True


def _fakes(**made):
    """A ``make`` for StepLog handing out the fake trackers ``made`` by name (tensorboard: the real one)."""
    def make(name, run_name, logging_dir):
        if name == "tensorboard":
            return trackers.make_tracker(name, run_name, logging_dir)
        made[name].run_name = run_name
        return made[name]
    return make


def test_each_trainer_names_its_run_after_the_run_and_the_model(tmp_path, monkeypatch):
    """In wandb or mlflow a run's four trainings sit side by side as tiny-cpu-sft, -irm, -prm, -ppo (transformers'
    default is no name), and each trainer gets the installed trackers but TensorBoard (the kit's own callback)."""
    from transformers import TrainingArguments

    from rleif_kit.rewards.rm_training import trainer_args_for
    from rleif_kit.sft.stage import _trainer_args

    monkeypatch.setattr(trackers, "missing_package", lambda name: "")
    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", 'base.report_to=["tensorboard", "mlflow"]'))
    sft = _trainer_args(cfg, RunPaths(tmp_path / "run"), False)
    assert (sft.run_name, sft.report_to) == ("tiny-cpu-sft", ["mlflow"])
    for model in ("irm", "prm"):
        args = trainer_args_for(TrainingArguments, cfg, tmp_path, 10, False, model)
        assert (args.run_name, args.report_to) == (f"tiny-cpu-{model}", ["mlflow"])
    assert trainer_logs.run_name(cfg, "ppo") == "tiny-cpu-ppo"


def test_a_report_to_typo_is_one_config_error_with_did_you_mean(tmp_path):
    from rleif_kit.core.config import ConfigError

    for value, hint in (('["wandbb"]', "wandbb (did you mean 'wandb'?)"),
                        ('["WandB"]', "WandB (did you mean 'wandb'?)"),
                        ('["tensorboard", "tensorbord"]', "tensorbord (did you mean 'tensorboard'?)")):
        try:
            load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", f"base.report_to={value}"))
        except ConfigError as e:
            assert str(e).count("\n") == 0 and f"(unknown: {hint})" in str(e), str(e)
        else:
            raise AssertionError(f"{value} loaded")


def test_a_tracker_whose_package_is_missing_is_one_note_and_the_trainer_goes_without_it(tmp_path, monkeypatch,
                                                                                          capsys):
    """transformers raises when a trainer is built with report_to = ["wandb"] and no wandb; accelerate drops it
    without a word. Here: one note naming the pip package, once, and the trainers get the rest."""
    monkeypatch.setattr(trackers, "_said", set())
    not_installed = {"wandb": "wandb", "comet_ml": "comet-ml"}
    monkeypatch.setattr(trackers, "missing_package", lambda name: not_installed.get(name, ""))
    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run",
                                                  'base.report_to=["tensorboard", "wandb", "comet_ml"]'))
    assert trainer_logs.report_to(cfg, "sft") == ["none"]  # not ["wandb", "comet_ml"]: their callbacks would raise
    assert trainer_logs.report_to(cfg, "sft") == ["none"]
    assert trackers.ppo_names(["tensorboard", "wandb", "comet_ml"]) == ["tensorboard"]
    err = capsys.readouterr().err.splitlines()
    assert err == ["note: report_to wandb skipped for 03_sft: wandb is not installed (pip install wandb); the curves "
                   "are in its log.jsonl",
                   "note: report_to comet_ml skipped for 03_sft: comet_ml is not installed (pip install comet-ml); the "
                   "curves are in its log.jsonl",
                   "note: report_to wandb skipped for 05_ppo: wandb is not installed (pip install wandb); the curves "
                   "are in its log.jsonl",
                   "note: report_to comet_ml skipped for 05_ppo: comet_ml is not installed (pip install comet-ml); the "
                   "curves are in its log.jsonl"]  # once each, though asked twice


def test_the_real_check_finds_tensorboard_installed_and_a_package_that_is_not():
    assert trackers.missing_package("tensorboard") == ""  # installed with the kit
    assert trackers.missing_package("neptune") in ("", "neptune")
    assert all(name in trackers.PACKAGES for name in ("wandb", "mlflow", "trackio", "comet_ml"))


def test_ppo_says_which_names_accelerate_has_no_tracker_for(monkeypatch, capsys):
    monkeypatch.setattr(trackers, "_said", set())
    monkeypatch.setattr(trackers, "missing_package", lambda name: "")
    assert trackers.ppo_names(["neptune", "wandb", "mlflow"]) == ["wandb", "mlflow"]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("note: report_to neptune skipped for 05_ppo: our PPO loop logs through "
                                               "accelerate's trackers, which have none for neptune")


def test_the_ppo_step_log_goes_to_every_tracker_report_to_names(tmp_path, monkeypatch):
    """Before: PPO wrote TensorBoard alone, whatever else report_to named. Now each named tracker gets every
    numeric column under the same names as TensorBoard, at the same steps, and the run's [ppo] keys."""
    monkeypatch.setattr(trackers, "missing_package", lambda name: "")
    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", 'base.report_to=["wandb", "mlflow"]'))
    wandb, mlflow = FakeTracker("wandb"), FakeTracker("mlflow")
    log = trainer_logs.StepLog(cfg, RunPaths(tmp_path / "run"), "ppo", total=2, make=_fakes(wandb=wandb, mlflow=mlflow))
    log.add({"step": 0, "reward_mean": 0.25, "kl": -0.01, "flagged": True, "note": "x", "update_s": 1.5}, 0)
    log.add({"step": 1, "reward_mean": 0.5, "kl": 0.02, "rA_truth_auc": None}, 1)
    log.close()
    for fake in (wandb, mlflow):
        assert fake.rows == [(0, {"reward/reward_mean": 0.25, "ppo/kl": -0.01, "time/update_s": 1.5}),
                             (1, {"reward/reward_mean": 0.5, "ppo/kl": 0.02})]
        assert fake.finished and fake.run_name == f"{cfg.run_name}-ppo" == "tiny-cpu-ppo"
        assert fake.config["ppo.lr"] == cfg.ppo.lr and fake.config["ppo.total_steps"] == cfg.ppo.total_steps
        assert all(v is None or isinstance(v, (bool, int, float, str)) for v in fake.config.values())
    assert not (tmp_path / "run" / "tensorboard").exists()  # TensorBoard only when named


def test_a_tracker_that_fails_mid_run_is_one_warning_and_training_goes_on(tmp_path, monkeypatch, capsys):
    """wandb's network drops at step 1: one warning line, wandb gets no more, TensorBoard and the other tracker
    get every step; a tracker that cannot start (no API key) is one warning before the first step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setattr(trackers, "missing_package", lambda name: "")
    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", 'base.report_to=["tensorboard", "wandb", "mlflow", '
                                                                     '"trackio"]'))
    paths = RunPaths(tmp_path / "run")
    wandb, mlflow = FakeTracker("wandb", fail_at=1), FakeTracker("mlflow")
    trackio = FakeTracker("trackio", fail_start=True)
    log = trainer_logs.StepLog(cfg, paths, "ppo", total=3, make=_fakes(wandb=wandb, mlflow=mlflow, trackio=trackio))
    for step in range(3):
        log.add({"step": step, "reward_mean": step / 4}, step)
    log.close()
    err = [line for line in capsys.readouterr().err.splitlines() if "report_to" in line]
    assert err == ["warning: report_to trackio failed at start (PermissionError: api_key not configured); PPO goes "
                   "on without it, 05_ppo/log.jsonl has every step",
                   "warning: report_to wandb failed at step 1 (ConnectionError: Max retries exceeded with url: "
                   "/graphql); PPO goes on without it, 05_ppo/log.jsonl has every step"]
    assert [step for step, _ in wandb.rows] == [0] and not wandb.finished  # dropped: no finish on a broken tracker
    assert [step for step, _ in mlflow.rows] == [0, 1, 2] and mlflow.finished and trackio.rows == []
    events = EventAccumulator(str(paths.tensorboard("ppo")))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/reward_mean")] == [(0, 0.0), (1, 0.25), (2, 0.5)]


def test_ppo_curves_read_back_from_mlflows_local_store(tmp_path, monkeypatch):
    """An offline tracker end to end: accelerate's MLflowTracker, as report_to = ["mlflow"] makes it, writes to a
    local file store (MLFLOW_TRACKING_URI, as the SFT trainer's MLflowCallback reads it); MLflow's client reads the
    run, its name, its [ppo] keys and each curve back."""
    pytest.importorskip("mlflow")  # the `test` extra (pyproject.toml)
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3.18 wants a database; a file store suffices
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", 'base.report_to=["mlflow"]'))
    log = trainer_logs.StepLog(cfg, RunPaths(tmp_path / "run"), "ppo", total=2)
    log.add({"step": 0, "reward_mean": 0.25, "kl": 0.01}, 0)
    log.add({"step": 1, "reward_mean": 0.5, "kl": 0.03}, 1)
    log.close()
    client = MlflowClient()
    (run,) = client.search_runs(["0"])  # the Default experiment, as for a Trainer stage
    assert run.info.run_name == "tiny-cpu-ppo" and run.info.status == "FINISHED"
    assert run.data.params["ppo.total_steps"] == str(cfg.ppo.total_steps)
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "reward/reward_mean")] == [(0, 0.25),
                                                                                                         (1, 0.5)]
    assert [m.value for m in client.get_metric_history(run.info.run_id, "ppo/kl")] == [0.01, 0.03]


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

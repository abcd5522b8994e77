"""Stage 00: the base model, the data later stages read, and one round trip per endpoint — before evolution.

``run_prepare`` resolves the base model (building the offline tiny Llama when the preset asks for it,
``worlds/tiny_corpus.py``), builds the data and checks every endpoint of ``settings.json`` (``llm/check_api.py``):
what the notebook ``00_setup`` and ``python -m rleif_kit.prepare`` run. The config, the resolved config and the
manifest are ``setup``'s (``core/run_setup.py``), as for every stage.

The data step (:func:`build_data`) builds, from the user's raw data, every file later stages read. Why before 01:
the 7B recipe's stages read three data files — the evolution seeds (``[evol_instruct] seeds``), the step-by-step SFT
set (``[sft] dataset``) and the open-domain sample (``[sft] open_domain_path``). When the first two do not exist
yet, they are built here from GSM8k / MATH training data (``[sft] gsm8k_train`` / ``math_train``: local JSONL,
parquet, the original MATH folder, or ``"hub"`` for ``[sft] gsm8k_hub`` / ``math_hub`` through ``datasets``): the
seeds are the training questions, deduplicated and decontaminated against the evaluation sets at hand
(``prepare.seeds``); the SFT set is their gold solutions in the step format, or regenerated through the endpoint
(``worlds.math.sft``). A file that exists is read and counted, never overwritten. The arithmetic world generates its
data in the stages and has nothing to build here.

``rleif data PARAMS`` runs the data step alone and prints :meth:`DataReport.table`: per file, where it is, whether
it was built, how many records, their lengths (in tokens of ``[base].model_name`` when its tokenizer is on this
machine, else characters) and the rejected rows by reason. ``00_setup/data_report.json`` keeps the same.

    python -m rleif_kit.prepare --params params/tiny-cpu.toml [--settings settings.json]
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from rleif_kit.core.config import RunConfig, to_toml
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.run_setup import setup
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stages import SETUP
from rleif_kit.llm.check_api import CheckRow, check_settings
from rleif_kit.prepare.seeds import CONTAMINATED, build_seeds, reasons
from rleif_kit.worlds.benchmarks import load_items
from rleif_kit.worlds import world_for
from rleif_kit.worlds.data import DataError, generated_size, load_instructions, load_seeds
from rleif_kit.worlds.tiny_corpus import ensure_base_model
from rleif_kit.core.overlap import NgramIndex
from rleif_kit.worlds.intros import stage_intro
from rleif_kit.worlds.words import run_words
from rleif_kit.core.tables import Note, text_table

# The stage's public face: what its notebook, ``python -m rleif_kit.prepare`` and ``rleif data`` use; the resolved
# config's text (core/config.py) is defined there and offered here, so that the notebook reads one stage module.
__all__ = ["stage_intro", "PrepareResult", "run_prepare", "DataReport", "build_data", "data_command", "to_toml",
           "setup_example"]

RAW_HINT = ("set [sft] gsm8k_train / math_train to GSM8k / MATH training data (JSONL, parquet, the MATH folder, or "
            "'hub'), or point the key at a file you have (docs/your-own-7b-run.md)")


@dataclass
class Artifact:
    """One data file: ``status`` "built", "exists", "generated" (the arithmetic world's, made in the stages) or
    "off" (not used by this run)."""
    name: str
    key: str
    status: str
    path: str | None = None
    records: int | None = None
    lengths: dict[str, Any] | None = None
    rejected: dict[str, int] = field(default_factory=dict)
    note: str = ""


@dataclass
class DataReport:
    world: str
    length_unit: str  # "tokens" (of the base model's tokenizer) or "characters"
    artifacts: list[Artifact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def artifact(self, name: str) -> Artifact:
        return next(a for a in self.artifacts if a.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"world": self.world, "length_unit": self.length_unit, "notes": self.notes,
                "artifacts": [asdict(a) for a in self.artifacts]}

    def table(self) -> str:
        """What was built, for a terminal: one block per file, then the notes."""
        lines = []
        for a in self.artifacts:
            where = f" {a.path}" if a.path else ""
            count = f": {a.records:,} records" if a.records is not None else ""
            lines.append(f"{a.name:<12} {a.status:<9} {a.key}{where}{count}")
            if a.lengths:
                ln = a.lengths
                lines.append(f"{'':<12} length in {self.length_unit}: mean {ln['mean']:.0f}, median {ln['p50']:.0f}, "
                             f"p95 {ln['p95']:.0f}, max {ln['max']}"
                             + (f"; {ln['over_max_seq_len']} over [sft] max_seq_len" if ln.get("over_max_seq_len")
                                else ""))
            for reason, n in a.rejected.items():
                lines.append(f"{'':<12} rejected {n:,}: {reason}")
            if a.note:
                lines.append(f"{'':<12} {a.note}")
        if self.length_unit == "characters":
            lines.append("lengths are in characters: the base model's tokenizer is not on this machine")
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def _tokenizer(cfg: RunConfig) -> Callable[[str], int] | None:
    """Token count with ``[base].model_name``'s tokenizer when it is on this machine (never downloads)."""
    name = cfg.base.model_name
    local = cfg.resolve(name)
    try:
        from transformers import AutoTokenizer  # heavy: loaded on first use

        tok = AutoTokenizer.from_pretrained(str(local) if local.is_dir() else name, local_files_only=True)
    except Exception:  # noqa: BLE001 - not at hand: lengths in characters, said so in the report
        return None
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def _lengths(texts: list[str], measure: Callable[[str], int], limit: int | None = None) -> dict[str, Any] | None:
    if not texts:
        return None
    values = sorted(measure(t) for t in texts)
    out = {"mean": statistics.fmean(values), "p50": values[len(values) // 2],
           "p95": values[min(len(values) - 1, int(0.95 * len(values)))], "max": values[-1]}
    if limit is not None:
        out["over_max_seq_len"] = sum(v > limit for v in values)
    return out


def _eval_items(cfg: RunConfig, settings: Any, notes: list[str]) -> list[tuple[str, str]]:
    """(id, question) of the GSM8k / MATH test sets at hand: the settings' eval paths; the hub only when the
    training data came from it too (a machine that reaches the hub). What is missing is a note: 02_dedup
    decontaminates the evolved instructions again."""
    items: list[tuple[str, str]] = []
    for bench, train in (("gsm8k", cfg.sft.gsm8k_train), ("math", cfg.sft.math_train)):
        configured = settings is not None and getattr(settings.eval, f"{bench}_path", None)
        if bench not in cfg.eval.benchmarks and not configured:
            continue
        if not configured and train != "hub":
            notes.append(f"seeds not decontaminated against the {bench} test set: set eval.{bench}_path in "
                         "settings.json (02_dedup checks the evolved set against it again)")
            continue
        try:
            items += [(f"{bench}:{it['id']}", it["question"]) for it in load_items(bench, settings=settings, cfg=cfg)]
        except (FileNotFoundError, ValueError, RuntimeError) as e:
            notes.append(f"seeds not decontaminated against the {bench} test set: {e}")
    return items


def _inputs(cfg: RunConfig) -> dict[str, Any]:
    """The keys a built file depends on."""
    s = cfg.sft
    return {"gsm8k_train": s.gsm8k_train, "math_train": s.math_train, "build": s.build, "gsm8k_hub": s.gsm8k_hub,
            "math_hub": s.math_hub, "decontam_ngram": cfg.dedup.decontam_ngram}


def _previous_inputs(paths: RunPaths) -> dict[str, dict]:
    try:
        return dict(json.loads(paths.data_report.read_text()).get("built_from", {}))
    except (OSError, ValueError, AttributeError):
        return {}


def build_data(cfg: RunConfig, paths: RunPaths, settings: Any = None) -> DataReport:
    """The data step: build what is missing, count what exists, and write ``00_setup/data_report.json``. A file
    that is neither there nor buildable is a :class:`DataError` naming its key and what would build it."""
    measure = _tokenizer(cfg)
    report = DataReport(cfg.base.world, "tokens" if measure else "characters")
    inputs = _inputs(cfg)
    before = _previous_inputs(paths)
    measure = measure or len
    a_inputs: dict[str, dict] = {}
    problems: list[dict] | None = None
    evals: list[tuple[str, str]] | None = None

    def eval_items() -> list[tuple[str, str]]:
        nonlocal evals
        if evals is None:
            evals = _eval_items(cfg, settings, report.notes)
        return evals

    def training() -> list[dict]:
        nonlocal problems
        if problems is None:
            problems = world_for(cfg).training_problems(cfg)
        return problems

    # the evolution seeds
    ev = cfg.evol_instruct
    world = world_for(cfg)
    seeds_path = cfg.resolve(ev.seeds) if generated_size(cfg, ev.seeds, "[evol_instruct] seeds") is None else None
    if seeds_path is None:
        report.artifacts.append(Artifact("seeds", "[evol_instruct] seeds", "generated", note=f"{ev.seeds}: "
                                         f"the {world.name} world's problems, drawn in 01 (never a held-out one)"))
    elif seeds_path.exists() or seeds_path == cfg.resolve(cfg.sft.dataset) and not generated_size(
            cfg, cfg.sft.dataset, "[sft] dataset"):
        report.artifacts.append(Artifact("seeds", "[evol_instruct] seeds", "exists", str(seeds_path)))
    elif cfg.sft.gsm8k_train or cfg.sft.math_train:
        seeds, rejected = build_seeds(training(), eval_items(), n=cfg.dedup.decontam_ngram)
        write_jsonl(seeds_path, seeds)
        write_jsonl(paths.seeds_rejected, rejected)
        report.artifacts.append(Artifact("seeds", "[evol_instruct] seeds", "built", str(seeds_path), len(seeds),
                                         _lengths([s["instruction"] for s in seeds], measure), reasons(rejected),
                                         note=f"rejected rows: {paths.rel(paths.seeds_rejected)}" if rejected else ""))
    else:
        raise DataError(f"[evol_instruct] seeds = {ev.seeds!r}: file not found ({seeds_path}) and nothing to build it "
                        f"from: {RAW_HINT}")

    # the step-by-step SFT set
    n = generated_size(cfg, cfg.sft.dataset, "[sft] dataset")
    sft_path = cfg.resolve(cfg.sft.dataset)
    if n is not None:
        report.artifacts.append(Artifact("sft dataset", "[sft] dataset", "generated", note=f"{cfg.sft.dataset}: "
                                         f"the {world.name} world's solutions, made in 02"))
    else:
        built = {}
        if not sft_path.exists():
            built = world.build_sft_dataset(cfg, settings)
            if built is None:
                raise DataError(f"[sft] dataset = {cfg.sft.dataset!r}: file not found ({sft_path}) and nothing to "
                                f"build it from: {RAW_HINT}")
        rows = load_instructions(sft_path, "[sft] dataset")
        index = NgramIndex(eval_items(), n=cfg.dedup.decontam_ngram) if built or cfg.sft.gsm8k_train or \
            cfg.sft.math_train else None
        copies = [r for r in rows if index is not None and len(index) and index.hits(r["instruction"])]
        if copies and built:  # a file built here is cleaned; the user's own file is only reported on
            out = {r["id"] for r in copies}
            rows = [r for r in rows if r["id"] not in out]
            write_jsonl(sft_path, [r for r in read_jsonl(sft_path) if str(r.get("id")) not in out])
            built["dropped"] = {**built.get("dropped", {}), CONTAMINATED: len(copies)}
            built.update(kept=len(rows), kept_share=len(rows) / max(built.get("problems", 1), 1))
            write_json_atomic(sft_path.with_suffix(".report.json"), built)
        elif copies:
            report.notes.append(f"{len(copies)} rows of [sft] dataset share a {cfg.dedup.decontam_ngram}-word sequence "
                                f"with an evaluation item (first: {copies[0]['id']}); the file is yours, so it is left "
                                "as it is")
        texts = [world.train_prompt(r["instruction"], cfg.eval.cot_prompt) + world.completion(r["response"])
                 for r in rows]
        limit = cfg.sft.max_seq_len if report.length_unit == "tokens" else None
        report.artifacts.append(Artifact("sft dataset", "[sft] dataset", "built" if built else "exists", str(sft_path),
                                         len(rows), _lengths(texts, measure, limit), built.get("dropped", {}),
                                         note=f"build mode: {cfg.sft.build}" if built else ""))
    a = report.artifact("seeds")
    if a.status == "exists" and seeds_path is not None:  # every seed of the file, read as 01 reads them
        seeds = list(load_seeds(dataclasses.replace(cfg, evol_instruct=dataclasses.replace(ev, max_seeds=0)), paths))
        a.records, a.lengths = len(seeds), _lengths([s["text"] for s in seeds], measure)
    if ev.max_seeds and a.records and a.records > ev.max_seeds:
        a.note = "; ".join(x for x in (a.note, f"01 evolves the first {ev.max_seeds} ([evol_instruct] max_seeds)") if x)

    # the open-domain sample
    k = cfg.sft.open_domain_samples
    if k == 0:
        report.artifacts.append(Artifact("open domain", "[sft] open_domain_path", "off",
                                         note="[sft] open_domain_samples = 0"))
    else:
        path = cfg.resolve(cfg.sft.open_domain_path) if cfg.sft.open_domain_path else None
        if path is None or not path.exists():
            raise DataError(f"[sft] open_domain_path = {cfg.sft.open_domain_path!r}: file not found; point it at an "
                            "instruction/response (or Alpaca instruction/output) JSONL, or set [sft] "
                            "open_domain_samples = 0")
        pool = load_instructions(path, "[sft] open_domain_path")
        report.artifacts.append(Artifact("open domain", "[sft] open_domain_path", "exists", str(path), len(pool),
                                         _lengths([r["instruction"] + " " + r["response"] for r in pool], measure),
                                         note=f"{min(k, len(pool))} drawn into SFT"))
    # the probe set: held-out test items with step-format gold solutions (a world with its own split keeps that)
    probes = world.build_probe_set(cfg, paths, settings)
    if probes is not None:
        items, notes = probes
        report.notes += notes
        write_jsonl(paths.probe_set, items)
        report.artifacts.append(Artifact("probe set", "settings.json eval paths", "built" if items else "off",
                                         str(paths.probe_set), len(items),
                                         _lengths([r["solution"] for r in items], measure),
                                         note="the counterfactual probes of the reward models edit these"))
    for a in report.artifacts:  # a file built from other inputs is not rebuilt by itself: say so
        old = before.get(a.name)
        if a.status == "exists" and old and old != inputs:
            changed = ", ".join(f"{k} {old.get(k)!r} -> {v!r}" for k, v in inputs.items() if old.get(k) != v)
            report.notes.append(f"{a.name}: {a.path} was built from other inputs ({changed}); delete it to rebuild")
        if a.status == "built" or a.status == "exists" and old:
            a_inputs[a.name] = inputs if a.status == "built" else old
    write_json_atomic(paths.data_report, {**report.to_dict(), "built_from": a_inputs})
    return report


@dataclass
class PrepareResult:
    """What stage 00 made and found: the base model's path (or hub id), the data report, the endpoints' rows."""
    base_model: str
    data: DataReport
    endpoints: list[CheckRow]
    endpoint_table: str  # the rows as a table, or the line saying no settings.json was given

    @property
    def endpoints_ok(self) -> int:
        return sum(r.ok for r in self.endpoints)

    def data_counts(self) -> dict[str, dict[str, Any]]:
        """``{file: {status, records, rejected}}``: what the notebook records of the data step."""
        return {a.name: {"status": a.status, "records": a.records, "rejected": a.rejected} for a in self.data.artifacts}


def run_prepare(cfg: RunConfig, paths: RunPaths, settings: Any = None) -> PrepareResult:
    """Resolve (or build) the base model, build the data later stages read, then one chat round trip per role of
    ``settings`` (none without it)."""
    base_model = ensure_base_model(cfg)
    data = build_data(cfg, paths, settings)
    endpoints, endpoint_table = check_settings(settings)
    return PrepareResult(base_model, data, endpoints, endpoint_table)


def data_command(params_path: str, overrides: list[str], settings_path: str | None) -> int:
    """``rleif data PARAMS``: the data step alone, its report printed."""
    cfg, paths = setup(params_path, overrides, stage=SETUP)
    settings = load_settings(settings_path) if settings_path else None
    print(build_data(cfg, paths, settings).table())
    print(f"report: {Path(paths.data_report)}")
    return 0


def setup_example(cfg: RunConfig, paths: RunPaths) -> Any:
    """One seed going in and the prompt it becomes: what 01 evolves, and the text the model is trained and asked
    under (the world's prompt), with the seed's reference answer where the world has one."""
    world = world_for(cfg)
    try:
        seed = next(iter(load_seeds(cfg, paths)), None)
    except (FileNotFoundError, DataError) as e:
        return Note(f"No seed to show yet: {e}")
    if seed is None:
        return Note(f"[evol_instruct] seeds = {cfg.evol_instruct.seeds!r} holds no seed: nothing to show.")
    w = run_words(cfg, world)
    rows = [{"": f"a seed {w.task} (in)", "text": seed["text"]},
            {"": "the prompt the model reads (out)", "text": world.prompt_for(seed)}]
    answer = seed.get("answer") or seed.get("solution")
    if isinstance(answer, str) and answer:
        rows.append({"": "its reference answer", "text": answer})
    return text_table(rows, wrap=("text",), code=("text",) if w.code_language else (),
                      caption=f"{seed.get('id', 'the first seed')}: one {w.task} of the {w.world} world")

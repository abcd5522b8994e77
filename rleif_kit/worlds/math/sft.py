"""Build the recipe's step-by-step SFT dataset (``[sft].dataset``) from GSM8k and MATH training data.

The 7B recipe names ``gsm8k_math_stepwise_15k.jsonl``; nobody should have to find that file. When it
does not exist, this module makes it from the public formats (GSM8k ``question``/``answer`` with
``#### X``; MATH ``problem``/``solution`` with ``\\boxed{}``), in one of two ways (``[sft].build``):

- ``"normalise"``: rewrite the gold solutions into ``Step 1: ... The answer is: X`` by rule;
  solutions without a clear step structure (many MATH ones) are set aside with the reason;
- ``"regenerate"`` — the paper's way: ask the configured model (``settings.json`` role ``evolve``)
  for a step-by-step solution, few-shot in the canonical format, and keep it only when its final
  answer equals the gold one. Every outcome is appended as it arrives, so a crash resumes.

It runs as part of 02_dedup (or 03_sft on its own) when ``[sft].dataset`` does not exist yet:

    python -m rleif_kit.dedup --params params/wizardmath-7b.toml --settings settings.json
"""

from __future__ import annotations

import asyncio
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from rleif_kit.core.config import RunConfig
from rleif_kit.core.exits import StageIncomplete
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, write_jsonl
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.user_files import read_user_text
from rleif_kit.llm.base import ChatRequest, cut_off, cut_off_reason, run_sync
from rleif_kit.llm.endpoint import make_llm_backend
from rleif_kit.worlds.prompts import math_prompt
from rleif_kit.worlds.math.data import hub_source, load_gsm8k, load_hub_dataset, load_math
from rleif_kit.worlds.math.stepwise import (
    NormaliseError,
    answers_equal,
    final_answer,
    normalise_gsm8k,
    normalise_solution,
)

#: What an instruction becomes where settings.json sends it on /v1/completions (a served base model; llm/api_mode.py):
#: the Alpaca prompt, as a local model without a chat template is asked (evolve/evolvers.py alpaca_prompt)
ALPACA = partial(math_prompt, cot=False)

FEW_SHOT = [
    ("Tom has 3 boxes with 4 pens in each box. He gives away 5 pens. How many pens does he have left?",
     "Step 1: 3 * 4 = 12, so Tom has 12 pens. Step 2: 12 - 5 = 7 pens are left. The answer is: 7"),
    ("A shirt costs $20 and is on sale for 25% off. What is the sale price?",
     "Step 1: 25% of 20 is 0.25 * 20 = 5 dollars. Step 2: 20 - 5 = 15 dollars. The answer is: 15"),
]


def load_training_problems(cfg: RunConfig) -> list[dict]:
    """GSM8k and MATH training problems: ``{"id", "question", "solution", "gold", "source"}``."""
    problems: list[dict] = []
    for source, spec, local in (("gsm8k", cfg.sft.gsm8k_train, load_gsm8k), ("math", cfg.sft.math_train, load_math)):
        if not spec:
            continue
        local_path = cfg.resolve(spec)
        if spec != "hub" and local_path.is_dir() and (local_path / "test").is_dir():
            raise ValueError(f"[sft] {source}_train = {spec!r} holds a test/ folder: point it at the training "
                             f"split ({local_path / 'train'}), or the test problems would become training data")
        if spec != "hub" and not local_path.exists():
            raise FileNotFoundError(f"[sft] {source}_train = {spec!r}: file not found ({cfg.resolve(spec)}); point it "
                                    "at your training data, or use 'hub' (docs/your-own-7b-run.md)")
        rows = load_hub_dataset(source, "train", hub_source(cfg, source)) if spec == "hub" else local(local_path)
        if not rows:
            raise ValueError(f"[sft] {source}_train = {spec!r}: no problems in it (a MATH folder needs its per-problem "
                             ".json files)")
        problems += [{**r, "source": source} for r in rows]
    if not problems:
        raise FileNotFoundError(f"[sft] dataset = {cfg.sft.dataset!r} does not exist and there is nothing to build "
                                "it from: set [sft] gsm8k_train / math_train (local JSONL paths, or 'hub')")
    return problems


def normalised_rows(problems: list[dict]) -> tuple[list[dict], list[dict]]:
    """Gold solutions rewritten to the step format; the rest set aside with the reason."""
    rows, rejected = [], []
    for p in problems:
        try:
            response = (normalise_gsm8k(p["solution"]) if p["source"] == "gsm8k"
                        else normalise_solution(p["solution"], gold=p["gold"]))
        except NormaliseError as e:
            rejected.append({"id": p["id"], "reason": e.reason})
            continue
        rows.append({"id": p["id"], "instruction": p["question"], "response": response, "source": p["source"]})
    return rows, rejected


def regenerate_prompt(question: str) -> str:
    shots = "\n\n".join(f"Problem: {q}\nSolution: {a}" for q, a in FEW_SHOT)
    return (f"Solve each problem step by step, numbering the steps, and finish with 'The answer is: <answer>'.\n\n"
            f"{shots}\n\nProblem: {question}\nSolution:")


async def _regenerate(cfg: RunConfig, problems: list[dict], backend: Any, log_path: Path) -> None:
    """One request per problem not yet in ``log_path``; each outcome appended as it arrives."""
    limit = cfg.evol_instruct.max_new_tokens
    done = {r["id"] for r in read_jsonl(log_path)  # a reply cut off at a smaller max_tokens is asked again
            if not (r.get("cut_off_at") is not None and r["cut_off_at"] < limit)}
    todo = [p for p in problems if p["id"] not in done]

    async def one(p: dict, out: JsonlWriter) -> None:
        request = ChatRequest(key=p["id"], messages=({"role": "user", "content": regenerate_prompt(p["question"])},),
                              temperature=0.0, max_tokens=cfg.evol_instruct.max_new_tokens)
        result = await backend.acomplete(request)
        if not result.ok:
            return  # not recorded: retried by the next run
        record = {"id": p["id"], "instruction": p["question"], "source": p["source"]}
        if cut_off(result):  # a solution cut off inside its final number must not become SFT data
            out.write({**record, "kept": False, "cut_off_at": request.max_tokens,
                       "reason": cut_off_reason(request.max_tokens, "[evol_instruct] max_new_tokens")})
            return
        answer = final_answer(result.text or "")
        if answer is None or not answers_equal(answer, p["gold"]):
            out.write({**record, "kept": False, "reason": "final answer differs from gold"})
            return
        try:
            steps = normalise_solution(result.text, gold=p["gold"]).rsplit("The answer is:", 1)[0]
            out.write({**record, "kept": True, "response": f"{steps}The answer is: {p['gold']}"})  # gold's form
        except NormaliseError as e:
            out.write({**record, "kept": False, "reason": e.reason})

    with JsonlWriter(log_path, fsync_every=cfg.evol_instruct.checkpoint_every) as out:
        await asyncio.gather(*(one(p, out) for p in todo))


def build_sft_dataset(cfg: RunConfig, settings: Any = None, progress: bool = True) -> dict:
    """Write ``[sft].dataset`` from GSM8k/MATH; return counts, the kept share and why the rest was dropped."""
    target = cfg.resolve(cfg.sft.dataset)
    problems = load_training_problems(cfg)
    if cfg.sft.build == "normalise":
        rows, rejected = normalised_rows(problems)
    else:
        log_path = target.with_suffix(".regenerate.jsonl")
        # its own usage ledger beside its log: these requests are not 01's, whose total counts 01's alone
        backend = make_llm_backend(cfg, settings, ledger=log_path.with_suffix(".usage.jsonl"),
                                   prompt_format=ALPACA)
        run_sync(_regenerate(cfg, problems, backend, log_path))
        outcomes = list({r["id"]: r for r in read_jsonl(log_path)}.values())  # the latest outcome per id
        pending = len({p["id"] for p in problems} - {r["id"] for r in outcomes})
        if pending:  # never a partial set that a rerun would take as done: the outcomes so far wait in the log
            why = getattr(backend, "stopped_reason", None) or "requests failed after their retries"
            raise StageIncomplete(f"[sft] build = 'regenerate': {pending} of {len(problems)} problems have no answer "
                                  f"yet ({why}); the {len(outcomes)} answered are kept in {log_path}: rerun to "
                                  "continue")
        rows = [{k: r[k] for k in ("id", "instruction", "response", "source")} for r in outcomes if r["kept"]]
        rejected = [{"id": r["id"], "reason": r["reason"]} for r in outcomes if not r["kept"]]
    write_jsonl(target, rows)
    report = {"problems": len(problems), "kept": len(rows), "kept_share": len(rows) / len(problems),
              "dropped": dict(Counter(r["reason"] for r in rejected).most_common()), "path": str(target),
              "mode": cfg.sft.build}
    write_json_atomic(target.with_suffix(".report.json"), report)
    return report


def rewrite_to_steps(cfg: RunConfig, settings: Any, items: list[dict]) -> dict[str, str | None]:
    """Solutions without a clear step structure, rewritten into steps by the evolve model.

    ``items``: ``{"id", "instruction", "response"}``. Returns id → canonical solution, or None when the
    rewrite failed, could not be normalised, or changed the final answer (the rewrite must not
    change the result, only its layout).
    """
    template = read_user_text(cfg.resolve(cfg.evol_instruct.prompts_dir) / "math" / "rewrite_steps.txt",
                              kind="a prompt template")
    backend = make_llm_backend(cfg, settings, ledger=RunPaths(cfg.output_dir).rewrite_steps_usage_ledger,
                               prompt_format=ALPACA)

    async def one(item: dict) -> tuple[str, str | None]:
        prompt = template.replace("{instruction}", item["instruction"]).replace("{solution}", item["response"])
        result = await backend.acomplete(ChatRequest(key=item["id"] + "#steps", temperature=0.0,
                                                     messages=({"role": "user", "content": prompt},),
                                                     max_tokens=cfg.evol_instruct.max_new_tokens))
        original = final_answer(item["response"])
        try:
            text = normalise_solution(result.text or "", gold=original)
        except NormaliseError:
            return item["id"], None
        same = original is None or answers_equal(final_answer(text) or "", original)
        return item["id"], text if result.ok and same and not cut_off(result) else None

    async def run_all() -> dict[str, str | None]:
        try:
            return dict(await asyncio.gather(*(one(i) for i in items)))
        finally:
            await backend.aclose()

    return run_sync(run_all()) if items else {}

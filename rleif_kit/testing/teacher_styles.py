"""How real chat models word their replies, for the loopback teacher (``teacher.py``).

Each function takes the right content and a seeded ``rng`` and returns it in one of the forms chat models
are seen to use for that kind of request, taken from stored real outputs: Evol-Instruct data and the
clean-up code written for it (nickrosh/evol-teacher's gpt-3.5 evolutions with the model's explanation left
in; h2oai/h2o-wizardlm stripping "New Prompt:" and "As an AI language model"; the WizardLM paper's
elimination rules; OpenBMB/UltraFeedback#12's "#Rewritten Prompt#" leaks), judge outputs (MT-Bench's GPT-4
judgments ending "Final Verdict: [[A]]"; dvlab-research/MR-GSM8K's GPT-4, Claude-2 and Llama-2-70B step
gradings — "Step 2 contains an error.", "Step 4: ... This step is incorrect.", fewer labels than steps;
ThinkPRM's "The step is \\boxed{correct}"), and math solutions ("#### 18\nThe answer is: 18" of MetaMath,
"Final Answer: The final answer is 18. I hope it is correct." of Minerva-style prompts, "The final answer is:
$\\boxed{18}$" of Llama-3): preambles, markdown, explanations around the asked-for line, loose label formats —
and, now and then, a reply that breaks the asked format (a tie in a ranking, "All steps are correct." instead of
one line per step, a refusal, a reply cut off at ``max_tokens``). ``noise`` scales how often anything but the
plain asked-for form is chosen (0 = never).
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from rleif_kit.evolve.elimination import LEAK_PHRASES, NOTE_PHRASES

CUT_RATE = 0.03  # replies cut off at max_tokens (finish_reason "length")

PREAMBLES = ("Sure! Here's the rewritten problem:\n\n", "Here is the rewritten problem:\n\n",
             "Okay, here's the rewritten prompt:\n\n", "**Rewritten Problem:**\n\n",
             "#Rewritten Prompt#:\n", "New Prompt: ", "Here's a more challenging version:\n\n")
EXPLANATIONS = {"add_constraint": "This version adds a condition the solver has to take into account.",
                "concretize": "I made the situation more concrete.",
                "deepen": "This version needs one more kind of step.",
                "more_steps": "This adds an extra step to the reasoning.", "simplify": "This is an easier version.",
                "new_topic": "This problem uses a new setting but is easier."}
NOTES = ("this adds", "this version", "i made the", "here's", "here is the", "**")  # leftovers a judge marks down
REFUSALS = ("I'm sorry, but I can't help with rewriting this problem.",
            "I apologize, but I cannot create a new version of this problem as it seems incomplete.",
            "As an AI language model, I can't be sure what the original problem asks, so I can't rewrite it.")


def _pick(rng: random.Random, noise: float, plain, *others):
    """``plain`` with probability 1 - noise * (share of the others), else one of ``others``."""
    if not others or rng.random() >= noise * 0.6:
        return plain
    return rng.choice(others)


def maybe_cut(text: str, rng: random.Random, noise: float, limit: int | None) -> tuple[str, str]:
    """(text, finish_reason): now and then cut mid-sentence with "length", as a reply that ran out of tokens."""
    words = text.split(" ")
    if rng.random() < CUT_RATE * noise and len(words) > 6:
        return " ".join(words[:rng.randrange(3, len(words) - 2)]), "length"
    if isinstance(limit, int) and 0 < limit < len(text.split()):
        return " ".join(text.split()[:limit]), "length"
    return text, "stop"


def refusal(rng: random.Random) -> str:
    return rng.choice(REFUSALS)


def cannot_solve(rng: random.Random) -> str:
    return rng.choice(("The problem does not give enough information to find a single answer.",
                       "I'm sorry, but this problem is ambiguous: it does not say how many there are at the start.",
                       "This problem cannot be solved as stated, because a quantity is missing."))


def cannot_judge(rng: random.Random) -> str:
    return rng.choice(("I cannot verify these steps without the full problem statement.",
                       "The problem statement seems incomplete, so I can't check the steps."))


def rewritten(text: str, operator: str, rng: random.Random, noise: float) -> str:
    """An evolved problem as a chat model returns it: bare, or with a preamble, quotes, a trailing note."""
    form = _pick(rng, noise, "bare", "preamble", "quoted", "explained", "bold", "signed", "curly")
    if form == "preamble":
        return rng.choice(PREAMBLES) + text
    if form == "quoted":
        return f'"{text}"'
    if form == "curly":
        return f"\u201c{text}\u201d"
    if form == "explained":
        note = EXPLANATIONS.get(operator, "This version changes the problem a little.")
        return f"{text}\n\nIn this modified version, {note[0].lower()}{note[1:]}"
    if form == "bold":
        return f"**New problem:** {text}"
    if form == "signed":
        return f"{text}\n\nI hope this helps! Let me know if you need any adjustments."
    return text


def equality(same: bool, rng: random.Random, noise: float) -> str:
    word = "Equal" if same else "Different"
    return _pick(rng, noise, word, f"{word}.", f"**{word}**", word.lower(), f"{word}. The second problem "
                 + ("asks the same thing." if same else "adds new information."),
                 f"The two problems are {'equal' if same else 'different'}.", f"**Verdict:** {word}",
                 f"Verdict:\n{word}", "Equal" if same else "Not Equal")


def _fmt(a: int, sym: str, b: int, r: int, latex: bool) -> str:
    if latex:
        return f"${a} {dict({'*': chr(92) + 'times', '/': chr(92) + 'div'}).get(sym, sym)} {b} = {r}$"
    return f"{a} {sym} {b} = {r}"


def solution(steps: Sequence[tuple[int, str, int, int]], rng: random.Random, noise: float) -> str:
    """A step-by-step solution in one of the forms models write; the final value is the last step's result."""
    answer = steps[-1][3] if steps else 0
    form = _pick(rng, noise, "steps", "bold", "numbered", "latex", "prose")
    ending = _pick(rng, noise, f"The answer is: {answer}", f"The answer is: {answer}.", f"#### {answer}",
                   f"#### {answer}\nThe answer is: {answer}", f"Therefore, the answer is $\\boxed{{{answer}}}$.",
                   f"The final answer is: $\\boxed{{{answer}}}$",
                   f"The final answer is $\\boxed{{{answer}}}$.\nThe answer is: ${answer}$",
                   f"Final Answer: The final answer is {answer}. I hope it is correct.")
    if form == "prose":
        body = " ".join(f"{'First' if i == 0 else 'Then'}, {_fmt(*s, latex=False)}." for i, s in enumerate(steps))
        return f"{body}\n{ending}"
    lines = []
    for i, s in enumerate(steps, 1):
        calc = _fmt(*s, latex=form == "latex")
        lines.append({"bold": f"**Step {i}:** {calc}.", "numbered": f"{i}. {calc}."}.get(form, f"Step {i}: {calc}."))
    return "\n".join(lines) + f"\n{ending}"


def math_solution(record: dict) -> str:
    """A MATH-format solution (LaTeX, the answer in ``\\boxed{}``) of an arithmetic-world problem."""
    parts = [f"We compute ${a} {sym.replace('*', chr(92) + 'times ')} {b} = {r}$." for a, sym, b, r in
             _steps_of(record["solution"])]
    return " ".join(parts[:-1] + [parts[-1][:-1] + f", so the answer is $\\boxed{{{record['answer']}}}$."])


def _steps_of(solution: str) -> list[tuple[int, str, int, int]]:
    return [(int(a), s, int(b), int(r)) for a, s, b, r in re.findall(r"(\d+) ([-+*/]) (\d+) = (-?\d+)", solution)]


def quality(record: dict, text: str, max_steps: int) -> float:
    """How a careful judge would rate one variant: well formed, no template leak, solvable, in range."""
    defect = record.get("defect")
    problem = record.get("problem")
    low = text.lower()
    score = 0.0
    score += 4 * (problem is not None and defect not in ("malformed", "refusal"))
    score += 2 * (defect not in ("leaked_template", "no_change") and not any(p in low for p in LEAK_PHRASES + NOTE_PHRASES + NOTES))
    score += 3 * (record.get("answer") is not None and defect not in ("unsolvable", "ambiguous"))
    score += 1 * (problem is not None and 1 <= len(problem["ops"]) <= max_steps + 2)
    return score


def ranking(order: Sequence[str], rng: random.Random, noise: float) -> str:
    """A ranking, best first, with the explanation judges write and the final line in one of their forms; now
    and then one that breaks the asked format (a tie, or only the best one named)."""
    line = " > ".join(order)
    words = ["clear and solvable"] + ["acceptable"] * (len(order) - 2) + ["weakest of the set"]
    notes = "\n".join(f"- Variant {x}: {w}." for x, w in zip(order, words[-len(order):]))
    broken = len(order) > 2 and rng.random() < 0.08 * noise
    if broken:
        return rng.choice((f"Ranking: {order[0]} = {order[1]} > {' > '.join(order[2:])}",
                           f"The best version is {order[0]}.", "All versions are of similar quality."))
    return _pick(rng, noise, f"Ranking: {line}", f"{notes}\n\nRanking: {line}", f"**Ranking:** {line}",
                 f"Let me compare them.\n{notes}\n\nRanking: {', '.join(order)}", f"{notes}\n\nFinal ranking: {line}",
                 f"Ranking: {'>'.join(order)}", f"{notes}\n\n**Ranking: {line}.**")


def step_labels(labels: Sequence[bool], rng: random.Random, noise: float) -> str:
    """One verdict per step in the forms judges use; now and then a reply that breaks the asked format."""
    words = ["correct" if ok else "incorrect" for ok in labels]
    if rng.random() < 0.08 * noise:
        if all(labels):
            return "All steps are correct."
        fewer = "\n".join(f"Step {i}: {w}" for i, w in enumerate(words[:-1], 1)) or "The solution is wrong."
        restated = "\n".join(f"Step {i}: the student works out the next quantity." for i in range(1, len(words) + 1))
        return rng.choice((fewer, restated))
    form = _pick(rng, noise, "plain", "capital", "explained", "numbered", "bold", "summary", "trailing", "sentences",
                 "boxed")
    if form == "trailing":
        lines = [f"Step {i}: The calculation is checked. This step is {w}." for i, w in enumerate(words, 1)]
        return "\n" + "\n".join(lines) + f"\nFinal Judgement: {'correct' if all(labels) else 'wrong'}"
    if form == "sentences":
        return "Step-by-step Evaluation:\n" + "\n".join(
            f"Step {i} is correct." if ok else f"Step {i} contains an error." for i, ok in enumerate(labels, 1))
    if form == "boxed":
        return "\n".join(f"Step {i}: Checking the arithmetic. The step is \\boxed{{{w}}}"
                         for i, w in enumerate(words, 1))
    if form == "capital":
        return "\n".join(f"Step {i}: {w.capitalize()}" for i, w in enumerate(words, 1))
    if form == "explained":
        return "\n".join(f"Step {i}: {w} ({'the calculation is right' if ok else 'this calculation is wrong'})"
                         for i, (w, ok) in enumerate(zip(words, labels), 1))
    if form == "numbered":
        return "\n".join(f"{i}. {w}" for i, w in enumerate(words, 1))
    if form == "bold":
        return "\n".join(f"**Step {i}:** {w}" for i, w in enumerate(words, 1))
    if form == "summary":
        return "Let me check each step.\n\n" + "\n".join(f"Step {i}: {w}" for i, w in enumerate(words, 1))
    return "\n".join(f"Step {i}: {w}" for i, w in enumerate(words, 1))

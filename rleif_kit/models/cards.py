"""Model cards: the ``README.md`` every model folder the kit writes carries, as the Hugging Face Hub reads it.

A card is YAML front matter (``base_model``, ``datasets``, ``tags``, ``library_name``, ``license``, ``pipeline_tag``:
what the Hub indexes and shows) and then, in this order: what the model is; **Usage**, a snippet that loads the
folder by a relative path with transformers / peft alone and generates or scores one example; the **prompt
format** it was trained with (the exact template, which the stage passes in from ``worlds/prompts.py``); how it
was **trained** (the run config's key settings) and what was **measured**; the **data** it learned from; its
**figures**, drawn into ``figures/`` inside the folder, since a relative image link only works from there (the
run's report folder lies outside the run directory); and what the kit's own files in the folder mean.

The snippets are code, not prose: ``tests/test_model_cards.py`` and the training tests run each one from its
folder (:func:`usage_code` finds it). This module renders; the stages decide what goes in.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rleif_kit.core.plots import save_figure
from rleif_kit.models.refs import is_local_ref

README = "README.md"
FIGURES = "figures"  # inside the model folder: where the card's image links point
USAGE = "## Usage"


def recipe_tags(recipe: str) -> list[str]:
    """The tags every model of a run carries: RLEIF and the published model whose recipe its world follows
    (``World.recipe``: "WizardMath" -> ``wizardmath``, "WizardCoder" -> ``wizardcoder``)."""
    return ["rleif", recipe.lower()]


@dataclass
class ModelCard:
    title: str
    summary: str  # what the model is and its place in RLEIF (markdown)
    metadata: dict[str, Any]  # the front matter; None values are left out
    usage: str  # Python that runs from the model folder
    prompt: str = ""  # markdown: the input format, the template included
    training: dict[str, Any] = field(default_factory=dict)  # setting -> value
    results: dict[str, Any] = field(default_factory=dict)  # measure -> value
    data: str = ""  # markdown: what it learned from
    figures: dict[str, str] = field(default_factory=dict)  # caption -> path relative to the folder
    files: dict[str, str] = field(default_factory=dict)  # file in the folder -> what it is


def front_matter(metadata: dict[str, Any]) -> str:
    """``---\\n<yaml>\\n---``, validated by huggingface_hub's ``ModelCardData`` as the Hub would read it."""
    from huggingface_hub import ModelCardData  # heavy: loaded on first use

    meta = {k: v for k, v in metadata.items() if v not in (None, [], "")}
    return f"---\n{ModelCardData(**meta).to_yaml()}\n---\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{v}`" for v in value)
    return "n/a" if value is None else str(value).replace("|", "\\|")


def _table(rows: dict[str, Any], head: tuple[str, str]) -> str:
    lines = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    return "\n".join(lines + [f"| {_cell(k)} | {_cell(v)} |" for k, v in rows.items()])


def render(card: ModelCard) -> str:
    """The card's text: front matter, then the sections that have content."""
    parts = [front_matter(card.metadata), f"# {card.title}\n\n{card.summary.strip()}\n",
             f"{USAGE}\n\nRun from this folder (paths are relative to it); needs `torch`, `transformers`"
             f"{' and `peft`' if 'peft' in card.usage else ''}.\n\n```python\n{card.usage.strip()}\n```\n"]
    if card.prompt:
        parts.append(f"## Prompt format\n\n{card.prompt.strip()}\n")
    if card.training:
        parts.append(f"## Training\n\n{_table(card.training, ('setting', 'value'))}\n")
    if card.results:
        parts.append(f"## Results\n\n{_table(card.results, ('measure', 'value'))}\n")
    if card.data:
        parts.append(f"## Data\n\n{card.data.strip()}\n")
    if card.figures:
        parts.append("## Figures\n\n" + "\n\n".join(f"![{c}]({p})" for c, p in card.figures.items()) + "\n")
    if card.files:
        parts.append("## Files\n\n" + "\n".join(f"- `{n}`: {what}" for n, what in card.files.items()) + "\n")
    return "\n".join(parts)


def write_card(folder: Path, card: ModelCard) -> Path:
    """``<folder>/README.md`` (the caller writes on the main rank only)."""
    path = Path(folder) / README
    tmp = path.with_name(f".{README}.tmp")
    try:  # written aside and renamed: a full disk leaves the old card (or none), never half of one
        tmp.write_text(render(card), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def usage_code(text: str) -> str:
    """The Python of a card's Usage section (what the tests run)."""
    section = text.split(f"\n{USAGE}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0]


def save_figures(folder: Path, figures: dict[str, Any]) -> dict[str, str]:
    """Each ``name -> matplotlib Figure`` as ``<folder>/figures/<name>.png``; caption (the name) -> relative path."""
    import matplotlib.pyplot as plt  # heavy: already loaded by whoever drew the figures

    out = {}
    for name, fig in figures.items():
        save_figure(fig, Path(folder) / FIGURES, name)
        plt.close(fig)
        out[name.replace("_", " ")] = f"{FIGURES}/{name}.png"
    return out


def hub_id(ref: str | None) -> str | None:
    """``ref`` when it is a hub id (what ``base_model`` in the front matter must be), else None."""
    return ref if ref and not is_local_ref(ref) and ref.count("/") == 1 else None


def base_license(location: str | Path | None) -> str | None:
    """The ``license`` in the front matter of the base model's own card: a local directory's, or a hub model's
    already in the Hugging Face cache (no network); None when there is none."""
    from huggingface_hub import metadata_load, try_to_load_from_cache  # heavy: loaded on first use

    if not location:
        return None
    if Path(location).is_dir():
        card = Path(location) / README
    else:
        cached = try_to_load_from_cache(str(location), README) if hub_id(str(location)) else None
        card = Path(cached) if isinstance(cached, str) else None
    if card is None or not card.exists():
        return None
    license_ = (metadata_load(card) or {}).get("license")
    return str(license_) if license_ else None


def template_opener(world: Any, cot: bool) -> str:
    """The words ' with the chain-of-thought opener' where ``cot`` changes the world's training template (the code
    world's prompt has no opener), else ''."""
    differs = world.train_template(True) != world.train_template(False)
    return " with the chain-of-thought opener" if cot and differs else ""


# ------------------------------------------------------------------ usage snippets

def py_literal(value: Any) -> str:
    """A Python literal of a string or a list of strings for a snippet: JSON's escapes are Python's, and the quotes
    are the same whatever the text holds."""
    return json.dumps(value, ensure_ascii=False)


def _adapter_load(auto_class: str, base: str | None, head: str = "") -> str:
    """Full weights from the folder, or the base (with ``head``: the new head's arguments) and this adapter."""
    if base is None:
        return f'model = {auto_class}.from_pretrained(".").eval()'
    return (f"# the base this adapter was trained on, then the adapter merged into it\n"
            f"base = {auto_class}.from_pretrained({py_literal(base)}{head})\n"
            f'model = PeftModel.from_pretrained(base, ".").merge_and_unload().eval()')


def _steps_lines(steps: list[str], join: str, lead: str) -> str:
    """The snippet's solution: its steps, how they join into it, and what comes between the prompt and it."""
    return (f"steps = {py_literal(steps)}\n"
            f"JOIN, LEAD = {py_literal(join)}, {py_literal(lead)}  # the steps joined make the solution; LEAD comes "
            "before it")


def prm_likelihood_usage(template: str, question: str, steps: list[str], calibration: list[float],
                         adapter_base: str | None = None, join: str = " ", lead: str = " ") -> str:
    """P(step right) of each step of one solution from a generative PRM: the lowest log-probability of a token of what
    the step concludes (after its last '='; the last step's answer line and the end of text too), calibrated.
    ``join``: what joins the steps into the solution; ``lead``: what the world puts between prompt and solution."""
    peft = "from peft import PeftModel\n" if adapter_base is not None else ""
    return f"""import math

import torch
{peft}from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPT = {py_literal(template)}
question = {py_literal(question)}
{_steps_lines(steps, join, lead)}
A, B = {calibration[0]!r}, {calibration[1]!r}  # the calibration (rm_info.json): P(right) = sigmoid(A * x + B)

tokenizer = AutoTokenizer.from_pretrained(".")
{_adapter_load("AutoModelForCausalLM", adapter_base)}
solution = JOIN.join(steps)
text = PROMPT.format(instruction=question) + LEAD + solution
spans, pos = [], len(text) - len(solution)  # each step, and what it concludes: after its last "=", to its end
for step in steps:
    body = step.rstrip()
    eq = body.rfind("=")
    start = pos + eq + 1 if eq >= 0 and body[eq + 1:].strip() else pos  # no value claimed: the whole step
    spans.append(((start, pos + len(body)), (pos, pos + len(body))))
    pos += len(step) + len(JOIN)
enc = tokenizer(text, return_offsets_mapping=True)
ids = enc["input_ids"] + [tokenizer.eos_token_id]
with torch.no_grad():
    logits = model(torch.tensor([ids])).logits[0, :-1].float()
log_p = (logits.gather(-1, torch.tensor(ids[1:])[:, None])[:, 0] - logits.logsumexp(-1)).tolist()  # token t+1


def tokens_in(lo, hi):
    return [i for i, (a, b) in enumerate(enc["offset_mapping"])
            if i > 0 and text[a:b].strip() and lo <= a + len(text[a:b]) - len(text[a:b].lstrip()) < hi and b <= hi]


scores = []
for k, (concluded, whole) in enumerate(spans):
    tokens = tokens_in(*concluded) or tokens_in(*whole)
    tokens += [len(ids) - 1] if k == len(spans) - 1 else []  # the end of text, with the last step
    x = min(log_p[i - 1] for i in tokens)
    scores.append(1 / (1 + math.exp(-(A * x + B))))
for step, p in zip(steps, scores):
    print(f"{{p:.3f}}  {{step}}")
print(f"rA (min over the steps) = {{min(scores):.3f}}")
"""


def generation_usage(template: str, instruction: str, max_new_tokens: int, adapter_base: str | None = None) -> str:
    """Greedy generation of one response to ``instruction`` in ``template`` (``{instruction}`` filled in)."""
    peft = "from peft import PeftModel\n" if adapter_base is not None else ""
    return f"""import torch
{peft}from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPT = {py_literal(template)}
instruction = {py_literal(instruction)}

tokenizer = AutoTokenizer.from_pretrained(".")
{_adapter_load("AutoModelForCausalLM", adapter_base)}
inputs = tokenizer(PROMPT.format(instruction=instruction), return_tensors="pt")
with torch.no_grad():
    output = model.generate(**inputs, max_new_tokens={max_new_tokens}, do_sample=False,
                            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
response = tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
print(response)
"""


def irm_usage(instruction: str, adapter_base: str | None = None) -> str:
    """rI of one instruction: the sigmoid of the reward head read at the EOS that ends the text (as trained)."""
    peft = "from peft import PeftModel\n" if adapter_base is not None else ""
    return f"""import torch
{peft}from transformers import AutoModelForSequenceClassification, AutoTokenizer

instruction = {py_literal(instruction)}

tokenizer = AutoTokenizer.from_pretrained(".")
{_adapter_load("AutoModelForSequenceClassification", adapter_base, ", num_labels=1")}
model.config.pad_token_id = tokenizer.pad_token_id  # the head reads the last token before the padding
inputs = tokenizer(instruction + tokenizer.eos_token, return_tensors="pt")
with torch.no_grad():
    r_i = torch.sigmoid(model(**inputs).logits[0, 0]).item()
print(f"rI = {{r_i:.3f}}")
"""


def prm_usage(template: str, question: str, steps: list[str], labels: dict[int, str],
              adapter_base: str | None = None, join: str = " ", lead: str = " ") -> str:
    """P(step right) of each step of one solution: the head read at each step's last token, label ``right``
    (``labels``: the head's id2label, which an adapter's base must be given; full weights have it in config.json).
    ``join``: what joins the steps into the solution (" " for "Step k:" segments, "" for a program's exact slices);
    ``lead``: what the world puts between prompt and solution (math: one space; code: nothing)."""
    peft = "from peft import PeftModel\n" if adapter_base is not None else ""
    names = "{" + ", ".join(f"{k}: {py_literal(v)}" for k, v in labels.items()) + "}"
    ids = "{" + ", ".join(f"{py_literal(v)}: {k}" for k, v in labels.items()) + "}"
    classes = "" if adapter_base is None else (f"LABELS, LABEL_IDS = {names}, {ids}  # the head's classes (in "
                                               "config.json of full weights)\n")
    head = ", id2label=LABELS, label2id=LABEL_IDS"
    return f"""import torch
{peft}from transformers import AutoModelForTokenClassification, AutoTokenizer

PROMPT = {py_literal(template)}
question = {py_literal(question)}
{_steps_lines(steps, join, lead)}
{classes}
tokenizer = AutoTokenizer.from_pretrained(".")
{_adapter_load("AutoModelForTokenClassification", adapter_base, head)}
solution = JOIN.join(steps)
text = PROMPT.format(instruction=question) + LEAD + solution
ends, pos = [], len(text) - len(solution)  # character end of each step in the text, trailing space excluded
for step in steps:
    ends.append(pos + len(step.rstrip()))
    pos += len(step) + len(JOIN)
enc = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
spans = enc.pop("offset_mapping")[0].tolist()
last_tokens = [max(i for i, (a, b) in enumerate(spans) if a < b and a < end) for end in ends]
with torch.no_grad():
    probs = torch.softmax(model(**enc).logits[0].float(), dim=-1)
scores = probs[last_tokens, model.config.label2id["right"]].tolist()
for step, p in zip(steps, scores):
    print(f"{{p:.3f}}  {{step}}")
print(f"rA (min over the steps) = {{min(scores):.3f}}")
"""

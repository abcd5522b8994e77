"""Run configuration: one TOML file per run (``params/<run>.toml``) → frozen dataclasses per section.

Everything is validated when the file is loaded, so a bad value fails before any model is touched.
All errors of a file are collected and reported together, one line each, naming the file, the
section, the key, the value and what was expected. Overrides (``section.key=value``, from the CLI
or a notebook's parameters) go through the same validation.

    rleif config params/tiny-cpu.toml --set ppo.lr=1e-5   # print the resolved config
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from rleif_kit.core.sections import (
    BaseConfig,
    DedupConfig,
    DiagnosticsConfig,
    EvalConfig,
    EvolInstructConfig,
    LoopConfig,
    PPOConfig,
    RewardModelConfig,
    SFTConfig,
)
from rleif_kit.core.world_sections import ArithConfig, TinyCodeConfig, TinyConfig

SECTIONS: dict[str, type] = {
    "base": BaseConfig,
    "tiny": TinyConfig,
    "arith": ArithConfig,
    "tiny_code": TinyCodeConfig,
    "sft": SFTConfig,
    "evol_instruct": EvolInstructConfig,
    "dedup": DedupConfig,
    "reward_model": RewardModelConfig,
    "ppo": PPOConfig,
    "eval": EvalConfig,
    "diagnostics": DiagnosticsConfig,
    "loop": LoopConfig,
}


KIT_ROOT = Path(__file__).resolve().parents[2]  # the kit's checkout: its params/ presets and prompt templates
DEFAULT_PROMPTS_DIR = next(f.default for f in fields(EvolInstructConfig) if f.name == "prompts_dir")


# Names users bring from transformers / TRL, mapped to ours for the "did you mean" hint.
ALIASES = {"learning_rate": "lr", "num_train_epochs": "epochs", "per_device_train_batch_size": "batch_size",
           "gradient_accumulation_steps": "grad_accum", "max_seq_length": "max_seq_len",
           "max_length": "max_seq_len", "model": "model_name", "model_name_or_path": "model_name",
           "lr_scheduler_type": "lr_scheduler", "lora_rank": "lora_r", "target_modules": "lora_targets",
           "cliprange": "clip_range", "init_kl_coef": "kl_coef", "batch_size": "rollout_batch",
           "mini_batch_size": "mini_batch"}


# Keys that are gone, with what took their place (a clear error, never a silently ignored key).
REPLACED = {("evol_instruct", "domain"): "[base] world names the domain now (its operators are the world's): "
                                        "[base] world = 'math' or 'code'"}


class ConfigError(ValueError):
    """A config file (or override) is invalid; ``errors`` holds one line per problem."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("\n".join(errors))


@dataclass(frozen=True)
class RunConfig:
    """The whole run: one attribute per TOML section, plus where it came from."""

    base: BaseConfig
    tiny: TinyConfig
    arith: ArithConfig
    tiny_code: TinyCodeConfig
    sft: SFTConfig
    evol_instruct: EvolInstructConfig
    dedup: DedupConfig
    reward_model: RewardModelConfig
    ppo: PPOConfig
    eval: EvalConfig
    diagnostics: DiagnosticsConfig
    loop: LoopConfig
    source: str = ""
    workdir: str = "."
    overrides: tuple[str, ...] = field(default=())
    reasons: dict[str, str] = field(default_factory=dict, hash=False, compare=False)  # [reasons]: key -> why

    @property
    def run_name(self) -> str:
        return self.base.run_name or Path(self.source).stem or "run"

    def resolve(self, path: str) -> Path:
        """A path from the config, made absolute against the directory the run was started from. The kit's default
        prompts root (``[evol_instruct] prompts_dir``) falls back to the kit's own checkout when that directory has
        none: a run config kept outside the repository still finds the shipped templates."""
        p = Path(path).expanduser()
        if p.is_absolute():
            return p
        here = (Path(self.workdir) / p).resolve()
        if path == DEFAULT_PROMPTS_DIR and not here.exists() and (KIT_ROOT / p).is_dir():
            return (KIT_ROOT / p).resolve()
        return here

    @property
    def output_dir(self) -> Path:
        return self.resolve(self.base.output_dir)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}


MAX_INT = 2**53  # integers a float holds exactly; the settings that can hang a run have bounds of their own


def _type_error(value: Any, hint: Any, check: Any = None) -> str | None:
    """None when ``value`` has the TOML type that ``hint`` asks for, else what is wrong: "expected ..." or "must be
    an integer ..." with the range the field's ``check`` configures (core/fields.ranged), and only that range."""
    if hint is bool:
        return None if isinstance(value, bool) else "expected true or false"
    if hint is int:
        span = getattr(check, "range", "")
        if not isinstance(value, int) or isinstance(value, bool):
            return "must be an integer" + (f" {span}" if span else "")
        if abs(value) > MAX_INT:  # no setting of the kit counts past a billion: a typo (or a hang)
            out_of_range = check(value) if check else None
            return f"expected {out_of_range}" if out_of_range else f"must be an integer of at most {MAX_INT:,} (2**53)"
        return None
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return None if ok else "expected a finite number"
    if hint is str:
        return None if isinstance(value, str) else "expected a string"
    if hint == list[str]:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return None if ok else "expected a list of strings"
    raise TypeError(f"unsupported config type {hint!r}")


def _where(source: str, section: str, key: str, value: Any) -> str:
    return f"{source}: [{section}] {key} = {value!r}"


def _close_key(key: str, known: list[str]) -> list[str]:
    """Our name for a key users bring from transformers / TRL (``learning_rate`` -> ``lr``, also misspelt), else
    the nearest of ours."""
    ours = {alias: name for alias, name in ALIASES.items() if name in known}
    if key in ours:
        return [ours[key]]
    return difflib.get_close_matches(key, known, n=1) or [ours[a] for a in difflib.get_close_matches(key, ours, n=1)]


def _build_section(source: str, name: str, raw: dict[str, Any], errors: list[str], set_by: dict | None = None):
    """``set_by``: (section, key) -> the ``--set`` text that gave the value, so its error names the --set, not the
    file."""
    cls = SECTIONS[name]
    hints = get_type_hints(cls)
    checks = {f.name: f.metadata.get("check") for f in fields(cls)}
    known = [f.name for f in fields(cls)]
    set_by = set_by or {}

    def origin(key: str) -> str:
        return f"--set {set_by[name, key]}" if (name, key) in set_by else source

    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if (name, key) in REPLACED:
            errors.append(f"{origin(key)}: [{name}] {key}: {REPLACED[name, key]}")
            continue
        if key not in known:
            close = _close_key(key, known)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(known)})"
            errors.append(f"{origin(key)}: [{name}] unknown key '{key}'{hint}")
            continue
        wrong = _type_error(value, hints[key], checks[key])
        if wrong:
            errors.append(f"{_where(origin(key), name, key, value)}: {wrong}")
            continue
        kwargs[key] = float(value) if hints[key] is float else value
    reported = set(raw) - set(kwargs)  # unknown or mistyped keys, already reported
    for f in fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and f.name not in kwargs:
            if f.name not in raw:
                errors.append(f"{source}: [{name}] missing required key '{f.name}' ({f.metadata.get('help', '')})")
            kwargs[f.name] = ""  # placeholder so the other keys still get checked
            reported.add(f.name)
    section = cls(**kwargs)
    # rules across keys would read the defaults standing in for unknown or mistyped keys: skip them then
    for key, problem in section.problems(cross=not reported):
        if key not in reported:
            errors.append(f"{_where(origin(key), name, key, raw.get(key, getattr(section, key)))}: expected {problem}")
    return section


def parse_override(text: str) -> tuple[str, str, Any]:
    """``"ppo.lr=1e-5"`` → ``("ppo", "lr", 1e-5)``; the value is read as TOML, else as a plain string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError([f"override {text!r}: expected section.key=value, e.g. ppo.lr=1e-6"])
    dotted, raw_value = (s.strip() for s in text.split("=", 1))
    section, key = dotted.split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw_value}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw_value  # unquoted strings such as base.model_name=./my-model
    return section, key, value


def build_config(raw: dict[str, Any], source: str = "<config>", overrides: list[str] | tuple = (),
                 workdir: str | Path = ".") -> RunConfig:
    """Validate a parsed TOML document (plus overrides) into a RunConfig, or raise ConfigError."""
    errors: list[str] = []
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    set_by: dict[tuple[str, str], str] = {}  # (section, key) -> the --set that gave it
    for text in overrides:
        try:
            section, key, value = parse_override(text)
        except ConfigError as e:
            errors.extend(e.errors)
            continue
        data.setdefault(section, {})
        if isinstance(data[section], dict):
            data[section][key] = value
            set_by[section, key] = text
    reasons = data.pop(REASONS, {})
    errors.extend(_reason_problems(source, reasons))
    for name, value in data.items():
        if name not in SECTIONS:
            close = difflib.get_close_matches(name, list(SECTIONS), n=1)
            hint = f" (did you mean [{close[0]}]?)" if close else f" (known sections: {', '.join(SECTIONS)})"
            given = [f"--set {t}" for (s, _), t in set_by.items() if s == name] if name not in raw else [source]
            errors.extend(f"{where}: unknown section [{name}]{hint}" for where in given)
        elif not isinstance(value, dict):
            errors.append(f"{source}: '{name}' must be a [{name}] section, got {value!r}")
    sections = {n: _build_section(source, n, data.get(n, {}) if isinstance(data.get(n), dict) else {}, errors,
                                  set_by) for n in SECTIONS}
    if not errors:
        errors.extend(f"{source}: {msg}" for msg in _cross_checks(sections))
    if errors:
        raise ConfigError(errors)
    return RunConfig(**sections, source=str(source), workdir=str(Path(workdir).resolve()),
                     overrides=tuple(overrides), reasons=dict(reasons))


# A TOML comment is lost to tomllib, so a preset says why it moves a key (a threshold above all) in a table code
# can read: [reasons] "diagnostics.low_ra_healthy_max" = "...". The report shows the reason beside the value.
REASONS = "reasons"


def _reason_problems(source: str, reasons: Any) -> list[str]:
    if not isinstance(reasons, dict):
        return [f"{source}: '{REASONS}' must be a [{REASONS}] table of \"section.key\" = \"why\""]
    out = []
    for name, why in reasons.items():
        section, _, key = name.partition(".")
        if section not in SECTIONS or key not in {f.name for f in fields(SECTIONS[section])}:
            out.append(f"{source}: [{REASONS}] '{name}' names no config key (expected \"section.key\")")
        elif not isinstance(why, str) or not why.strip():
            out.append(f"{source}: [{REASONS}] '{name}': expected a non-empty string saying why")
    return out


def config_changes(cfg: RunConfig) -> list[dict[str, Any]]:
    """Every key whose value differs from the kit's default (the reference 7B recipe): ``{key, value, default,
    reason, override}`` — ``override`` when a ``--set`` gave it, ``reason`` from the preset's [reasons]."""
    set_keys = {parse_override(o)[0] + "." + parse_override(o)[1] for o in cfg.overrides}
    out = []
    for name, cls in SECTIONS.items():
        section = getattr(cfg, name)
        for f in fields(cls):
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = None  # required: no default to differ from
            value, key = getattr(section, f.name), f"{name}.{f.name}"
            if value != default:
                override = key in set_keys  # the preset's reason was for the preset's value, not this one
                out.append({"key": key, "value": value, "default": default, "override": override,
                            "reason": "" if override else cfg.reasons.get(key, "")})
    return out


def _cross_checks(s: dict[str, Any]) -> list[str]:
    """Rules that involve more than one key."""
    problems = []
    ppo = s["ppo"]
    if ppo.rollout_batch % ppo.mini_batch:
        problems.append(f"[ppo] mini_batch = {ppo.mini_batch}: expected a divisor of rollout_batch "
                        f"({ppo.rollout_batch})")
    if ppo.algorithm == "grpo" and ppo.rollout_batch % ppo.num_generations:
        problems.append(f"[ppo] num_generations = {ppo.num_generations}: expected a divisor of rollout_batch "
                        f"({ppo.rollout_batch}) for algorithm = 'grpo'")
    rm = s["reward_model"]
    if rm.prm_extra_layers and rm.rm_finetune != "full":
        problems.append(f"[reward_model] prm_extra_layers = {rm.prm_extra_layers}: new layers train whole, so it "
                        f"needs rm_finetune = 'full' (not {rm.rm_finetune!r})")
    arith = s["arith"]
    if arith.min_steps > arith.max_steps:
        problems.append(f"[arith] min_steps = {arith.min_steps}: expected <= max_steps ({arith.max_steps})")
    return problems


def load_config(path: str | Path, overrides: list[str] | tuple = (), workdir: str | Path | None = None) -> RunConfig:
    """Read and validate ``path``; relative paths in it resolve against ``workdir`` (default: cwd)."""
    workdir = Path(workdir or Path.cwd())
    p = Path(path)
    p = p if p.is_absolute() else workdir / p
    if not p.exists():
        raise ConfigError([f"{path}: config file not found (looked in {p.resolve()}){_preset_hint(path, workdir)}"])
    if not p.is_file():
        raise ConfigError([f"{path}: is a directory, not a TOML config file (e.g. params/tiny-cpu.toml)"])
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError([f"{path}: not valid TOML: {e}"]) from None
    except UnicodeDecodeError as e:
        raise ConfigError([f"{path}: not a text file (invalid UTF-8 at byte {e.start}): expected TOML"]) from None
    except OSError as e:
        raise ConfigError([f"{path}: cannot be read: {e.strerror}"]) from None
    return build_config(raw, source=str(path), overrides=overrides, workdir=workdir)


def _preset_hint(path: str | Path, workdir: Path) -> str:
    """"; did you mean params/tiny-cpu.toml?" for a bare name (``tiny-cpu``, ``tiny-cpu.toml``) that names a preset
    of ``<workdir>/params`` or of the kit's checkout, exactly or nearly; else ""."""
    given = Path(path)
    if len(given.parts) > 1 and given.parent.name != "params":
        return ""
    stem = given.name.removesuffix(".toml")
    folders = [d for d in (KIT_ROOT / "params", workdir / "params") if d.is_dir()]  # the workdir's, set last, win
    presets = {f.stem: f.resolve() for d in folders for f in sorted(d.glob("*.toml"))}
    match = presets.get(stem) or next((presets[c] for c in difflib.get_close_matches(stem, presets, n=1)), None)
    if match is None:
        return ""
    try:
        shown = match.relative_to(workdir.resolve())
    except ValueError:
        shown = match
    return f"; did you mean {shown}?"


# TOML basic strings: quote and backslash escaped, control characters (newline, tab, ...) never raw
_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_TOML_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                             for c in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def to_toml(cfg: RunConfig) -> str:
    """The resolved config as TOML (every key, defaults included), as saved in each run directory."""
    lines = [f"# resolved from {cfg.source}" + (f" with overrides {list(cfg.overrides)}" if cfg.overrides else "")]
    for name, values in cfg.to_dict().items():
        lines.append(f"\n[{name}]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in values.items())
    if cfg.reasons:
        lines.append(f"\n[{REASONS}]")
        lines.extend(f"{_toml_value(k)} = {_toml_value(v)}" for k, v in cfg.reasons.items())
    return "\n".join(lines) + "\n"

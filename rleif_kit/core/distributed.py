"""The few distributed helpers our own code needs under ``accelerate launch``: who am I, how many are we,
wait for the others, average across ranks.

On one process (a notebook, a test, ``python -m ...`` without a launcher) every helper is a no-op: rank 0
of 1, ``gather_mean`` returns its input, ``barrier`` returns at once — so the single-process results are
those of the code without this module. Rank and world size come from the environment the launcher
sets (``RANK``, ``WORLD_SIZE``), so asking costs no import; the collectives go through accelerate's
``PartialState``, which joins the process group (gloo on CPUs, NCCL on GPUs) on first use.

    accelerate launch --config_file params/accelerate/ddp.yaml -m rleif_kit.ppo --params params/wizardmath-7b.toml
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

DEBUG_DUMP = "RLEIF_DEBUG_DUMP_DIR"  # tests: each rank writes a hash of its trainable weights there


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main() -> bool:
    """Rank 0: the one process that writes artifacts and logs."""
    return rank() == 0


def _state():
    from accelerate import PartialState  # heavy: loaded on first use

    return PartialState()


def accelerator():
    """The process's ``accelerate.Accelerator`` (made once; a plain pass-through on one process)."""
    from accelerate import Accelerator  # heavy: loaded on first use

    global _ACCELERATOR
    if _ACCELERATOR is None:
        _ACCELERATOR = Accelerator()
    return _ACCELERATOR


_ACCELERATOR = None


def barrier() -> None:
    """Wait until every rank gets here (after rank 0 wrote something the others read)."""
    if world_size() > 1:
        _state().wait_for_everyone()


@contextlib.contextmanager
def main_first():
    """Rank 0 runs the block first (e.g. builds or merges a model on disk), the others after it."""
    if not is_main():
        barrier()
    yield
    if is_main():
        barrier()


def shard(items: Sequence, what: str = "[ppo] rollout_batch") -> list:
    """This rank's contiguous slice of ``items``; gathering the slices in rank order gives ``items`` back."""
    n, w = len(items), world_size()
    if n % w:
        raise ValueError(f"{what} = {n} must divide by the number of processes ({w}): set it to a multiple of {w}")
    per = n // w
    return list(items[rank() * per:(rank() + 1) * per])


def gather_lists(values: dict[str, list]) -> dict[str, list]:
    """Each key's list concatenated over the ranks, in rank order (every rank gets the whole)."""
    if world_size() == 1:
        return values
    import torch.distributed as dist  # heavy: loaded on first use

    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, values)
    return {k: [x for part in out for x in part[k]] for k in values}


def gather_mean(values: dict[str, float]) -> dict[str, float]:
    """Each value averaged over the ranks (every rank gets the same numbers, so decisions agree)."""
    if world_size() == 1:
        return values
    import torch  # heavy: loaded on first use

    state = _state()
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=state.device)
    torch.distributed.all_reduce(t)
    return {k: v / world_size() for k, v in zip(keys, t.tolist())}


def any_rank(flag: bool) -> bool:
    """True when ``flag`` is true on any rank."""
    return gather_mean({"flag": float(flag)})["flag"] > 0


def save_weights(trainer: Any, out_dir: Path) -> None:
    """A Trainer's model into ``out_dir``. On several ranks every rank calls ``Trainer.save_model`` (it gathers
    DeepSpeed ZeRO-3 shards and writes on rank 0 only); on one process the model's own ``save_pretrained``."""
    if world_size() > 1:
        trainer.save_model(str(out_dir))
    else:
        trainer.model.save_pretrained(out_dir)


def save_model_dir(model: Any, tokenizer: Any, out_dir: Path, files: dict[str, str]) -> None:
    """A model directory in standard formats: weights, tokenizer and ``files`` (name -> text, e.g. the info JSON
    that says how to load it). ``model`` may be the Trainer that trained it: then every rank must call this
    (ZeRO-3 gathers its shards); rank 0 alone writes."""
    if is_main():
        out_dir.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "save_model"):
        save_weights(model, out_dir)
    elif is_main():
        model.save_pretrained(out_dir)
    if not is_main():
        return
    tokenizer.save_pretrained(out_dir)
    for name, text in files.items():
        (out_dir / name).write_text(text)


def debug_dump(tag: str, named: Iterable[tuple[str, Any]]) -> None:
    """Test hook, off unless ``RLEIF_DEBUG_DUMP_DIR`` is set: sha256 of each trainable tensor of this rank
    into ``<dir>/<tag>-rank<r>.json``, so a test can compare what the ranks ended with."""
    folder = os.environ.get(DEBUG_DUMP)
    if not folder:
        return
    hashes = {n: hashlib.sha256(p.detach().float().cpu().contiguous().numpy().tobytes()).hexdigest()
              for n, p in named if p.requires_grad}
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"{tag}-rank{rank()}.json").write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")

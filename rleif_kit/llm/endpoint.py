"""The run's endpoint backend: the ``evolve`` model of settings.json with ``[evol_instruct]``'s concurrency,
response cache and budget caps. Evolution, the answer rewrites of the SFT data and the judges all go
through one such backend, so there is one HTTP client to trust and one set of budget rules.

A backend given a usage ledger (``llm/usage.py``) accounts every request there as it is sent: what a killed process
spent still counts. Each step keeps its own beside its output (01's is ``RunPaths.evolve_usage_ledger``; the fan-out's
``<out>.usage.jsonl``), so one step's total never counts another's requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from rleif_kit.core.config import RunConfig
from rleif_kit.core.paths import RunPaths
from rleif_kit.llm.cache import ResponseCache
from rleif_kit.llm.openai_backend import OpenAIBackend


def make_llm_backend(cfg: RunConfig, settings: Any = None, role: str = "evolve",
                     cache_path: Path | None = None, ledger: Path | None = None,
                     prompt_format: Callable[[str], str] | None = None) -> Any:
    """The chat backend of ``role`` in settings.json with ``[evol_instruct]``'s concurrency, cache and caps.

    The cache is the run's ``01_evolve/cache.sqlite`` unless ``cache_path`` names another (a judge keeps
    its own next to its output). ``ledger``: the usage ledger every request is accounted in as it is sent (None:
    none), the calling step's own (01's ``RunPaths.evolve_usage_ledger``, a step's ``<out>.usage.jsonl``).
    ``prompt_format``: what a request's instruction becomes where settings.json's ``mode`` sends it on
    ``/v1/completions`` (a served base model: the Alpaca prompt a local one is asked, ``llm/api_mode.py``).
    """
    ev = cfg.evol_instruct
    if settings is None:
        raise ValueError(f"this step needs an endpoint: pass a settings.json (--settings) with models.{role}")
    endpoint = settings.endpoint(role)
    cache = ResponseCache(cache_path or RunPaths(cfg.output_dir).response_cache) if ev.cache else None
    return OpenAIBackend(endpoint, concurrency=ev.concurrency, cache=cache, price=settings.price(endpoint.name),
                         max_requests=ev.max_requests or None, max_cost=ev.max_cost or None, ledger=ledger,
                         prompt_format=prompt_format)

"""Chat backends behind one small interface: ``stream(requests)`` yields results as they complete.

``OpenAIBackend`` talks to any OpenAI-compatible server; ``HFBackend`` generates with a local
transformers model (torch is imported only when it first generates).  The engine picks one with
a plain ``if`` on the config.
"""

from rleif_kit.llm.base import ChatRequest, ChatResult, Usage, run_sync
from rleif_kit.llm.cache import ResponseCache
from rleif_kit.llm.hf_backend import HFBackend
from rleif_kit.llm.openai_backend import OpenAIBackend, estimate

__all__ = ["ChatRequest", "ChatResult", "Usage", "run_sync", "ResponseCache", "OpenAIBackend", "HFBackend",
           "estimate"]

"""vLLM generation for evaluation (``[eval] backend = "vllm"``): the surface of ``evaluation.generators.LocalModel``
— ``complete(prompts, ev, stop, sample_indices)`` — with vLLM's paged KV cache and continuous batching,
many times faster than ``model.generate`` on a GPU for the long GSM8k/MATH answers.

vLLM is optional. It brings its own torch and CUDA build, so it is installed separately on a GPU machine
(``pip install vllm``) and is never part of the CPU constraints; nothing here imports it until a model is
made, and without it ``require_vllm`` fails with one line that says what to do.

The transformers backend stays the reference. Greedy answers agree up to numerics (bf16 kernels that add
in another order can flip a near-tie token); sampled answers differ by RNG, so results of the two
backends are kept apart (the backend is part of the model's fingerprint). An SFT adapter is applied by
vLLM's LoRA support on top of its base model, no merged copy on disk.

PPO rollouts need the policy's current adapter in the engine at every step; our loop does not do that yet
(``[ppo] generation_backend = "vllm"`` says so), TRL's GRPO does (``[ppo] algorithm = "grpo"``).
"""

from __future__ import annotations

import gc
import json
from typing import Any, Sequence

from rleif_kit.core.text import cut_at_stop
from rleif_kit.evaluation.generators import LocalModel, minimal_stops
from rleif_kit.models.generation import require_vllm
from rleif_kit.models.loading import sft_info


def lora_rank_slot(r: int) -> int:
    """vLLM reserves adapter slots of a few sizes (8, 16, 32, ...): the smallest that holds rank ``r``."""
    return max(8, 1 << (r - 1).bit_length())


class VLLMModel(LocalModel):
    """A model directory served by an in-process vLLM engine, made on first use and dropped by ``close``."""

    def __init__(self, path: Any, name: str | None = None, batch_size: int = 16, seed: int = 0,
                 gpu_memory_utilization: float = 0.85, key: str = "[eval] backend"):
        require_vllm(key)
        super().__init__(path, name, batch_size)
        self.chunk = max(256, batch_size * 16)  # the engine batches continuously: hand it large chunks
        self.seed, self.gpu_memory_utilization = seed, gpu_memory_utilization
        self._lora = None

    @property
    def fingerprint(self) -> dict[str, Any]:
        return {**super().fingerprint, "backend": "vllm"}

    def load(self) -> Any:
        if self._loaded is None:
            from vllm import LLM  # heavy: loaded on first use

            info = sft_info(self.path)
            kw = dict(tokenizer=str(self.path), seed=self.seed, gpu_memory_utilization=self.gpu_memory_utilization)
            if info.get("finetune") == "full":
                llm = LLM(model=str(self.path), **kw)
            else:  # an SFT adapter on its base
                from vllm.lora.request import LoRARequest  # heavy: loaded on first use

                r = json.loads((self.path / "adapter_config.json").read_text())["r"]
                llm = LLM(model=info["base_model"], enable_lora=True, max_lora_rank=lora_rank_slot(r), **kw)
                self._lora = LoRARequest(self.name, 1, str(self.path))
            self._loaded = (llm, None)
        return self._loaded[0]

    def complete(self, prompts: Sequence[str], ev: Any, stop: Sequence[str] = (),
                 sample_indices: Sequence[int] | None = None) -> list[str | None]:
        from vllm import SamplingParams  # heavy: loaded on first use

        llm, stops, sampled = self.load(), minimal_stops(stop), ev.temperature > 0
        params = [SamplingParams(temperature=ev.temperature if sampled else 0.0, top_p=ev.top_p if sampled else 1.0,
                                 max_tokens=ev.max_new_tokens, stop=stops or None,
                                 seed=self.seed + k if sampled else None)  # sample k of an item: the same on a rerun
                  for k in (sample_indices or [0] * len(prompts))]
        outs = llm.generate(list(prompts), params, use_tqdm=False, lora_request=self._lora)
        return [cut_at_stop(o.outputs[0].text, stops) for o in outs]

    def close(self) -> None:
        self._loaded = None
        gc.collect()
        super().close()

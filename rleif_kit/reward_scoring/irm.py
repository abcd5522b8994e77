"""rI: the instruction reward model's score of an instruction, the sigmoid of its reward head, in [0, 1]."""

from __future__ import annotations

from typing import Any, Sequence


def irm_score(model: Any, tokenizer: Any, instructions: Sequence[str], batch_size: int = 64,
              max_length: int = 512) -> list[float]:
    """rI for each instruction: the sigmoid of the reward head, in [0, 1], batched.

    Each text ends in EOS, as TRL's RewardTrainer trains on it: where the pad token differs from EOS
    (Llama-3, Qwen, WizardLM's ``[PAD]``) the head reads the EOS token in training, so it must read it here too.
    """
    import torch  # heavy: loaded on first use

    was_training = model.training
    model.eval()
    tokenizer.padding_side = "right"
    device = next(model.parameters()).device
    scores: list[float] = []
    eos = tokenizer.eos_token or ""
    with torch.no_grad():
        for i in range(0, len(instructions), batch_size):
            texts = [t if t.endswith(eos) else t + eos for t in instructions[i:i + batch_size]]
            enc = tokenizer(texts, return_tensors="pt", padding=True,
                            truncation=True, max_length=max_length).to(device)
            scores += torch.sigmoid(model(**enc).logits[:, 0].float()).tolist()
    model.train(was_training)
    return scores

"""rI: the instruction reward model's score of an instruction, the sigmoid of its reward head, in [0, 1]."""

from __future__ import annotations

from typing import Any, Sequence


def irm_score(model: Any, tokenizer: Any, instructions: Sequence[str], batch_size: int = 64,
              max_length: int = 512) -> list[float]:
    """rI for each instruction: the sigmoid of the reward head, in [0, 1], batched."""
    import torch  # heavy: loaded on first use

    was_training = model.training
    model.eval()
    tokenizer.padding_side = "right"
    device = next(model.parameters()).device
    scores: list[float] = []
    with torch.no_grad():
        for i in range(0, len(instructions), batch_size):
            enc = tokenizer(list(instructions[i:i + batch_size]), return_tensors="pt", padding=True,
                            truncation=True, max_length=max_length).to(device)
            scores += torch.sigmoid(model(**enc).logits[:, 0].float()).tolist()
    model.train(was_training)
    return scores

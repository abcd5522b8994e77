"""Model loading (full weights, or base plus merged adapter), the tiny Llama, shapes, memory and the planner, batched generation."""

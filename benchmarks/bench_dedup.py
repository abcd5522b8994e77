"""Cost of the 02_dedup semantic search on 100k instruction-like texts, cold and warm cache.

    .venv/bin/python benchmarks/bench_dedup.py [--n 100000] [--threshold 0.85]

The texts: ``arith.generate_problems`` word problems plus ten templates of other problem kinds
(geometry, rates, percent, equations, ...), a third of them pushed through an "evolution" wrapper
(a constraint or an instruction appended, as Evol-Instruct does), and ~3% re-cased/re-punctuated
copies — so the set has exact copies, number swaps and template near-duplicates, like evolved data.

One run, in this order, on a fresh cache directory:

1. cold: the whole ``dedup()`` (exact layer, MiniLM embedding through the on-disk cache, blocked
   search at the threshold); embedding throughput = texts run through the model / embedding time;
2. the semantic search alone on the same vectors (timed, then again under tracemalloc for its peak);
3. warm: a new Embedder on the same cache, the whole ``dedup()`` again (must embed nothing);
4. datasketch MinHash LSH (word 3-shingles, Jaccard 0.8) on the same texts, for comparison.

Targets: search <= 20% of the embedding time; peak RSS <= 3 GB; warm rerun <= 10% of the cold run.
Embedding 100k texts with MiniLM on 2 CPU cores takes 10-15 minutes; ``--n 5000`` for a quick look.
Writes reports/bench/dedup.json and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rleif_kit.worlds.arith import problems as arith  # noqa: E402
from rleif_kit.dedup.near_duplicates import dedup, minhash_dedup, semantic_dedup  # noqa: E402
from rleif_kit.dedup.embeddings import Embedder  # noqa: E402

TARGETS = {"search_over_embed": 0.20, "peak_rss_gb": 3.0, "warm_over_cold": 0.10}
NAMES = "Ana Ben Chen Dev Eva Femi Gus Hana Ivan Jade Kofi Lena Marco Nia Omar Pia Quinn Ravi Sofia Tariq".split()
TEMPLATES = [
    "A rectangle is {a} cm long and {b} cm wide. What is its {shape_q}?",
    "{name} drives {a} km in {b} hours. At the same speed, how far does {name} drive in {c} hours?",
    "What is {p}% of {a}?",
    "Solve for x: {a}x + {b} = {c}.",
    "A recipe needs {a} cups of flour for {b} cookies. How many cups are needed for {c} cookies?",
    "{name} saves {a} dollars every week. How many weeks does it take to save {c} dollars?",
    "A tank holds {a} liters and leaks {b} liters per hour. How long until it is empty?",
    "The average of {a}, {b} and {c} is what number?",
    "{name} buys {a} notebooks at {b} dollars each and pays with a {c}-dollar bill. How much change is left?",
    "A class has {a} students and {p}% of them walk to school. How many students do not walk to school?",
]
EVOLUTIONS = [
    "{q} Explain your reasoning step by step.",
    "{q} Give the answer as a fraction in lowest terms.",
    "Without using a calculator, answer the following. {q}",
    "{q} Then check your answer by working backwards.",
    "{q} Also, state which arithmetic operations you used.",
    "Answer for a ten-year-old student: {q}",
]


def generate_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` instruction-like texts with realistic exact, number-swap and template near-duplicates."""
    rng = random.Random(seed)
    base = [r["question"] for r in arith.generate_problems(n // 2, seed=seed)]
    while len(base) < n:
        base.append(rng.choice(TEMPLATES).format(
            name=rng.choice(NAMES), a=rng.randint(2, 500), b=rng.randint(2, 60), c=rng.randint(2, 900),
            p=rng.choice([5, 10, 15, 20, 25, 40, 60, 75]), shape_q=rng.choice(["area", "perimeter", "diagonal"])))
    texts = [rng.choice(EVOLUTIONS).format(q=t) if rng.random() < 1 / 3 else t for t in base]
    for i in rng.sample(range(n), n * 3 // 100):  # exact-layer copies: re-cased, re-punctuated
        texts[i] = "  " + texts[rng.randrange(n)].upper().replace("?", " ?!")
    rng.shuffle(texts)
    return texts


class TimedEmbedder:
    """An Embedder whose ``embed`` time is summed (and shows a progress bar)."""

    def __init__(self, inner: Embedder):
        self.inner, self.seconds = inner, 0.0

    def embed(self, texts):
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts, progress=True)
        finally:
            self.seconds += time.perf_counter() - t0


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - t0


def run(n: int, threshold: float, cache_dir: Path) -> dict:
    texts = generate_texts(n)
    ids = [f"t{i:06d}" for i in range(n)]
    cache = cache_dir / "embeddings.sqlite"

    cold_emb = TimedEmbedder(Embedder(cache_path=cache))
    cold, cold_s = timed(dedup, ids, texts, cold_emb, threshold=threshold)
    embedded = [texts[i] for i in sorted(set(range(n)) - {r.index for r in cold.removals if r.layer == "exact"})]
    vectors = cold_emb.inner.embed(embedded)  # all cached now
    sub_ids = list(range(len(embedded)))
    (kept, _), search_s = timed(semantic_dedup, vectors, threshold, sub_ids)
    tracemalloc.start()
    semantic_dedup(vectors, threshold, sub_ids)
    search_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    warm_inner = Embedder(cache_path=cache)
    warm, warm_s = timed(dedup, ids, texts, warm_inner, threshold=threshold)
    assert warm.kept == cold.kept and len(kept) == len(cold.kept), "warm rerun / search alone disagree with cold run"
    (mh_kept, mh_removed), mh_s = timed(minhash_dedup, ids, texts, threshold=0.8)

    counts = cold.counts()
    return {
        "n": n, "threshold": threshold,
        "cold": {"seconds": cold_s, "embed_seconds": cold_emb.seconds, "texts_embedded": cold_emb.inner.computed,
                 "embed_texts_per_s": cold_emb.inner.computed / cold_emb.seconds, **counts},
        "search": {"seconds": search_s, "vectors": len(vectors), "dim": int(vectors.shape[1]),
                   "tracemalloc_peak_mb": search_peak / 2**20},
        "warm": {"seconds": warm_s, "computed": warm_inner.computed, "cached": warm_inner.cached},
        "minhash_lsh": {"seconds": mh_s, "removed": len(mh_removed), "kept": len(mh_kept), "jaccard": 0.8},
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,  # Linux: KiB
    }


def check(result: dict) -> dict:
    ratios = {"search_over_embed": result["search"]["seconds"] / result["cold"]["embed_seconds"],
              "peak_rss_gb": result["peak_rss_gb"],
              "warm_over_cold": result["warm"]["seconds"] / result["cold"]["seconds"]}
    return {k: {"value": v, "target": f"<= {TARGETS[k]}", "ok": v <= TARGETS[k]} for k, v in ratios.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of texts (default 100000)")
    parser.add_argument("--threshold", type=float, default=0.85)
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench" / "dedup.json"))
    args = parser.parse_args()
    import torch

    with tempfile.TemporaryDirectory(prefix="bench-dedup-") as tmp:
        result = run(args.n, args.threshold, Path(tmp))
    result["targets"] = check(result)
    result["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                         "torch_threads": torch.get_num_threads(), "platform": platform.platform()}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    c, s, w, m = result["cold"], result["search"], result["warm"], result["minhash_lsh"]
    print(f"n={args.n}: exact removed {c['exact']}, semantic removed {c['semantic']}, kept {c['kept']}")
    print(f"cold dedup {c['seconds']:.1f}s (embedding {c['embed_seconds']:.1f}s, {c['embed_texts_per_s']:.0f} texts/s)")
    print(f"search alone {s['seconds']:.2f}s over {s['vectors']} vectors, tracemalloc peak {s['tracemalloc_peak_mb']:.0f} MB")
    print(f"warm dedup {w['seconds']:.2f}s (computed {w['computed']}); minhash LSH {m['seconds']:.1f}s, removed {m['removed']}")
    for name, t in result["targets"].items():
        print(f"  {name}: {t['value']:.3f} (target {t['target']}) {'ok' if t['ok'] else 'MISSED'}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

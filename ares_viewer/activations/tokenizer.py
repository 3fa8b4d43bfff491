"""The capture's tokenizer, when it can be loaded from this machine's disk alone: never downloaded.

Where it is looked for, first found wins:

- ``metadata.json``'s ``tokenizer`` or ``tokenizer_path`` (top level, then a step's ``step_metadata``): a folder,
  relative to the capture folder or absolute (the recorder writes the model's ``tokenizer.name_or_path``);
- a ``tokenizer/`` folder beside ``metadata.json``, or the capture folder itself when it holds a
  ``tokenizer.json`` or ``tokenizer_config.json``.

A folder is loaded with ``transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)`` when
``transformers`` is installed, else its ``tokenizer.json`` with ``tokenizers.Tokenizer.from_file``; neither package
is required: without them (or without a folder) ``find`` returns None and the ids are shown as they are.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ares_viewer.base import cache

_LOGGER = logging.getLogger(__name__)
KEYS = ("tokenizer", "tokenizer_path")
FILES = ("tokenizer.json", "tokenizer_config.json")


@dataclasses.dataclass(frozen=True)
class Tokenizer:
    """A loaded tokenizer: ``decode(ids)`` gives one string per id; ``name`` says which folder and library."""

    name: str
    _decode: Callable[[list[int]], list[str]] = dataclasses.field(repr=False)
    _text: Callable[[list[int]], str] | None = dataclasses.field(default=None, repr=False)

    def decode(self, ids: Sequence[int]) -> list[str]:
        """One text per token id (special tokens kept, as the model saw them)."""
        return self._decode(list(ids))

    def text(self, ids: Sequence[int]) -> str:
        """The ids decoded together, as one text (special tokens kept; a character split across tokens whole)."""
        if self._text is None:
            return "".join(self._decode(list(ids)))
        return self._text(list(ids))


def candidates(folder: str, metadata: Mapping[str, Any], step_metadata: Sequence[Mapping[str, Any]]) -> list[str]:
    """The tokenizer folders a capture names or holds, in the order they are tried (existing folders only)."""
    named = [metadata.get(k) for k in KEYS]
    named += [m.get(k) for m in step_metadata[:1] for k in KEYS]
    found = [os.path.join(folder, n) for n in named if isinstance(n, str) and n]
    found.append(os.path.join(folder, "tokenizer"))
    if any(os.path.isfile(os.path.join(folder, f)) for f in FILES):
        found.append(folder)
    return list(dict.fromkeys(os.path.normpath(f) for f in found if os.path.isdir(f)))


def find(folder: str, metadata: Mapping[str, Any], step_metadata: Sequence[Mapping[str, Any]]) -> Tokenizer | None:
    """The first tokenizer of ``candidates`` that loads offline, or None."""
    for path in candidates(folder, metadata, step_metadata):
        loaded = load(path)
        if loaded is not None:
            return loaded
    return None


# Tokenizers loaded, by folder (a tokenizer is read from disk once, not per step).
_LOADED: cache.BoundedCache[Tokenizer | None] = cache.BoundedCache(maxsize=8)


def load(path: str) -> Tokenizer | None:
    """A tokenizer folder loaded from disk (transformers, else tokenizers), or None when neither can."""
    return _LOADED.get_or_compute(path, lambda: _load(path))


def _load(path: str) -> Tokenizer | None:
    if importlib.util.find_spec("transformers") is not None:
        try:
            import transformers

            auto = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            return Tokenizer(f"{path} (transformers)", lambda ids: list(auto.batch_decode(
                [[i] for i in ids], skip_special_tokens=False, clean_up_tokenization_spaces=False)),
                lambda ids: str(auto.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)))
        except Exception as exc:  # any failure of a third-party loader: try the next way
            _LOGGER.info("transformers cannot load the tokenizer at %s: %s", path, exc)
    single = os.path.join(path, "tokenizer.json")
    if importlib.util.find_spec("tokenizers") is not None and os.path.isfile(single):
        try:
            import tokenizers

            fast = tokenizers.Tokenizer.from_file(single)
            return Tokenizer(f"{single} (tokenizers)", lambda ids: list(fast.decode_batch(
                [[i] for i in ids], skip_special_tokens=False)),
                lambda ids: str(fast.decode(ids, skip_special_tokens=False)))
        except Exception as exc:  # as above
            _LOGGER.info("tokenizers cannot load %s: %s", single, exc)
    return None

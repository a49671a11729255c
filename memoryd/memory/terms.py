"""BM25 terms: the words of a text as BM25 matches them, in English and in Chinese.

A text becomes terms in three steps, each done by a maintained library of the ``memory``
extra, imported on first use:

1. Chinese, written without spaces, is cut into words by jieba (search mode, which also
   yields the shorter words inside a long one: ``订单号`` gives ``订单``, ``单号`` and
   ``订单号``); jieba is loaded only for a text that holds Chinese characters;
2. bm25s splits the text into words (lowercased, NFKC-normalised first), a single Chinese
   character counting as a word, and drops English stopwords;
3. PyStemmer's Snowball English stemmer reduces each word to its stem, so word forms meet
   (``prefers`` and ``prefer``, ``lives`` and ``live``); Chinese words pass unchanged.

`terms` is deterministic: the same texts always give the same terms. Without the extra
it raises an ``ImportError`` naming the missing module and ``pip install 'memoryd[memory]'``.
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
import threading
import unicodedata
from collections.abc import Sequence
from typing import Any

__all__ = ["HAN", "TOKEN_PATTERN", "terms"]

HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
"""The CJK unified ideographs (with extension A and the compatibility block)."""

TOKEN_PATTERN = rf"(?u)\b\w\w+\b|[{HAN}]"
"""A word: two or more word characters, or a single Chinese character."""

_HAN_RUN = re.compile(f"[{HAN}]+")
_local = threading.local()


def _require(module: str) -> Any:
    """Import ``module`` of the ``memory`` extra, or say which install provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"BM25 recall needs the {module!r} module of the memory extra, which is not "
            f"installed ({exc}): pip install 'memoryd[memory]'"
        ) from exc


@functools.cache
def _jieba() -> Any:
    """The jieba module, its own logger kept at WARNING (it logs its dictionary loading)."""
    jieba = _require("jieba")
    logger = logging.getLogger("jieba")
    if logger.level < logging.WARNING:
        logger.setLevel(logging.WARNING)
    return jieba


def _stemmer() -> Any:
    """This thread's Snowball English stemmer (a PyStemmer stemmer is not thread-safe)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = _require("Stemmer").Stemmer("english")
    return stemmer


def _segment(text: str) -> str:
    """``text`` with a space between the words of each run of Chinese characters."""
    if not _HAN_RUN.search(text):
        return text
    jieba = _jieba()
    return _HAN_RUN.sub(lambda run: f" {' '.join(jieba.cut_for_search(run.group(0)))} ", text)


def terms(texts: Sequence[str]) -> list[list[str]]:
    """The BM25 terms of each text, as the module docstring says.

    Args:
        texts: The texts.

    Returns:
        One list of terms per text, in text order (empty for a text of stopwords only).
    """
    bm25s = _require("bm25s")
    prepared = [_segment(unicodedata.normalize("NFKC", text)) for text in texts]
    found: list[list[str]] = bm25s.tokenize(
        prepared,
        token_pattern=TOKEN_PATTERN,
        stopwords="en",
        stemmer=_stemmer(),
        return_ids=False,
        show_progress=False,
    )
    return found

"""Tolerant JSON extraction from model replies: code fences, chatter around the object,
trailing commas, single quotes and truncated replies (repaired by ``json_repair``)."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_REPAIR_CHARS = 100_000
FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class JSONExtractionError(ValueError):
    """No JSON value could be recovered from the reply."""


def extract_json(text: str) -> Any:
    """The first JSON object (or array) in ``text``, repaired when needed; a reply nested too
    deeply to parse is a :class:`JSONExtractionError` like any other broken reply.

    Examples:
        >>> extract_json('Sure! ```json\\n{"scores": [1, 2,]}\\n``` hope it helps')
        {'scores': [1, 2]}
        >>> extract_json('{"scores": [{"id": "a", "score": 0.5}, {"id": "b", "sco')["scores"][0]
        {'id': 'a', 'score': 0.5}
    """
    if not isinstance(text, str) or not text.strip():
        raise JSONExtractionError("the reply is empty")
    try:
        return _extract(text)
    except RecursionError:
        raise JSONExtractionError("the reply's JSON is nested too deeply to read") from None
    except JSONExtractionError:
        raise
    except ValueError as err:  # int() refuses numbers over 4,300 digits with a plain ValueError
        raise JSONExtractionError(f"the reply's JSON cannot be read: {str(err)[:120]}") from None


def _extract(text: str) -> Any:
    candidates = [m.group(1) for m in FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for start, char in enumerate(candidate):
            if char in "{[":
                try:
                    value, _ = decoder.raw_decode(candidate, start)
                    return value
                except json.JSONDecodeError:
                    break  # the first opening bracket is the one to repair
    from json_repair import repair_json

    for candidate in candidates:
        start = min((i for i in (candidate.find("{"), candidate.find("[")) if i >= 0), default=-1)
        if start < 0:
            continue
        try:  # json_repair is pure Python: a multi-megabyte reply is cut to what a judge would write
            repaired = repair_json(candidate[start:start + MAX_REPAIR_CHARS], return_objects=True)
        except ValueError:  # json_repair's own "nesting exceeds the parser recursion depth"
            continue
        if isinstance(repaired, (dict, list)) and repaired:
            return repaired
    raise JSONExtractionError(f"no JSON object found in the reply: {text[:200]!r}")

"""What UTF-8 can hold: text with a lone UTF-16 surrogate cannot be recorded, stored in SQLite or
sent over a socket, so an action that has one is refused before it is applied."""

from __future__ import annotations

import json
import re


#: a UTF-16 surrogate on its own: Python strings can hold one, UTF-8 (JSON, SQLite, a socket) cannot
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def unrepresentable(text: str) -> str | None:
    """Why ``text`` cannot be recorded or sent as UTF-8 (a lone surrogate), or None.

    Examples:
        >>> unrepresentable("fine"), unrepresentable("x" + chr(0xD800))
        (None, 'a lone surrogate (U+D800) at character 1: not valid Unicode text')
    """
    found = LONE_SURROGATE.search(text)
    return None if found is None else (f"a lone surrogate (U+{ord(found.group()):04X}) at character {found.start()}: "
                                        "not valid Unicode text")


def utf8_bytes(text: str) -> int:
    """What ``text`` weighs as UTF-8 on the wire (a lone surrogate counted as its 3 bytes, not an error):
    what a server's message limit counts."""
    return len(text.encode("utf-8", "surrogatepass"))


def calls_unrepresentable(raw_calls: list) -> str | None:
    """:func:`unrepresentable` over the strings in a reply's tool calls (other faults, such as a
    number JSON cannot hold, are the call decoder's to report)."""
    try:
        return unrepresentable(json.dumps(raw_calls, ensure_ascii=False, default=repr))
    except (ValueError, TypeError, RecursionError):
        return None

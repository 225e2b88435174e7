"""Rubric items whose truth a program decides, a simulated verifier of known accuracy over them,
and a reference teacher that writes such items: the pieces that let RLCER's pipeline be trained
and measured apart from the quality of an LLM verifier.

A **checkable item** quotes the text a response must contain: ``The response contains
"\\boxed{6}"`` is true when the response holds that text (whitespace collapsed; a quoted text
that begins or ends with a letter or digit must not continue a longer word or number there, so
``"6"`` is not found in ``16`` or ``6.5``). Any description with exactly one double-quoted text
and one of the verbs *contains*, *includes*, *writes*, *states* or *mentions* is checkable;
other items are not (a program cannot decide "checks the result").

Examples:
    >>> item_truth('The response contains "5 + 1 = 6"', "We add: 5 + 1  = 6, so \\\\boxed{6}.")
    True
    >>> item_truth('The response contains "6"', "It is 16.")
    False
    >>> item_truth("The response checks its result", "6") is None
    True
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Sequence

from rubricgym.judges.oracle import PREFIX

_QUOTED = re.compile(r'"((?:[^"\\]|\\.)+)"')
_VERBS = re.compile(r"\b(contains|includes|writes|states|mentions)\b", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
#: an arithmetic expression in a problem (numbers joined by + - * / x or ×), the teacher's "working" item
_EXPRESSION = re.compile(r"-?\d+(?:\.\d+)?(?:\s*[-+*/×x]\s*-?\d+(?:\.\d+)?)+")


def quoted_text(description: str) -> str | None:
    """The text a checkable item asks for, or None when the item is not checkable."""
    quoted = _QUOTED.findall(description)
    if len(quoted) != 1 or not _VERBS.search(description):
        return None
    text = _SPACES.sub(" ", quoted[0].replace('\\"', '"')).strip()
    return text or None


def contains_text(response: str, text: str) -> bool:
    """Whether ``response`` holds ``text`` (whitespace collapsed), not as part of a longer word or number."""
    response = _SPACES.sub(" ", response)
    before = r"(?<![\w.])" if text[0].isalnum() else ""
    after = r"(?![\w]|\.\d)" if text[-1].isalnum() else ""
    return re.search(before + re.escape(text) + after, response) is not None


def item_truth(description: str, response: str) -> bool | None:
    """True / False for a checkable item (see the module docstring), None for any other item."""
    text = quoted_text(description)
    return None if text is None else contains_text(response, text)


@dataclass(frozen=True)
class OracleVerifier:
    """A simulated RLCER verifier (``verifier="oracle:<accuracy>"``): each checkable item's verdict
    is the program's truth, flipped with probability ``1 - accuracy`` (reproducibly: the flip is
    drawn from a hash of the item and the response); items a program cannot decide get no verdict
    (left out of the item's correlation, as a failed check is). ``accuracy`` is per verdict, not
    pairwise as for :class:`~rubricgym.judges.oracle.OracleJudge`. It makes no calls and costs nothing.

    Examples:
        >>> verifier = OracleVerifier.parse("oracle:1.0")
        >>> verifier.verdicts(['It contains "7"', "It is elegant"], "3 + 4 = 7")
        [True, None]
    """

    accuracy: float

    def __post_init__(self):
        if not 0.5 <= self.accuracy <= 1.0:
            raise ValueError(f"an oracle verifier's accuracy must be in [0.5, 1], got {self.accuracy}")

    @classmethod
    def parse(cls, text: str) -> "OracleVerifier":
        try:
            return cls(float(text.removeprefix(PREFIX)))
        except ValueError:
            raise ValueError(f"an oracle verifier is 'oracle:<accuracy per verdict>', got {text!r}") from None

    @property
    def name(self) -> str:
        return f"oracle:{self.accuracy:g} (simulated verifier)"

    def verdicts(self, descriptions: Sequence[str], response: str) -> list[bool | None]:
        out: list[bool | None] = []
        for description in descriptions:
            truth = item_truth(description, response)
            if truth is not None and self.accuracy < 1.0:
                digest = hashlib.sha256(f"{self.accuracy}|{description}|{response}".encode("utf-8", "surrogatepass")).digest()
                if int.from_bytes(digest[:8], "big") / 2**64 >= self.accuracy:
                    truth = not truth
            out.append(truth)
        return out


def problem_expression(problem: str) -> str | None:
    """The longest arithmetic expression in a problem's text (``"5 + 1"`` of "What is 5 + 1?"), or None."""
    found = [m.group(0).strip() for m in _EXPRESSION.finditer(problem)]
    return max(found, key=len) if found else None


def reference_rubric(problem: str, reference: str, answer_format: str = "\\boxed{{{}}}") -> list[dict[str, float | str]]:
    """The reference teacher's rubric: checkable items that separate right responses from wrong
    ones, written from the reference answer and the task's structure (the problem's expression):
    the final answer in the family's answer format (+3), the working "expression = reference"
    (+2, when the problem has an expression) and the reference anywhere (+1).

    Examples:
        >>> [item["description"] for item in reference_rubric("What is 5 + 1?", "6")]
        ['The response contains "\\\\boxed{6}"', 'The response contains "5 + 1 = 6"', 'The response contains "6"']
    """
    reference = _SPACES.sub(" ", str(reference)).strip()
    items: list[dict[str, float | str]] = [{"description": f'The response contains "{answer_format.format(reference)}"', "score": 3}]
    expression = problem_expression(problem)
    if expression:
        items.append({"description": f'The response contains "{expression} = {reference}"', "score": 2})
    items.append({"description": f'The response contains "{reference}"', "score": 1})
    return items

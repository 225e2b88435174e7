"""Answer extraction and equivalence checking for math answers.

Extraction: the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced braces; if there is
none, the documented fallback is the last number in the reply (``fallback="last_number"``) or
nothing (``fallback="none"``). Which rule fired is reported as ``extraction`` =
``"boxed" | "last_number" | "none"``.

Equivalence: exact string match after light normalisation, then an exact rational comparison
when both sides are plain numbers (fast and exact), then math-verify for everything else.
math-verify's own timeouts use ``signal.alarm``, which only works on the main thread; off the
main thread (threads, some vector-env workers) the check runs in a worker process that is
killed at the time limit, so a step can never hang.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from fractions import Fraction
import threading
from collections import OrderedDict

from rubricgym.timeouts import CPUTimeExceeded, WorkerTimeout, shared_worker

# math-verify logs every timeout with the whole input (megabytes for hostile replies); the
# outcome is already reported as "not equivalent", so keep its warnings out of the logs.
logging.getLogger("math_verify").setLevel(logging.ERROR)

BOXED_COMMANDS = ("\\boxed", "\\fbox")
BOXED_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
NUMBER_PATTERN = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")
PLAIN_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?$")
THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
#: Longer extracted answers are not sent to math-verify (no reference answer is this long).
MAX_ANSWER_CHARS = 2_000


@dataclass(frozen=True)
class Extraction:
    """The answer taken from a reply, and which rule found it."""

    answer: str | None
    method: str  # "boxed", "last_number" or "none"


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` in ``text`` (balanced braces).

    Linear time: every brace is matched in one pass, so thousands of unclosed ``\\boxed{``
    cost no more than reading them once.

    Examples:
        >>> last_boxed(r"so \\boxed{\\frac{1}{2}} and finally \\boxed{\\{1, 2\\}}")
        '\\\\{1, 2\\\\}'
    """
    closing: dict[int, int] = {}
    open_braces: list[int] = []
    previous = ""
    for i, char in enumerate(text):
        if previous != "\\":  # an escaped brace is text, not a group
            if char == "{":
                open_braces.append(i)
            elif char == "}" and open_braces:
                closing[open_braces.pop()] = i
        previous = char
    for match in reversed(list(BOXED_OPEN.finditer(text))):  # an unbalanced one: look further left
        brace = match.end() - 1
        if brace in closing:
            return text[brace + 1 : closing[brace]].strip()
    return None


def extract_answer(text: str, fallback: str = "last_number") -> Extraction:
    """Take the final answer out of a reply.

    Examples:
        >>> extract_answer(r"7 + 5 = 12, so \\boxed{12}")
        Extraction(answer='12', method='boxed')
        >>> extract_answer("I think it is 12.")
        Extraction(answer='12', method='last_number')
    """
    boxed = last_boxed(text)
    if boxed is not None:
        return Extraction(boxed, "boxed")
    if fallback == "last_number":
        numbers = NUMBER_PATTERN.findall(text)
        if numbers:
            return Extraction(numbers[-1].rstrip(".,"), "last_number")
    elif fallback != "none":
        raise ValueError(f"fallback must be 'last_number' or 'none', got {fallback!r}")
    return Extraction(None, "none")


#: a multiple-choice label before the answer, as AMC solutions write it: "\\textbf{(C) }70"
PERCENT = re.compile(r"\\?%$")
CHOICE_LABEL = re.compile(r"^\\(?:textbf|text|mathrm|mathbf)\{\s*\(?[A-E]\)\s*\}\s*")
TEXT_COMMAND = re.compile(r"\\text\{([^{}]*)\}")


def _normalise(answer: str) -> str:
    answer = answer.strip().strip("$").strip()
    answer = CHOICE_LABEL.sub("", answer)
    # one scan to the closing brace, stripped after: "\\s*([^{}]*?)\\s*" backtracks cubically on spaces
    answer = TEXT_COMMAND.sub(lambda match: match.group(1).strip(), answer)
    answer = re.sub(r"\\(?:left|right|displaystyle|!|,|;|:)", "", answer)
    answer = answer.replace("dfrac", "frac").replace("tfrac", "frac")
    answer = re.sub(r"\s+", "", answer).rstrip(".")
    if THOUSANDS.match(answer):
        answer = answer.replace(",", "")
    return answer.lower()


def _as_fraction(answer: str) -> Fraction | None:
    if PLAIN_NUMBER.match(answer):
        try:
            return Fraction(answer)
        except (ValueError, ZeroDivisionError):
            return None
    return None


def _math_verify(gold: str, predicted: str, timeout_s: int | None) -> bool:
    """math-verify's verdict; its timeout surfaces as ``math_verify.errors.TimeoutException`` (a
    ``BaseException``), other errors as exceptions (not equivalent)."""
    from math_verify import parse, verify

    gold_parsed = parse("\\boxed{" + gold + "}", parsing_timeout=timeout_s, raise_on_error=True)
    predicted_parsed = parse("\\boxed{" + predicted + "}", parsing_timeout=timeout_s, raise_on_error=True)
    if not gold_parsed or not predicted_parsed:
        return False
    return bool(verify(gold_parsed, predicted_parsed, timeout_seconds=timeout_s, raise_on_error=True))


def _math_verify_unbounded(gold: str, predicted: str) -> bool:
    """Worker-process entry: math-verify with its signal timeouts off (the worker is killed)."""
    try:
        return _math_verify(gold, predicted, None)
    except Exception:  # a parser error: not equivalent
        return False


def _import_math_verify() -> None:
    """The worker's preparation: importing math-verify (and sympy) takes seconds under load, which
    must not count against a check's time limit."""
    import math_verify  # noqa: F401


class Undecided(Exception):
    """The check ran out of time: no verdict, so nothing is cached."""


WALL_BACKSTOP_S = 60.0
"""Wall-clock limit on one check, only as the backstop for a machine too loaded to give the check
its CPU budget (the worker is killed): the verdict itself rests on CPU time."""


def answer_verdict(gold: str, predicted: str, timeout_s: float = 3.0) -> bool | None:
    """Whether ``predicted`` is mathematically equivalent to ``gold``: True, False, or None when
    *undecided*. ``timeout_s`` is a budget of CPU time, not wall time, so a loaded machine gets the
    same verdicts as an idle one, only later; a check that uses up its budget (or, past the
    :data:`WALL_BACKSTOP_S` backstop, cannot get it) is undecided, never wrong. Only decided verdicts
    are cached; callers record None as its own outcome (the math env: a neutral reward, counted).

    Examples:
        >>> answer_verdict("\\\\frac{1}{2}", "0.5"), answer_verdict("204", "205")
        (True, False)
    """
    try:
        return _cached_decide(gold, predicted, timeout_s)
    except Undecided:
        return None


def answers_match(gold: str, predicted: str, timeout_s: float = 3.0) -> bool:
    """:func:`answer_verdict` as a bool for callers that need one (an undecided check is not a
    match); code that scores rewards uses :func:`answer_verdict` and keeps the undecided case apart.

    Examples:
        >>> answers_match("\\\\frac{1}{2}", "0.5"), answers_match("204", "205")
        (True, False)
    """
    return answer_verdict(gold, predicted, timeout_s) is True


VERDICT_CACHE_CHARS = 8_000_000
"""Characters of (gold, answer) pairs the verdict cache keeps (about 8-16 MB of keys, whatever the answers)."""


class VerdictCache:
    """Least-recently-used verdicts, bounded by the characters of their keys, not their count: a
    cache of 65,536 whole answers held GBs when a client sent long ones. Answers longer than
    :data:`MAX_ANSWER_CHARS` are decided without being kept. Thread-safe; the check itself runs
    outside the lock.

    Examples:
        >>> cache = VerdictCache(max_chars=10)
        >>> cache.put(("1", "1", 3.0), True); cache.put(("2", "22", 3.0), False); cache.get(("1", "1", 3.0))
        True
        >>> cache.put(("3", "3333333", 3.0), True)  # 12 characters with the others: the oldest goes
        >>> cache.get(("2", "22", 3.0)), cache.chars
        (None, 10)
    """

    def __init__(self, max_chars: int = VERDICT_CACHE_CHARS) -> None:
        self.max_chars, self.chars = max_chars, 0
        self._entries: OrderedDict[tuple[str, str, float], bool] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def size(key: tuple[str, str, float]) -> int:
        return len(key[0]) + len(key[1])

    def get(self, key: tuple[str, str, float]) -> bool | None:
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: tuple[str, str, float], verdict: bool) -> None:
        if self.size(key) > self.max_chars:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = verdict
            self.chars += self.size(key)
            while self.chars > self.max_chars:
                old, _ = self._entries.popitem(last=False)
                self.chars -= self.size(old)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.chars = 0


VERDICTS = VerdictCache()


def _cached_decide(gold: str, predicted: str, timeout_s: float) -> bool:
    """:func:`_decide` through :data:`VERDICTS` (an undecided check raises and is never kept)."""
    if len(predicted) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
        return _decide(gold, predicted, timeout_s)  # decided (cheaply, see _decide) but never kept
    key = (gold, predicted, float(timeout_s))
    verdict = VERDICTS.get(key)
    if verdict is None:
        verdict = _decide(gold, predicted, timeout_s)
        VERDICTS.put(key, verdict)
    return verdict


def _decide(gold: str, predicted: str, timeout_s: float) -> bool:
    gold_norm, predicted_norm = _normalise(gold), _normalise(predicted)
    if PERCENT.sub("", gold_norm) == PERCENT.sub("", predicted_norm):  # "-1\\%" answers "-1" (and "-1%")
        return True
    gold_number, predicted_number = _as_fraction(gold_norm), _as_fraction(predicted_norm)
    if gold_number is not None and predicted_number is not None:
        return gold_number == predicted_number
    # "50\\%" answers 0.5 and the reverse, decided here: math-verify's LaTeX parser reads "50\\%" as 50
    # under the antlr 4.9 runtime that verl's hydra pins, as 1/2 under antlr 4.13
    for percent, number in ((gold_norm, predicted_number), (predicted_norm, gold_number)):
        value = _as_fraction(PERCENT.sub("", percent)) if PERCENT.search(percent) else None
        if value is not None and number is not None and value / 100 == number:
            return True
    if len(predicted) > MAX_ANSWER_CHARS:
        return False
    # always in the worker process: its CPU-time budget is load-independent (math-verify's own
    # signal timeouts count wall time, and work only on the main thread)
    try:
        return shared_worker().call(_math_verify_unbounded, (gold, predicted), timeout=max(WALL_BACKSTOP_S, 20 * timeout_s),
                                    prepare=_import_math_verify, cpu_s=timeout_s)
    except (WorkerTimeout, CPUTimeExceeded):
        raise Undecided from None
    except Exception:
        return False


def math_correct(answer_column: str = "answer"):
    """A ``correct(reply, **row)`` check for judged reward functions (e.g. TRL's ``rubric_reward``):
    the reply's boxed (else last) number equals the row's ``answer_column``."""

    def correct(reply: str, **row) -> bool:
        extraction = extract_answer(reply, "last_number")
        return bool(extraction.answer is not None and answers_match(str(row[answer_column]), extraction.answer))
    return correct

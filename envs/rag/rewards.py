"""Independent reward components for support answers, each in [0, 1].

* ``f1``: token F1 against the reference answer (SQuAD normalisation; citations removed).
* ``citation``: F1 between the article ids the answer cites and the supporting ids; for an
  unanswerable question, 1 when it cites nothing, else 0.
* ``refusal``: 1 when the answer refuses exactly when it should (unanswerable question), else 0.
* ``grounded``: share of the answer's checkable facts (numbers, durations, emails, phone
  numbers) found in the retrieved articles; 1 when it states none. The unsupported facts are
  reported, so an invented "90 days" or phone number is named, not just scored.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterable, Sequence

# (?<![\w.+-]): an address starts where a run of its characters starts (else quadratic on long words)
EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
PHONE = re.compile(r"(?<![\w-])(?:\+?\d{1,3}[-\s.]?)?(?:\(?\d{3,4}\)?[-\s.]?)(?:\d{3}[-\s.]?\d{3,4}|[A-Z]{4,7})(?![\w-])")
# (?<![\d.]): a match starts only where a number starts, so a 3,000-digit number costs one
# backtracking pass, not one per digit (quadratic)
DURATION = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[\s-]*(?:business[\s-]+)?(day|week|month|year|hour|minute)s?\b", re.I)
# "50,000" is fifty thousand (thousands separators); "4,5" a decimal comma
NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)(?![\w])")
THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
# "section 4.2", "article 3": a reference to a place in a document, not a fact to check
REFERENCE = re.compile(r"\b(?:sections?|§|articles?|chapters?|clauses?|steps?|parts?|pages?|paragraphs?)\s*\d+(?:\.\d+)*", re.I)
CITATION = re.compile(r"\[([A-Za-z0-9_.:<>\-]+(?:\s*,\s*[A-Za-z0-9_.:<>\-]+)*)\]")
# A refusal speaks of the sources or of the speaker's own inability ("the knowledge base does not
# cover this", "I do not have that information"); a factual negative about the subject ("water
# damage is not covered by the warranty") is an answer, not a refusal.
SOURCE = (r"(?:knowledge[\s-]?base|articles?|documents?|context|help (?:pages|center)|sources?"
          r"|information (?:I have|available|provided|given|here))")
REFUSAL = re.compile(
    rf"(?:{SOURCE}[^.?!]{{0,40}}?\b(?:does|do|did)(?:n'?t| not) (?:say|cover|mention|include|contain|specify|address|explain|answer)"
    rf"|\bnot (?:covered|mentioned|included|found|addressed|specified|available|described) (?:in|by) (?:the |our |any |these |those )?{SOURCE}"
    r"|\bI (?:do not|don'?t|cannot|can'?t|could not|couldn'?t|am unable to|am not able to|was unable to|have no) "
    r"(?:have|find|see|answer|help|say|know|tell|provide|locate|information|details)\b"
    r"|\bI'?m (?:not sure|unable|not able)|\bI am (?:not sure|unable|not able)"
    r"|\b(?:there is|there's|with) no (?:information|article|mention|details?)\b|^no information\b"
    r"|\bno (?:information|article|mention|details?) (?:about|on|regarding|of|for|in)\b"
    r"|\bunable to (?:find|answer|help|locate)|\b(?:cannot|can'?t) (?:find|answer|locate)\b)", re.I)


def normalize_answer(text: str) -> list[str]:
    text = CITATION.sub(" ", text.lower())
    text = "".join(" " if ch in string.punctuation else ch for ch in text)
    return [t for t in text.split() if t not in ("a", "an", "the")]


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD-style token F1.

    Examples:
        >>> round(token_f1("Refunds within 30 days", "You get refunds within 30 days of purchase"), 3)
        0.667
    """
    pred, ref = normalize_answer(prediction), normalize_answer(reference)
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def cited_ids(text: str, known_ids: Iterable[str]) -> set[str]:
    """Known article ids that the answer cites (in brackets, or named in the text)."""
    known = set(known_ids)
    found = set()
    for group in CITATION.findall(text):
        for item in group.split(","):
            if item.strip() in known:
                found.add(item.strip())
    for article_id in known:
        if len(article_id) >= 4 and re.search(rf"(?<![\w-]){re.escape(article_id)}(?![\w-])", text):
            found.add(article_id)
    return found


def citation_score(text: str, supporting: Sequence[str], known_ids: Iterable[str], answerable: bool) -> float:
    cited = cited_ids(text, known_ids)
    if not answerable or not supporting:
        return 1.0 if not cited else 0.0
    hits = len(cited & set(supporting))
    if hits == 0:
        return 0.0
    precision, recall = hits / len(cited), hits / len(set(supporting))
    return 2 * precision * recall / (precision + recall)


def is_refusal(text: str) -> bool:
    return bool(REFUSAL.search(text))


def refusal_score(text: str, answerable: bool) -> float:
    return 1.0 if is_refusal(text) != answerable else 0.0


def extract_facts(text: str) -> list[str]:
    """Checkable facts: emails, phone numbers, durations ('30 day'), other numbers."""
    text = REFERENCE.sub(" ", CITATION.sub(" ", text))
    facts = []
    for pattern, kind in ((EMAIL, "email"), (PHONE, "phone")):
        for match in pattern.finditer(text):
            facts.append(f"{kind}:{match.group(0).strip().lower()}")
        text = pattern.sub(" ", text)
    for match in DURATION.finditer(text):
        facts.append(f"duration:{float(match.group(1)):g} {match.group(2).lower()}")
    text = DURATION.sub(" ", text)
    for match in NUMBER.finditer(text):
        number = match.group(0)
        number = number.replace(",", "") if THOUSANDS.match(number) else number.replace(",", ".")
        facts.append(f"number:{float(number):g}")
    return facts


def unsupported_facts(answer: str, sources: Sequence[str]) -> list[str]:
    """Facts of the answer that appear in none of the sources.

    Examples:
        >>> unsupported_facts("Store credit for 90 days; call 1-800-REFUND.", ["Refunds within 30 days."])
        ['phone:1-800-refund', 'duration:90 day']
    """
    source_facts = set()
    for source in sources:
        source_facts.update(extract_facts(source))
    source_numbers = {f.split(":", 1)[1].split()[0] for f in source_facts if f.startswith(("duration:", "number:"))}
    missing = []
    for fact in extract_facts(answer):
        if fact in source_facts:
            continue
        if fact.startswith("number:") and fact.split(":", 1)[1] in source_numbers:
            continue  # "30" stated bare while the source says "30 days"
        missing.append(fact)
    return missing


def grounded_score(answer: str, sources: Sequence[str]) -> tuple[float, list[str]]:
    facts = extract_facts(answer)
    if not facts:
        return 1.0, []
    missing = unsupported_facts(answer, sources)
    return 1.0 - len(missing) / len(facts), missing

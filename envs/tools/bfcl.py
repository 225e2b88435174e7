"""BFCL-style AST checking of function calls (re-implemented for this project).

A call is correct when its function name matches and every argument equals one of the
acceptable values of the ground truth after type coercion: ints are accepted for floats,
strings are compared after BFCL-like normalisation (case, spaces and ``,./-_*^`` removed),
lists element by element, dicts key by key. An acceptable value ``""`` means the argument may
be left out. Unknown arguments and missing required arguments are errors. Parallel calls match
in any order (one-to-one); irrelevance rows are correct only when no function is called, relevance
rows (no ground truth, category ``*relevance`` but not ``irrelevance``) only when one is.
"""

from __future__ import annotations

import re
from fractions import Fraction
from itertools import permutations
from typing import Any, Sequence

Call = tuple[str, dict[str, Any]]

STRING_NOISE = re.compile(r"[ ,./\-_*^]")


def normalise_string(value: str) -> str:
    return STRING_NOISE.sub("", value).lower().replace("'", '"')


def values_equal(value: Any, expected: Any, param_type: str | None = None) -> bool:
    """Whether ``value`` matches one acceptable ``expected`` value (with BFCL's coercions)."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if isinstance(expected, (int, float)) and isinstance(value, (int, float)):
        if param_type in ("integer", "int") and isinstance(value, float):
            return False  # BFCL's checker wants an int here: 3.0 is the wrong type, as in BFCL
        try:  # exact for integers of any size (float() overflows past 10^308)
            return Fraction(value) == Fraction(expected)
        except (ValueError, OverflowError):  # nan and inf
            return float(value) == float(expected)
    if isinstance(expected, str) and isinstance(value, str):
        return normalise_string(value) == normalise_string(expected)
    if isinstance(expected, str) and isinstance(value, (int, float)) and param_type in ("any", "String", "string", None):
        return normalise_string(str(value)) == normalise_string(expected)
    if isinstance(expected, list) and isinstance(value, (list, tuple)):
        return len(value) == len(expected) and all(values_equal(v, e) for v, e in zip(value, expected))
    if isinstance(expected, dict) and isinstance(value, dict):
        # nested ground truth: each key lists its acceptable values ("" = may be left out)
        if set(value) - set(expected):
            return False
        for key, options in expected.items():
            options = options if isinstance(options, list) else [options]
            if key not in value:
                if "" not in options:
                    return False
            elif not any(values_equal(value[key], option) for option in options if option != ""):
                return False
        return True
    return value == expected


def _param_types(function: dict[str, Any]) -> tuple[dict[str, str], set[str]]:
    parameters = function.get("parameters", {}) or {}
    props = parameters.get("properties", {}) or {}
    return {k: (v or {}).get("type") for k, v in props.items()}, set(parameters.get("required", []) or [])


def check_call(call: Call, expected: dict[str, dict[str, list]], functions: dict[str, dict[str, Any]]) -> str | None:
    """None when ``call`` matches the single expected call, else the reason."""
    (expected_name, expected_args), = expected.items()
    name, args = call
    if name != expected_name:
        return f"called {name!r}, expected {expected_name!r}"
    types, required = _param_types(functions.get(name, {}))
    for key in args:
        if key not in expected_args:
            return f"unexpected argument {key!r}"
    for key, acceptable in expected_args.items():
        if key not in args:
            if "" in acceptable or (key not in required and not acceptable):
                continue
            return f"missing argument {key!r}"
        if acceptable == []:  # the only acceptable value is an empty list
            if args[key] != []:
                return f"argument {key!r}={args[key]!r}, expected []"
            continue
        if not any(values_equal(args[key], option, types.get(key)) for option in acceptable if option != ""):
            return f"argument {key!r}={args[key]!r} not in {acceptable!r}"
    missing_required = required - set(args)
    for key in missing_required:
        if key in expected_args and "" not in expected_args[key]:
            return f"missing required argument {key!r}"
    return None


def is_relevance(category: str | None) -> bool:
    """BFCL's relevance rows (``live_relevance``): no ground truth, but at least one call is right."""
    return bool(category) and "relevance" in category and "irrelevance" not in category


def check_calls(calls: Sequence[Call], ground_truth: Sequence[dict[str, dict[str, list]]] | None,
                functions: Sequence[dict[str, Any]], category: str | None = None) -> tuple[bool, str]:
    """BFCL AST check of all calls of one row: ``(correct, reason)``.

    Rows without ground truth are irrelevance rows (the right answer calls nothing) unless their
    category is a relevance one, where BFCL requires at least one call of a listed function.
    """
    by_name = {f["name"]: f for f in functions}
    if not ground_truth and is_relevance(category):
        unknown = [name for name, _ in calls if name not in by_name]
        if not calls or unknown:
            return False, "expected at least one call of a listed function" + (f", got {unknown}" if unknown else "")
        return True, "ok"
    if not ground_truth:  # irrelevance: the right answer calls nothing
        return (not calls), ("ok" if not calls else f"expected no call, got {len(calls)}")
    if len(calls) != len(ground_truth):
        return False, f"expected {len(ground_truth)} call(s), got {len(calls)}"
    if len(calls) <= 6:
        last = ""
        for order in permutations(range(len(calls))):
            reasons = [check_call(calls[i], expected, by_name) for i, expected in zip(order, ground_truth)]
            if all(r is None for r in reasons):
                return True, "ok"
            last = next(r for r in reasons if r is not None)
        return False, last
    # many calls: greedy one-to-one matching
    unused = list(range(len(calls)))
    for expected in ground_truth:
        match = next((i for i in unused if check_call(calls[i], expected, by_name) is None), None)
        if match is None:
            return False, f"no call matches {next(iter(expected))!r}"
        unused.remove(match)
    return True, "ok"


def _concrete(value: Any) -> Any:
    """A ground-truth value with nested acceptable-value lists resolved to their first option."""
    if isinstance(value, dict):
        return _first_options(value)
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    return value


def _first_options(args: dict[str, Any]) -> dict[str, Any]:
    chosen = {}
    for key, acceptable in args.items():
        if acceptable == []:  # BFCL writes an empty list value as no options at all
            chosen[key] = []
            continue
        options = [o for o in (acceptable if isinstance(acceptable, list) else [acceptable]) if o != ""]
        if options:
            chosen[key] = _concrete(options[0])
    return chosen


def truth_calls(ground_truth: Sequence[dict[str, dict[str, list]]]) -> list[Call]:
    """The ground truth written as calls: the first acceptable value of each argument ("" = left out)."""
    return [(name, _first_options(args)) for expected in ground_truth for name, args in expected.items()]


def to_openai_schema(function: dict[str, Any]) -> dict[str, Any]:
    """BFCL's schema dialect ('dict', 'float', 'String', 'any') as an OpenAI tool schema."""
    mapping = {"dict": "object", "float": "number", "integer": "integer", "int": "integer", "boolean": "boolean",
               "Boolean": "boolean", "String": "string", "string": "string", "array": "array", "tuple": "array",
               "list": "array", "any": "string", "HashMap": "object", "Array": "array", "long": "integer",
               "double": "number", "char": "string", "Bigint": "integer", "object": "object", "number": "number"}

    def convert(schema: Any) -> Any:
        if isinstance(schema, dict):
            out = {k: convert(v) for k, v in schema.items() if k != "optional"}
            if isinstance(schema.get("type"), str):
                out["type"] = mapping.get(schema["type"], "string")
            return out
        if isinstance(schema, list):
            return [convert(x) for x in schema]
        return schema

    return {"type": "function", "function": {"name": function["name"], "description": function.get("description", ""),
                                             "parameters": convert(function.get("parameters", {"type": "object"}))}}


def mutations(calls: list[Call], functions: Sequence[dict[str, Any]], ground_truth) -> dict[str, list[Call]]:
    """Wrong variants of the truth calls: another function, a changed value, a missing required
    argument, an extra call (used to check that the scorer rejects them)."""
    out: dict[str, list[Call]] = {}
    name, args = calls[0]
    others = [f["name"] for f in functions if f["name"] != name]
    out["other_function"] = [(others[0] if others else name + "_other", dict(args))] + calls[1:]
    for key, value in args.items():
        acceptable = next(iter(ground_truth[0].values()))[key]
        changed = _change(value)
        if not any(values_equal(changed, option) for option in acceptable if option != ""):
            out["changed_value"] = [(name, {**args, key: changed})] + calls[1:]
            break
    _, required = _param_types(next((f for f in functions if f["name"] == name), {}))
    expected_args = next(iter(ground_truth[0].values()))
    for key in args:
        if key in required and "" not in expected_args.get(key, []):
            out["missing_required"] = [(name, {k: v for k, v in args.items() if k != key})] + calls[1:]
            break
    out["extra_call"] = calls + [calls[0]]
    return out


def _change(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 7
    if isinstance(value, str):
        return value + " changed"
    if isinstance(value, list):
        return value + [value[0]] if value else ["extra"]
    if isinstance(value, dict):
        return {**value, "extra_key": 1}
    return "changed"


_GORILLA = ("https://raw.githubusercontent.com/ShishirPatil/gorilla/6ea57973c7a6097fd7c5915698c54c17c5b1b6c8/"
            "berkeley-function-call-leaderboard/bfcl_eval/data")
#: the single-turn BFCL v4 categories ``FunctionCall-v0`` reads (``rubricgym data fetch bfcl_<category>``)
CATEGORIES = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
              "irrelevance", "live_simple")
#: questions in each category's upstream file (a download with fewer was cut)
CATEGORY_ROWS = {"simple_python": 400, "simple_java": 100, "simple_javascript": 50, "multiple": 200, "parallel": 200,
                 "parallel_multiple": 200, "irrelevance": 240, "live_simple": 258}


def upstream_urls(category: str) -> tuple[str, ...]:
    """The question file and, where BFCL has one, its possible-answer file."""
    question = f"{_GORILLA}/BFCL_v4_{category}.json"
    return (question,) if category == "irrelevance" else (question, f"{_GORILLA}/possible_answer/BFCL_v4_{category}.json")


def rows_from_upstream(category: str, contents: list[bytes]) -> list[dict[str, Any]]:
    """BFCL's question rows merged by id with its possible answers (``ground_truth``), plus
    ``category``: the layout of ../shared/data/bfcl_v4."""
    from rubricgym.data import read_jsonl_or_json

    answers = {row["id"]: row["ground_truth"] for row in read_jsonl_or_json(contents[1])} if len(contents) > 1 else {}
    rows = []
    for row in read_jsonl_or_json(contents[0]):
        row = {**row, "category": category}
        if row["id"] in answers:
            row["ground_truth"] = answers[row["id"]]
        rows.append(row)
    return rows

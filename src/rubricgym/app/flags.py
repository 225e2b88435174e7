"""Command-line flags generated from config dataclasses, so a knob is declared once.

Every field of a simple type (``int``, ``float``, ``str``, ``bool``, a ``Literal``, ``X | None``,
``tuple[X, ...]`` as a comma-separated list, ``dict[str, Any]`` as a JSON object) becomes ``--<prefix><name-with-dashes>`` with the
field's default and its docstring as help (use ``argparse.ArgumentDefaultsHelpFormatter`` to show
the defaults); other fields are left to the command.

Examples:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Knobs:
    ...     steps: int = 3
    ...     '''Training steps.'''
    >>> parser = argparse.ArgumentParser()
    >>> names = add_config_flags(parser, Knobs)
    >>> config_from_args(Knobs, parser.parse_args(["--steps", "5"]), names)
    Knobs(steps=5)
"""

from __future__ import annotations

import argparse
import ast
import inspect
import textwrap
import typing
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass and its bases (the string after the field)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def json_object(text: str) -> dict[str, Any]:
    """A flag's JSON object (``--env-kwargs '{"levels": [1]}'``), refused by argparse otherwise."""
    import json

    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object ({{...}}), got {type(value).__name__}: {text!r}")
    return value


def _parser_for(tp: Any) -> tuple[Any, dict[str, Any]] | None:
    """``(type callable, extra add_argument kwargs)`` for a field type, or None if not a flag."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or str(origin) == "<class 'types.UnionType'>":
        options = [a for a in args if a is not type(None)]
        return _parser_for(options[0]) if len(options) == 1 else None
    if origin is dict and args[:1] == (str,):
        return json_object, {"metavar": "JSON"}
    if origin is Literal:
        return type(args[0]), {"choices": list(args)}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis and args[0] in (int, float, str):
        item = args[0]
        return (lambda text: tuple(item(x) for x in text.split(",") if x.strip())), {"metavar": f"{item.__name__},..."}
    if tp is bool:
        return bool, {}
    if tp is dict:
        return json_object, {"metavar": "JSON"}
    if tp in (int, float, str):
        return tp, {}
    return None


def add_config_flags(parser: argparse.ArgumentParser, cls: type, prefix: str = "", skip: tuple[str, ...] = (),
                     defaults: dict[str, Any] | None = None) -> dict[str, str]:
    """Add a flag per simple field of ``cls``; returns ``{field name: argparse dest}``."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    group = parser.add_argument_group(f"{cls.__name__} ({prefix or 'no prefix'})" if prefix else cls.__name__)
    names: dict[str, str] = {}
    for f in fields(cls):
        if f.name in skip or f.name.startswith("_"):
            continue
        parsed = _parser_for(hints[f.name])
        if parsed is None:
            continue
        kind, extra = parsed
        if defaults and f.name in defaults:
            default = defaults[f.name]
        else:
            default = f.default if f.default is not MISSING else f.default_factory() if f.default_factory is not MISSING else None
        flag = "--" + (prefix + f.name).replace("_", "-")
        dest = (prefix + f.name).replace("-", "_")
        help_text = docs.get(f.name, "").replace("%", "%%") or " "  # " ": the formatter still shows the default
        if kind is bool:
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        else:
            group.add_argument(flag, dest=dest, type=kind, default=default, help=help_text, **extra)
        names[f.name] = dest
    return names


def config_from_args(cls: type, args: argparse.Namespace, names: dict[str, str], **overrides: Any) -> Any:
    """An instance of ``cls`` from the parsed flags (and ``overrides`` for the fields left out)."""
    values = {name: getattr(args, dest) for name, dest in names.items()}
    values.update(overrides)
    return cls(**values)


def results_dir(script: str) -> Path:
    """Where a benchmark script writes its tables and plots: ``benchmarks/results`` beside it;
    ``$RUBRICGYM_RESULTS_DIR`` when set, and a scratch folder under ``--smoke``, so a smoke run
    never replaces a measured result."""
    import os
    import sys
    import tempfile

    if os.environ.get("RUBRICGYM_RESULTS_DIR"):
        return Path(os.environ["RUBRICGYM_RESULTS_DIR"])
    if "--smoke" in sys.argv:
        return Path(tempfile.gettempdir()) / "rubricgym-smoke-results"
    return Path(script).resolve().parent / "results"


def add_smoke_flag(parser: argparse.ArgumentParser, argv: list[str] | None = None, **tiny: Any) -> None:
    """``--smoke``: the benchmark at tiny sizes (seconds), as CI runs every benchmark so that a
    change that breaks one fails CI; explicit flags still win. Its results go to a scratch folder
    (:func:`results_dir`)."""
    import sys

    shown = ", ".join(f"{k}={v}" for k, v in tiny.items()) or "the same sizes"
    parser.add_argument("--smoke", action="store_true", help=f"tiny sizes for CI ({shown}); results to a scratch folder")
    if "--smoke" in (sys.argv[1:] if argv is None else argv):
        parser.set_defaults(**tiny)

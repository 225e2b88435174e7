"""The math family's calculator tool: arithmetic through simpleeval (no Python ``eval``), with
bounds on sizes so that no expression can hang or exhaust the env."""

from __future__ import annotations

import math
import operator
from typing import Any

from pydantic import BaseModel, Field

from rubricgym.tools import Tool, ToolError

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 1_000
MAX_RESULT_DIGITS = 2_000
MAX_FACTORIAL = 500


class CalculatorArgs(BaseModel):
    expression: str = Field(description="An arithmetic expression, e.g. '(12 + 7) * 3' or 'sqrt(2) / 4'.")


def _bounded_power(base: Any, exponent: Any) -> Any:
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"exponent {exponent} is too large (limit {MAX_EXPONENT})")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and base.bit_length() * exponent > MAX_RESULT_DIGITS * 3.33:
        raise ToolError(f"the result would have over {MAX_RESULT_DIGITS} digits")
    return operator.pow(base, exponent)


def _bounded_mul(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_RESULT_DIGITS * 3.33:
        raise ToolError(f"the result would have over {MAX_RESULT_DIGITS} digits")
    return operator.mul(a, b)


def _bounded_factorial(value: Any) -> Any:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value > MAX_FACTORIAL:
        raise ToolError(f"factorial of {value!r} is too large or not a whole number (allowed: 0 to {MAX_FACTORIAL})")
    return math.factorial(value)


def _format_number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError(f"the expression gave {type(value).__name__}, not a number")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ToolError("the result is not a finite number")
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(round(value, 12))
    return str(value)


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression safely; raises :class:`ToolError` on any problem.

    Examples:
        >>> calculate("(12 + 7) * 3"), calculate("sqrt(16) / 8")
        ('57', '0.5')
    """
    import ast

    from simpleeval import DEFAULT_OPERATORS, SimpleEval

    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"the expression has {len(expression)} characters (limit {MAX_EXPRESSION_CHARS})")
    operators = dict(DEFAULT_OPERATORS)
    operators[ast.Pow] = _bounded_power
    operators[ast.Mult] = _bounded_mul
    operators.pop(ast.BitXor, None)  # '^' reads as power to most people; refuse rather than xor
    functions = {
        name: getattr(math, name)
        for name in ("sqrt", "log", "log10", "log2", "exp", "sin", "cos", "tan", "floor", "ceil", "gcd")
    }
    functions["factorial"] = _bounded_factorial
    functions.update(abs=abs, round=round, min=min, max=max)
    evaluator = SimpleEval(operators=operators, functions=functions, names={"pi": math.pi, "e": math.e})
    try:
        value = evaluator.eval(expression.replace("^", "**"))
    except ToolError:
        raise
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except Exception as err:  # simpleeval raises many types for bad input; all are the agent's error
        raise ToolError(f"cannot evaluate {expression!r}: {type(err).__name__}: {err}") from None
    return _format_number(value)


CALCULATOR = Tool(
    "calculator",
    "Evaluate an arithmetic expression (+ - * / // % ** and sqrt, log, exp, sin, cos, floor, ceil, ...).",
    CalculatorArgs,
    lambda args: calculate(args.expression),
)


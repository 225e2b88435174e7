import json

import pytest

from rubricgym.envs.math.calculator import CALCULATOR, calculate
from rubricgym.tools import ToolError, parse_action, resolve_tools, run_tool_call


def test_text_form_tool_call():
    parsed = parse_action('I will compute. <tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>')
    assert [c.name for c in parsed.tool_calls] == ["calculator"]
    assert parsed.tool_calls[0].arguments == {"expression": "6*7"}
    assert parsed.errors == [] and parsed.wants_tools
    message = parsed.assistant_message()
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"expression": "6*7"}


def test_openai_form_tool_call_with_string_or_dict_arguments():
    action = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "abc", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'}},
        {"id": "def", "type": "function", "function": {"name": "calculator", "arguments": {"expression": "2+2"}}},
    ]}
    parsed = parse_action(action)
    assert [c.id for c in parsed.tool_calls] == ["abc", "def"]
    assert [c.arguments["expression"] for c in parsed.tool_calls] == ["1+1", "2+2"]


@pytest.mark.parametrize("text, fragment", [
    ("<tool_call>{not json}</tool_call>", "not valid JSON"),
    ('<tool_call>{"arguments": {}}</tool_call>', "no 'name'"),
    ('<tool_call>{"name": "calculator", "arguments": [1, 2]}</tool_call>', "must be a JSON object"),
    ('<tool_call>{"name": "calculator", "arguments": "{oops"}</tool_call>', "not valid JSON"),
    ('<tool_call>{"name": "calculator"', "not closed"),
    ("<tool_call>[1, 2]</tool_call>", "must be a JSON object"),
])
def test_malformed_tool_calls_give_clear_errors(text, fragment):
    parsed = parse_action(text)
    assert parsed.tool_calls == []
    assert any(fragment in error for error in parsed.errors), parsed.errors


@pytest.mark.parametrize("action, fragment", [
    (42, "got int"), (None, "got NoneType"), (["a"], "got list"), (b"x", "got bytes"),
    ({"role": "user", "content": "x"}, "assistant message"), ({"role": "assistant", "content": 5}, "content must be"),
    ({"role": "assistant", "content": "x", "tool_calls": "nope"}, "must be a list"),
])
def test_wrong_types_are_reported(action, fragment):
    parsed = parse_action(action)
    assert parsed.invalid and fragment in parsed.invalid


def test_too_long_reply_is_invalid():
    assert "over the limit" in parse_action("x" * 101, max_chars=100).invalid


@pytest.mark.parametrize("expression, expected", [
    ("(12 + 7) * 3", "57"), ("2 ** 10", "1024"), ("2^10", "1024"), ("sqrt(16) / 8", "0.5"),
    ("7 // 2", "3"), ("10 % 4", "2"), ("-3 + 1", "-2"), ("1/3", "0.333333333333"), ("factorial(5)", "120"),
])
def test_calculator_values(expression, expected):
    assert calculate(expression) == expected


@pytest.mark.parametrize("expression, fragment", [
    ("__import__('os').system('echo hi')", "cannot evaluate"),
    ("open('/etc/passwd').read()", "cannot evaluate"),
    ("(1).__class__", "cannot evaluate"),
    ("9 ** 9 ** 9", "exponent"),
    ("10 ** 999 * 10 ** 999 * 10 ** 999", "digits"),
    ("1 / 0", "division by zero"),
    ("sqrt(-1)", "cannot evaluate"),
    ("'a' * 10", "not a number"),
    ("x" * 600, "characters"),
    ("factorial(100000)", "too large"), ("factorial(+1999)", "too large"), ("factorial(-3)", "not a whole number"),
    ("factorial(2.5)", "not a whole number"),
])
def test_calculator_refuses_hostile_or_bad_input(expression, fragment):
    with pytest.raises(ToolError, match=fragment):
        calculate(expression)


def test_run_tool_call_validates_arguments_and_names():
    tools = resolve_tools(["calculator"])
    parsed = parse_action('<tool_call>{"name": "calculator", "arguments": {"expr": "1"}}</tool_call>')
    text, error = run_tool_call(parsed.tool_calls[0], tools)
    assert error and "expression" in error and text.startswith("Error:")
    parsed = parse_action('<tool_call>{"name": "search", "arguments": {}}</tool_call>')
    text, error = run_tool_call(parsed.tool_calls[0], tools)
    assert "unknown tool 'search'" in error
    with pytest.raises(ValueError, match="unknown tool"):
        resolve_tools(["teleport"])


def test_calculator_schema_is_openai_shaped():
    schema = CALCULATOR.schema
    assert schema["type"] == "function"
    assert schema["function"]["parameters"]["required"] == ["expression"]
    assert schema["function"]["parameters"]["properties"]["expression"]["type"] == "string"

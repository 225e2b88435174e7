"""Tool calls shared by every environment: parsing agent actions, schemas, safe execution.

Two forms of tool call are understood:

* OpenAI style: an assistant message dict with ``tool_calls`` (``function.arguments`` a JSON
  string or already a dict);
* the common text form many chat templates emit:
  ``<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>``.

A malformed call never raises: :func:`parse_action` returns the problems in
``ParsedAction.errors`` so that the env can show them to the agent as an error observation.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Sequence

from pydantic import BaseModel, ValidationError

from rubricgym.utf8 import LONE_SURROGATE, calls_unrepresentable, unrepresentable

OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
#: deeper arguments are refused (JSON libraries and pydantic recurse per level)
MAX_ARGUMENT_DEPTH = 32
#: tool calls read from one reply; the rest are answered with one error (a reply of 10,000 calls
#: would otherwise grow the conversation past the observation space)
MAX_TOOL_CALLS = 32
#: how the env answers a tool call it could not parse (a user message: the call has no id to answer)
MALFORMED_CALL = "Tool call error:"
#: how a tool message reports a call that failed (unknown tool, bad arguments, the tool's own error, no time left)
TOOL_ERROR = "Error:"


def loads(text: str) -> Any:
    """``json.loads`` whose every failure is a :class:`json.JSONDecodeError`-like ``ValueError``
    with a readable message: broken JSON, nesting too deep for the parser, and integers longer than
    Python converts (``int`` refuses over 4,300 digits with a plain ``ValueError``).

    Examples:
        >>> loads('{"x": ' + "9" * 5000 + '}')
        Traceback (most recent call last):
        ...
        ValueError: a number has more digits than can be read (Python reads at most 4,300)
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{err.msg} at position {err.pos}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as err:
        if "digits" in str(err):
            raise ValueError("a number has more digits than can be read (Python reads at most 4,300)") from None
        raise ValueError(str(err)) from None


def json_arguments(value: Any, where: str = "arguments") -> Any:
    """``value`` as plain JSON data: what a Python agent's dict-form arguments may hold (numpy
    scalars and arrays, tuples) converted, anything else a ``ValueError`` naming the argument.

    Examples:
        >>> import numpy as np
        >>> json_arguments({"n": np.int64(3), "xs": np.arange(2), "t": (1.5, None)})
        {'n': 3, 'xs': [0, 1], 't': [1.5, None]}
        >>> json_arguments({"blob": b"x"})
        Traceback (most recent call last):
        ...
        ValueError: arguments.blob is a bytes, not a JSON value
    """
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bool, float)) or value is None:
        return value if type(value) in (bool, float) or value is None else float(value)
    if isinstance(value, int):
        if value.bit_length() > 14_000:  # about 4,200 digits: json and str() refuse past 4,300
            raise ValueError(f"{where} is an integer too large to write ({value.bit_length():,} bits)")
        return int(value)
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"{where} has a key of type {type(key).__name__} ({key!r:.40}); JSON keys are strings")
        return {key: json_arguments(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_arguments(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if type(value).__module__ == "numpy":  # numpy without importing it: scalars and arrays
        if hasattr(value, "tolist") and getattr(value, "dtype", None) is not None and value.dtype.kind in "biuf":
            return json_arguments(value.tolist(), where)
    raise ValueError(f"{where} is a {type(value).__name__}, not a JSON value")


def format_tool_call(name: str, arguments: Any) -> str:
    """One tool call in the text format :func:`parse_action` reads (the only writer of it).

    Examples:
        >>> format_tool_call("calculator", {"expression": "6*7"})
        '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
        >>> parse_action(format_tool_call("calculator", {"expression": "6*7"})).tool_calls[0].name
        'calculator'
    """
    return OPEN_TAG + json.dumps({"name": name, "arguments": arguments}) + CLOSE_TAG


def render_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages any chat template accepts: tool calls as ``<tool_call>`` text, tool results as
    user turns (what the policy is shown and what the trainer adapters tokenise).

    Examples:
        >>> render_messages([{"role": "tool", "name": "calculator", "content": "42"}])
        [{'role': 'user', 'content': 'Tool result (calculator): 42'}]
    """
    rendered = []
    for message in messages:
        role, content = message.get("role"), message.get("content") or ""
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function", {})
                arguments = function.get("arguments")
                try:
                    arguments = loads(arguments) if isinstance(arguments, str) else arguments
                except ValueError:
                    pass
                calls.append(format_tool_call(function.get("name"), arguments))
            if not any(c in content for c in calls):
                content = (content + "\n" if content else "") + "\n".join(calls)
        if role == "tool":
            role, content = "user", f"Tool result ({message.get('name', 'tool')}): {content}"
        rendered.append({"role": role, "content": content})
    return rendered


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply lists and dicts nest in ``value``, counted without recursion up to ``limit + 1``.

    Examples:
        >>> nesting_depth({"a": [1, [2]]}, 10), nesting_depth([[[[]]]], 2)
        (3, 3)
    """
    depth, level = 0, [value]
    while level and depth <= limit:
        children = []
        for item in level:
            if isinstance(item, dict):
                children.extend(item.values())
            elif isinstance(item, (list, tuple)):
                children.extend(item)
        if not children and not any(isinstance(i, (dict, list, tuple)) for i in level):
            break
        depth += 1
        level = children
    return depth


@dataclass
class ToolCall:
    """One parsed call: ``name`` and decoded ``arguments``. A call written without an id gets one
    from its content and its place in the reply (:func:`content_call_id`), never from a random
    source: the same actions give the same transcript, byte for byte, on every run."""

    name: str
    arguments: dict[str, Any]
    id: str = ""

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)},
        }


@dataclass
class ParsedAction:
    """An agent action split into its text, its well-formed tool calls and the problems found."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: a problem with the action as a whole (wrong type, too long): nothing in it can be used.
    invalid: str | None = None

    @property
    def wants_tools(self) -> bool:
        """Whether the agent tried to call a tool (well-formed or not)."""
        return bool(self.tool_calls or self.errors)

    def assistant_message(self) -> dict[str, Any]:
        """The action as the assistant message appended to the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message


def content_call_id(call: ToolCall, position: int) -> str:
    """``call_`` + 8 hex digits of a hash of the call's place in its reply, name and arguments.

    Examples:
        >>> content_call_id(ToolCall("calculator", {"expression": "6*7"}), 0)
        'call_64c209de'
    """
    body = json.dumps([position, call.name, call.arguments], sort_keys=True, ensure_ascii=False, default=str)
    # surrogatepass: arguments decoded from JSON escapes may hold lone surrogates, refused later with a reason
    return "call_" + hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()


def _name_calls(parsed: ParsedAction) -> ParsedAction:
    """Give every call without an id its content id (made unique within the reply)."""
    seen: set[str] = set()
    for position, call in enumerate(parsed.tool_calls):
        if not call.id:
            call.id = content_call_id(call, position)
        while call.id in seen:  # an agent-written id repeated: keep the calls apart
            call.id = content_call_id(call, position) + f"_{position}"
        seen.add(call.id)
    return parsed


def _decode_call(raw: Any, where: str) -> ToolCall | str:
    """Decode one call object into a ToolCall, or return an error message."""
    if isinstance(raw, dict) and isinstance(raw.get("function"), dict):  # OpenAI shape
        call_id = raw.get("id") if isinstance(raw.get("id"), str) else None
        raw = {**raw["function"], **({"id": call_id} if call_id else {})}
    if not isinstance(raw, dict):
        return f"{where}: a tool call must be a JSON object with 'name' and 'arguments', got {type(raw).__name__}"
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        return f"{where}: the tool call has no 'name' string"
    arguments = raw.get("arguments", raw.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments) if arguments.strip() else {}
        except ValueError as err:
            return f"{where}: arguments of '{name}' are not valid JSON ({err})"
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return f"{where}: arguments of '{name}' must be a JSON object, got {type(arguments).__name__}"
    if nesting_depth(arguments, MAX_ARGUMENT_DEPTH) > MAX_ARGUMENT_DEPTH:
        return f"{where}: arguments of '{name}' are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    try:
        arguments = json_arguments(arguments)
    except ValueError as err:
        return f"{where}: {name}'s {err}"
    # JSON escapes (\\ud800) decode to lone surrogates the reply's own text did not show: refused here,
    # before the call is applied, as a lone surrogate in the text is
    bad = calls_unrepresentable([name, arguments, raw.get("id") if isinstance(raw.get("id"), str) else ""])
    if bad:
        return f"{where}: the call to {LONE_SURROGATE.sub(chr(0xFFFD), name)!r} has {bad} (decoded from a JSON escape)"
    call = ToolCall(name=name, arguments=arguments)
    if isinstance(raw.get("id"), str) and raw["id"]:
        call.id = raw["id"]
    return call


def parse_action(action: Any, max_chars: int = 1_000_000, max_calls: int = MAX_TOOL_CALLS) -> ParsedAction:
    """Split an agent action (reply string or assistant message dict) into text and tool calls;
    past ``max_calls`` calls (well-formed or not) the rest are one error.

    Examples:
        >>> parsed = parse_action('<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>')
        >>> parsed.tool_calls[0].name, parsed.tool_calls[0].arguments
        ('calculator', {'expression': '6*7'})
        >>> parse_action('<tool_call>{"name": oops}</tool_call>').errors[0][:40]
        'tool call 1: not valid JSON (Expecting v'
    """
    if isinstance(action, dict):
        if action.get("role", "assistant") != "assistant":
            return ParsedAction("", invalid=f"an action dict must be an assistant message, got role {action.get('role')!r}")
        content = action.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            return ParsedAction("", invalid=f"the action's content must be a string or null, got {type(content).__name__}")
        raw_calls = action.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            return ParsedAction(content, invalid=f"'tool_calls' must be a list, got {type(raw_calls).__name__}")
        bad = calls_unrepresentable(raw_calls) if raw_calls else None
        if bad:
            return ParsedAction(LONE_SURROGATE.sub("\ufffd", content), invalid=f"the action's tool_calls have {bad}")
        parsed = _parse_text(content, max_chars, max_calls)
        for index, raw in enumerate(raw_calls[:max_calls], start=1):
            decoded = _decode_call(raw, f"tool_calls[{index - 1}]")
            (parsed.tool_calls if isinstance(decoded, ToolCall) else parsed.errors).append(decoded)
        return _name_calls(_cap_calls(parsed, len(parsed.tool_calls) + len(parsed.errors) + max(0, len(raw_calls) - max_calls),
                                      max_calls))
    if isinstance(action, str):
        return _name_calls(_parse_text(action, max_chars, max_calls))
    return ParsedAction(
        "",
        invalid=f"an action must be a reply string or an assistant message dict, got {type(action).__name__}",
    )


def _tool_call_bodies(text: str) -> tuple[list[str], bool]:
    """The bodies of ``<tool_call>...</tool_call>`` blocks, in one linear pass (a regex with a lazy
    ``.*?`` is quadratic on thousands of unclosed tags), and whether a tag was left unclosed."""
    bodies, position = [], 0
    while True:
        start = text.find(OPEN_TAG, position)
        if start == -1:
            return bodies, False
        end = text.find(CLOSE_TAG, start + len(OPEN_TAG))
        if end == -1:
            return bodies, True
        bodies.append(text[start + len(OPEN_TAG):end])
        position = end + len(CLOSE_TAG)


def _cap_calls(parsed: ParsedAction, total: int, max_calls: int) -> ParsedAction:
    """Keep the first ``max_calls`` calls and errors of a reply that made ``total``; one error says so."""
    if total > max_calls:
        parsed.tool_calls = parsed.tool_calls[:max_calls]
        parsed.errors = parsed.errors[:max(0, max_calls - len(parsed.tool_calls))]
        parsed.errors.append(f"the reply makes {total:,} tool calls; the first {max_calls} were read, the rest ignored")
    return parsed


def _parse_text(text: str, max_chars: int, max_calls: int = MAX_TOOL_CALLS) -> ParsedAction:
    if len(text) > max_chars:
        return ParsedAction(text[:200], invalid=f"the reply has {len(text):,} characters, over the limit of {max_chars:,}")
    bad = unrepresentable(text)
    if bad:  # refused before it is applied: the transcript, a record or a served reply could not hold it
        return ParsedAction(LONE_SURROGATE.sub("\ufffd", text), invalid=f"the reply has {bad}")
    parsed = ParsedAction(text)
    if OPEN_TAG not in text:
        return parsed
    bodies, unclosed = _tool_call_bodies(text)
    if len(bodies) > max_calls:
        _cap_calls(parsed, len(bodies), max_calls)
        cap_error, bodies = parsed.errors.pop(), bodies[:max_calls]
    else:
        cap_error = None
    for index, body in enumerate(bodies, start=1):
        try:
            raw = loads(body.strip())
        except ValueError as err:
            parsed.errors.append(f"tool call {index}: not valid JSON ({err})")
            continue
        decoded = _decode_call(raw, f"tool call {index}")
        (parsed.tool_calls if isinstance(decoded, ToolCall) else parsed.errors).append(decoded)
    if unclosed:
        parsed.errors.append("a <tool_call> tag is not closed with </tool_call>")
    if cap_error:
        parsed.errors.append(cap_error)
    return parsed


class Tool:
    """A function the agent may call: name, description, pydantic argument model, callable.

    ``schema`` is the OpenAI tool schema shown to the agent (and to judges); ``run`` validates
    the arguments and returns the result text, or raises :class:`ToolError` with a message
    meant for the agent.

    Examples:
        >>> class Args(BaseModel):
        ...     text: str
        >>> echo = Tool("echo", "Repeat the text.", Args, lambda args: args.text)
        >>> echo.run({"text": "hi"})
        'hi'
    """

    def __init__(self, name: str, description: str, args_model: type[BaseModel], fn: Callable[[Any], str]):
        self.name, self.description, self.args_model, self.fn = name, description, args_model, fn

    @cached_property
    def schema(self) -> dict[str, Any]:
        parameters = self.args_model.model_json_schema()
        parameters.pop("title", None)
        for prop in parameters.get("properties", {}).values():
            prop.pop("title", None)
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": parameters}}

    def run(self, arguments: dict[str, Any]) -> str:
        try:
            args = self.args_model.model_validate(arguments)
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in err.errors())
            raise ToolError(f"invalid arguments for '{self.name}': {problems}") from None
        return self.fn(args)


class ToolError(Exception):
    """A tool call that could not be carried out; the message is shown to the agent."""


def run_tool_call(call: ToolCall, tools: dict[str, Tool]) -> tuple[str, str | None]:
    """Execute ``call`` against ``tools``; returns ``(tool message text, error or None)``."""
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        error = f"unknown tool '{call.name}' (available: {known})"
        return f"{TOOL_ERROR} {error}", error
    try:
        return tool.run(call.arguments), None
    except ToolError as err:
        return f"{TOOL_ERROR} {err}", str(err)


#: when the tool calls of the current step must be done (``time.monotonic()``); tools that can run
#: long (the python sandbox) shorten their own limit to it
TOOL_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("rubricgym_tool_deadline", default=None)


def tool_seconds_left(default: float) -> float:
    """Seconds a tool may still run in this step: ``default``, or less when the step's tool budget
    ends sooner.

    Examples:
        >>> tool_seconds_left(5.0)
        5.0
    """
    deadline = TOOL_DEADLINE.get()
    return default if deadline is None else max(0.0, min(default, deadline - time.monotonic()))


def execute_tool_calls(parsed: ParsedAction, tools: dict[str, Tool], after_each: Callable[[], None] | None = None,
                       max_seconds: float | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Run an action's tool calls: the messages to append (a ``tool`` message per well-formed call,
    a ``user`` message per malformed one, which has no id to answer) and the errors met. Calls
    share ``max_seconds`` of tool time: once it is spent the rest are answered with an error."""
    messages: list[dict[str, Any]] = []
    errors = list(parsed.errors)
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    token = TOOL_DEADLINE.set(deadline)
    try:
        for call in parsed.tool_calls:
            if deadline is not None and time.monotonic() >= deadline:
                error = f"not run: this reply's tool calls used their {max_seconds:g} s"
                text = f"{TOOL_ERROR} {error}"
            else:
                text, error = run_tool_call(call, tools)
                if after_each is not None:
                    after_each()
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text})
            if error:
                errors.append(error)
    finally:
        TOOL_DEADLINE.reset(token)
    for problem in parsed.errors:
        messages.append({"role": "user", "content": f"{MALFORMED_CALL} {problem}"})
    return messages, errors


#: Tools any env can offer by name (``tools=["calculator"]``): name -> "module:attribute" of a
#: Tool, or of a function that builds one. Env families add theirs with :func:`register_tool`.
TOOL_REGISTRY: dict[str, str] = {"python": "rubricgym.sandbox:python_tool",
                                 "python-audit-hook": "rubricgym.sandbox:audit_hook_python_tool"}


def register_tool(name: str, target: str) -> None:
    """Offer a tool by name to every env: ``target`` is ``"module:attribute"``, imported on first use."""
    TOOL_REGISTRY[name] = target


def resolve_tools(names_or_tools: list[str | Tool] | str | None) -> dict[str, Tool]:
    """Turn ``tools=[...]`` (names from :data:`TOOL_REGISTRY` or Tool objects) into a dict.

    Examples:
        >>> resolve_tools("calculator")
        Traceback (most recent call last):
        ...
        TypeError: tools must be a list of names or Tool objects, got the string 'calculator' (did you mean ['calculator']?)
    """
    import importlib

    if isinstance(names_or_tools, str):
        raise TypeError(f"tools must be a list of names or Tool objects, got the string {names_or_tools!r} "
                        f"(did you mean [{names_or_tools!r}]?)")
    resolved: dict[str, Tool] = {}
    for item in names_or_tools or []:
        if isinstance(item, Tool):
            resolved[item.name] = item
            continue
        if item not in TOOL_REGISTRY:
            raise ValueError(f"tools: unknown tool {item!r}; available: {sorted(TOOL_REGISTRY)}")
        module, attribute = TOOL_REGISTRY[item].split(":")
        target = getattr(importlib.import_module(module), attribute)
        resolved[item] = target if isinstance(target, Tool) else target()
    return resolved

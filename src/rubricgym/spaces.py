"""Observation and action spaces for text agents.

Gymnasium's :class:`~gymnasium.spaces.Text` accepts only its charset (letters and digits by
default) and at least one character, which rejects most real model output. These spaces accept
any Unicode text, the empty string included, and any well-formed OpenAI-style chat.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import string
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

#: Characters used when *sampling* text (any Unicode is *accepted*). Includes whitespace,
#: punctuation, LaTeX specials, accents, CJK and an emoji so random tests touch real variety.
SAMPLE_CHARSET = string.printable + "éüßπ∑√≤≥→中文한국어🙂"

ROLES = ("system", "user", "assistant", "tool")


class UnicodeText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` that contains any ``str`` of bounded length.

    Examples:
        >>> space = UnicodeText(max_length=100)
        >>> space.contains("∫ x dx = x²/2 + C"), space.contains("")
        (True, True)
    """

    def __init__(self, max_length: int = 1_000_000, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length=max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        # Keep samples short: a sampled 1 MB string would make every smoke test slow.
        length = int(self.np_random.integers(self.min_length, min(self.max_length, 64) + 1))
        chars = self.np_random.choice(np.array(list(SAMPLE_CHARSET)), size=length)
        return "".join(chars.tolist())

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


def last_reply(messages: Sequence[dict]) -> str:
    """The content of the last assistant message ("" when there is none): the answer a verifier reads.

    Examples:
        >>> last_reply([{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}])
        '4'
    """
    return next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")


def is_message(message: Any) -> bool:
    """Whether ``message`` is a well-formed OpenAI-style chat message dict."""
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        return False
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        return False
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if message["role"] != "assistant" or not isinstance(tool_calls, list):
            return False
        if not all(isinstance(call, dict) for call in tool_calls):
            return False
    if content is None and not tool_calls:
        return False
    return True


class _TextSampledSpace(spaces.Space):
    """A non-numeric space whose samples come from an inner :class:`UnicodeText` (``self._text``)."""

    _text: UnicodeText

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def seed(self, seed: Any = None) -> Any:
        result = super().seed(seed)
        self._text.seed(int(self.np_random.integers(2**31)))
        return result


class ChatSpace(_TextSampledSpace):
    """Space of chat conversations: lists of ``{"role", "content", ...}`` dicts (OpenAI format).

    Examples:
        >>> space = ChatSpace()
        >>> space.contains([{"role": "user", "content": "What is 2 + 2?"}])
        True
    """

    def __init__(self, max_messages: int = 10_000, seed: Any = None, shared_memory_bytes: int = 8 * 2**20):
        self.max_messages = max_messages
        #: per-env capacity when ``AsyncVectorEnv`` passes observations through shared memory
        #: (the conversation as UTF-8 JSON); a longer one is refused with a clear error
        self.shared_memory_bytes = shared_memory_bytes
        self._text = UnicodeText()
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and len(x) <= self.max_messages and all(is_message(m) for m in x)

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, Any]]:
        n = int(self.np_random.integers(1, 4))
        roles = ["system", "user", "assistant"]
        return [{"role": roles[i % 3], "content": self._text.sample()} for i in range(n)]

    def __eq__(self, other: Any) -> bool:
        # Vector envs compare sub-env spaces; without __eq__ they refuse them as different.
        return isinstance(other, ChatSpace) and other.max_messages == self.max_messages

    def __repr__(self) -> str:
        return f"ChatSpace(max_messages={self.max_messages})"


class AssistantReplySpace(_TextSampledSpace):
    """Space of agent actions: a reply string, or an assistant message dict with ``tool_calls``.

    Examples:
        >>> space = AssistantReplySpace()
        >>> space.contains("The answer is \\\\boxed{4}.")
        True
        >>> space.contains({"role": "assistant", "content": None, "tool_calls": [
        ...     {"id": "1", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]})
        True
    """

    def __init__(self, max_length: int = 1_000_000, seed: Any = None):
        self.max_length = max_length
        self._text = UnicodeText(max_length=max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return len(x) <= self.max_length
        return isinstance(x, dict) and x.get("role") == "assistant" and is_message(x)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return self._text.sample()

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AssistantReplySpace) and other.max_length == self.max_length

    def __repr__(self) -> str:
        return f"AssistantReplySpace(max_length={self.max_length})"


# Gymnasium's AsyncVectorEnv passes observations through shared memory by default and asks custom
# spaces to register these three functions: a chat travels as length-prefixed UTF-8 JSON.
_LENGTH_BYTES = 8


@create_shared_memory.register(ChatSpace)
def _create_chat_shared_memory(space: ChatSpace, n: int = 1, ctx: Any = mp) -> Any:
    return ctx.Array("B", n * (space.shared_memory_bytes + _LENGTH_BYTES), lock=True)


@write_to_shared_memory.register(ChatSpace)
def _write_chat_to_shared_memory(space: ChatSpace, index: int, value: Any, shared_memory: Any) -> None:
    # "surrogatepass": a lone surrogate an agent wrote travels as it is (strict UTF-8 refuses it)
    data = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if len(data) > space.shared_memory_bytes:
        raise ValueError(f"a {len(data)}-byte conversation does not fit ChatSpace.shared_memory_bytes="
                         f"{space.shared_memory_bytes}; raise it or pass vector_kwargs={{'shared_memory': False}}")
    slot = space.shared_memory_bytes + _LENGTH_BYTES
    buffer = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)[index * slot:(index + 1) * slot]
    buffer[:_LENGTH_BYTES] = np.frombuffer(len(data).to_bytes(_LENGTH_BYTES, "little"), dtype=np.uint8)
    buffer[_LENGTH_BYTES:_LENGTH_BYTES + len(data)] = np.frombuffer(data, dtype=np.uint8)


class SharedChats(Sequence):
    """The live batch of chats in an ``AsyncVectorEnv``'s shared memory: Gymnasium reads the
    buffer once and returns (a deep copy of) that object after every step, so items decode on
    access and a deep copy is a plain tuple of lists, the same as without shared memory."""

    def __init__(self, space: ChatSpace, shared_memory: Any, n: int):
        self.space, self.n = space, n
        self.buffer = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self.n)))
        if not -self.n <= index < self.n:
            raise IndexError(index)
        start = (index % self.n) * (self.space.shared_memory_bytes + _LENGTH_BYTES)
        length = int.from_bytes(self.buffer[start:start + _LENGTH_BYTES].tobytes(), "little")
        data = self.buffer[start + _LENGTH_BYTES:start + _LENGTH_BYTES + length].tobytes()
        return json.loads(data.decode("utf-8", "surrogatepass")) if length else []

    def __deepcopy__(self, memo: dict) -> tuple[list[dict[str, Any]], ...]:
        return tuple(self)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedChats({tuple(self)!r})"


@read_from_shared_memory.register(ChatSpace)
def _read_chat_from_shared_memory(space: ChatSpace, shared_memory: Any, n: int = 1) -> SharedChats:
    return SharedChats(space, shared_memory, n)

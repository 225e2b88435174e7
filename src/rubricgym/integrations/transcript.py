"""One multi-turn episode as the single token sequence RL trainers train on.

TRL (``env_mask``) and verl (``response_mask``) take an episode as prompt tokens plus one
completion in which the model's tokens are marked 1 and the env's (tool results, error
feedback, the next turn's header) 0. The model is always conditioned on exactly this
sequence: the env's turn is the chat template's rendering of the new messages, cut from the
template's text of the whole conversation, so what the trainer scores is what was sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from rubricgym.sampling import stop_token_ids
from rubricgym.tools import render_messages


class TemplateMismatch(ValueError):
    """The chat template re-renders earlier turns differently from how they were generated."""


def chat_text(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> str:
    """The template's text for ``messages`` with the generation prompt (tool calls as text)."""
    return tokenizer.apply_chat_template(render_messages(messages), add_generation_prompt=True, tokenize=False)


@dataclass
class TokenTranscript:
    """An episode's tokens: ``prompt_ids`` then ``completion_ids`` with per-token ``logprobs``
    (0.0 on env tokens) and ``env_mask`` (1 = sampled by the model, 0 = written by the env).

    Examples:
        >>> transcript = TokenTranscript.start(tokenizer, obs)                    # doctest: +SKIP
        >>> transcript.add_model_turn(ids, logprobs)                              # doctest: +SKIP
        >>> transcript.add_env_turn(obs, next_obs)  # tool results: mask 0         # doctest: +SKIP
    """

    tokenizer: Any
    prompt_ids: list[int]
    text: str
    """The template text of everything so far (what the token ids decode to)."""
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    turns: int = 0
    replies: list[str] = field(default_factory=list)
    """Each model turn's text as generated (without its end-of-turn token): earlier turns are
    re-rendered from these, not from the env's parsed copies, which may differ (a literal
    ``<|im_end|>`` the model wrote, a malformed call the env tidied)."""

    @classmethod
    def start(cls, tokenizer: Any, messages: Sequence[dict[str, Any]]) -> "TokenTranscript":
        text = chat_text(tokenizer, messages)
        return cls(tokenizer, tokenizer.encode(text, add_special_tokens=False), text)

    @property
    def context(self) -> list[int]:
        """What the model is conditioned on for its next turn."""
        return self.prompt_ids + self.completion_ids

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)

    def add_model_turn(self, ids: Sequence[int], logprobs: Sequence[float]) -> None:
        if len(ids) != len(logprobs):
            raise ValueError(f"{len(ids)} token ids but {len(logprobs)} log-probs")
        self.completion_ids += list(ids)
        self.logprobs += [float(x) for x in logprobs]
        self.env_mask += [1] * len(ids)
        self.text += self.tokenizer.decode(list(ids), skip_special_tokens=False)
        self.turns += 1
        self.replies.append(self._reply_text(ids))

    def add_env_turn(self, before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> None:
        """The env's answer to the last model turn: the messages ``after`` adds beyond ``before``
        and the agent's reply (as generated: the env's parsed copy may differ), rendered by the
        template, as env tokens (mask 0)."""
        new_messages = list(after)[len(before) + 1:]
        earlier = self._as_generated(before)
        full = chat_text(self.tokenizer, [*earlier, {"role": "assistant", "content": self.replies[-1]}, *new_messages])
        if not full.startswith(self.text):
            at = next((i for i, (a, b) in enumerate(zip(full, self.text)) if a != b), min(len(full), len(self.text)))
            raise TemplateMismatch(f"the chat template renders the earlier turns differently at character {at} "
                                   f"({self.text[at:at + 40]!r} was generated, {full[at:at + 40]!r} re-rendered); "
                                   "multi-turn training needs a template that re-renders past turns as they were")
        delta = full[len(self.text):]
        ids = self.tokenizer.encode(delta, add_special_tokens=False)
        self.completion_ids += ids
        self.logprobs += [0.0] * len(ids)
        self.env_mask += [0] * len(ids)
        self.text += delta

    def _as_generated(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with the earlier model turns' assistant messages replaced by the text the
        model generated (the last assistant messages, one per earlier turn; unchanged when the env
        kept a different number of them)."""
        messages = list(messages)
        earlier = self.replies[:-1]
        positions = [i for i, message in enumerate(messages) if message.get("role") == "assistant"]
        if not earlier or len(positions) < len(earlier):
            return messages
        for i, reply in zip(positions[len(positions) - len(earlier):], earlier):
            messages[i] = {"role": "assistant", "content": reply}
        return messages

    def _reply_text(self, ids: Sequence[int]) -> str:
        """A model turn's text without its end-of-turn token (the template adds it)."""
        ids = list(ids)
        # the end-of-turn token need not be "special" to the tokenizer (SmolLM2's GGUF tokenizer lists
        # only <|im_start|> and <|endoftext|>): strip what ends a completion too, or the template adds a second
        special = set(self.tokenizer.all_special_ids) | set(stop_token_ids(self.tokenizer))
        while ids and ids[-1] in special:
            ids = ids[:-1]
        return self.tokenizer.decode(ids, skip_special_tokens=False)

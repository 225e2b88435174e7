"""Backends of :class:`rubricgym.llm.LLM`: LiteLLM (any provider, or a local OpenAI-compatible
server through ``api_base``) and an in-process transformers model."""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from typing import Any, Sequence

from rubricgym.sampling import output_cache, with_cache

from .client import Completion


class LiteLLMBackend:
    """Any LiteLLM model string (``openai/gpt-4o-mini``, ``anthropic/...``, ``openai/<name>`` with ``api_base``)."""

    default_timeout_s = 60.0

    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None, **extra: Any):
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-table download at import
        self.model, self.api_base, self.api_key, self.extra = model, api_base, api_key, extra
        self.name = model if api_base is None else f"{model}@{api_base}"

    async def complete(self, messages, response_format, timeout_s, **params) -> Completion:
        import litellm

        litellm.suppress_debug_info = True  # no "Provider List" banners on stderr
        kwargs: dict[str, Any] = {**self.extra, **params}
        if self.api_base:
            kwargs["api_base"] = self.api_base
            kwargs["api_key"] = self.api_key or os.environ.get("OPENAI_API_KEY", "sk-local")
        elif self.api_key:
            kwargs["api_key"] = self.api_key
        if response_format is not None:
            kwargs["response_format"] = response_format
        response = await litellm.acompletion(model=self.model, messages=messages, timeout=timeout_s,
                                             num_retries=0, **kwargs)
        usage = getattr(response, "usage", None)
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # local and unknown models have no price
            cost = 0.0
        return Completion(
            text=response.choices[0].message.content or "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=cost,
            model=self.model,
        )


_said: set[str] = set()


def _say_once(message: str) -> None:
    """A warning shown once per process (a judged env builds many clients)."""
    if message not in _said:
        _said.add(message)
        warnings.warn(message, stacklevel=3)


def weights_fingerprint(checkpoint: str) -> str:
    """The first 12 hex digits of the SHA-256 of a checkpoint's adapter weights."""
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256()
    with open(Path(checkpoint) / "adapter" / "adapter_model.safetensors", "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


class TransformersBackend:
    """An in-process causal LM (default: the project's SmolLM2-135M-Instruct, offline).

    Generation runs in a worker thread under transformers' ``max_time`` limit (the per-call
    timeout), one call at a time. A ``response_format`` with a ``schema`` is enforced by
    decoding (lm-format-enforcer masks every token that would leave the schema), as llama.cpp
    and vLLM servers do, so a small local judge emits parseable JSON with the right ids and
    counts; ``constrained=False`` turns that off (the schema is then only shown in the prompt).
    ``model`` may be a training checkpoint folder (a judge trained by ``rubricgym train-judge``):
    its adapter is merged into its base model, and the schema is not added to the prompt (the
    judge was trained on RULER's prompt as it is; decoding still holds it to the schema).
    """

    #: the in-process model writes about 20 tokens/s on 2 CPU cores: a long judge reply needs minutes
    default_timeout_s = 300.0
    #: max_time is checked between tokens, and one token (or the prompt's prefill) on a loaded
    #: machine can take a second or two: the client's safety net waits this much longer
    stop_grace_s = 2.0

    def __init__(self, model: str | None = None, device: str = "cpu", model_and_tokenizer: Any = None,
                 constrained: bool = True, schema_hint: bool | None = None):
        from rubricgym.models import checkpoint_base

        if model is None and model_and_tokenizer is None:
            _say_once("The default in-process judge (SmolLM2-135M) exercises the plumbing of judged rewards; it is "
                      "not a judge of quality (it scores nearly every answer alike). Pass judge=<LiteLLM model> or an "
                      "OpenAI-compatible server (api_base) for real judgements.")
        self.model_name = model or "default"
        trained = bool(model) and checkpoint_base(model) is not None
        # the name keys the disk cache: a checkpoint retrained in the same folder must not read
        # the old weights' replies, so a trained judge's name carries its adapter's hash
        self.name = f"local:{self.model_name}" + (f"@{weights_fingerprint(model)}" if trained else "") + \
            ("" if constrained else ":unconstrained")
        self.device = device
        self.constrained = constrained
        self.schema_hint = schema_hint if schema_hint is not None else not trained
        self._loaded = model_and_tokenizer
        self._enforcer_data = None
        self._lock = threading.Lock()

    def _load(self):
        if self._loaded is None:
            from rubricgym.models import load_model_and_tokenizer

            self._loaded = load_model_and_tokenizer(None if self.model_name == "default" else self.model_name, self.device)
        return self._loaded

    def _generate(self, messages, response_format, timeout_s, temperature: float = 0.0, max_tokens: int = 512,
                  **_: Any) -> Completion:
        import torch

        with self._lock:
            model, tokenizer = self._load()
            messages = self._with_schema_hint(messages, (response_format or {}).get("schema"))
            prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                   return_dict=True).to(model.device)
            sample = temperature > 0
            constraint = {}
            if self.constrained and response_format and response_format.get("schema"):
                constraint["prefix_allowed_tokens_fn"] = self._schema_constraint(tokenizer, response_format["schema"])
            with torch.no_grad():
                output = model.generate(**prompt, max_new_tokens=max_tokens, do_sample=sample,
                                        temperature=temperature if sample else None, top_p=None, top_k=None,
                                        max_time=timeout_s, pad_token_id=tokenizer.pad_token_id, **constraint)
            new_tokens = output[0, prompt["input_ids"].shape[1]:]
            return Completion(text=tokenizer.decode(new_tokens, skip_special_tokens=True),
                              prompt_tokens=int(prompt["input_ids"].shape[1]), completion_tokens=int(new_tokens.shape[0]),
                              model=self.name)

    def _schema_constraint(self, tokenizer, schema: dict[str, Any]):
        """``prefix_allowed_tokens_fn`` for ``generate``: the tokens that keep the reply inside ``schema``."""
        from lmformatenforcer import CharacterLevelParserConfig, JsonSchemaParser, TokenEnforcer, TokenEnforcerTokenizerData

        if self._enforcer_data is None:
            # lm-format-enforcer's own transformers glue does not import under transformers 5;
            # this is the same vocabulary table, built once per backend (a few seconds).
            # Decoding "0" + token and dropping the "0" keeps a word-initial space.
            zero = tokenizer.encode("0", add_special_tokens=False)[-1]
            special = set(tokenizer.all_special_ids)
            regular = []
            for token in range(len(tokenizer)):
                if token not in special:
                    text = tokenizer.decode([zero, token])[1:]
                    regular.append((token, text, len(text) > len(tokenizer.decode([token]))))
            self._enforcer_data = TokenEnforcerTokenizerData(
                regular, lambda ids: tokenizer.decode(ids).rstrip("\ufffd"), tokenizer.eos_token_id, False, len(tokenizer))
        # fields in the schema's "required" order: a judge explains before it scores
        parser = JsonSchemaParser(schema, CharacterLevelParserConfig(force_json_field_order=True))
        enforcer = TokenEnforcer(self._enforcer_data, parser)
        eos = tokenizer.eos_token_id

        def allowed(_batch: int, ids) -> list[int]:
            tokens = enforcer.get_allowed_tokens(ids.tolist()).allowed_tokens
            # once the object is complete only whitespace may follow, and small models pad with
            # newlines up to max_tokens: stop right there
            return [eos] if eos in tokens else tokens

        return allowed

    async def complete(self, messages, response_format, timeout_s, **params) -> Completion:
        return await asyncio.to_thread(self._generate, messages, response_format, timeout_s, **params)

    def _with_schema_hint(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> list[dict[str, Any]]:
        """The conversation with the reply schema appended to its last user turn (untrained models only)."""
        if not schema or not self.schema_hint:
            return list(messages)
        import json

        hint = "Reply with only a JSON object that follows this JSON schema:\n" + json.dumps(schema)
        if messages[-1]["role"] != "user":
            return list(messages) + [{"role": "user", "content": hint}]
        return list(messages[:-1]) + [{**messages[-1], "content": messages[-1]["content"] + "\n\n" + hint}]

    def choose_sequence(self, messages: list[dict[str, Any]], prefix: str, options: Sequence[str], count: int,
                        separator: str, suffix: str, schema: dict[str, Any] | None = None) -> tuple[list[int], int]:
        """Greedy choices in a reply with a fixed frame: ``prefix``, then ``count`` times one of
        ``options`` (the one whose first token the model rates higher) joined by ``separator``,
        then ``suffix``. Constrained greedy decoding of an enum list decides the same way, but
        pays a schema check per token; this reads one next-token distribution per choice.
        ``schema`` is the reply's schema, shown to untrained models as a constrained call shows it.
        Returns the option indices and the prompt tokens read.

        Examples:
            >>> backend = TransformersBackend()  # doctest: +SKIP
            >>> backend.choose_sequence(messages, '{"satisfied": ["', ["yes", "no"], 3, '", "', '"]}')  # doctest: +SKIP
            ([0, 1, 1], 912)
        """
        import torch

        with self._lock:
            model, tokenizer = self._load()
            firsts = [tokenizer.encode(option, add_special_tokens=False)[0] for option in options]
            if len(set(firsts)) != len(firsts):
                raise ValueError(f"{self.name}: the options {list(options)} must start with different tokens")
            prompt = tokenizer.apply_chat_template(self._with_schema_hint(messages, schema), add_generation_prompt=True,
                                                   tokenize=False)
            reply, chosen, seen, cache = prefix, [], [], None
            with torch.no_grad():
                for k in range(count):
                    ids = tokenizer.encode(prompt + reply, add_special_tokens=False)
                    if cache is None or ids[:len(seen)] != seen:  # the text so far tokenized differently: no reuse
                        cache, seen = None, []
                    out = model(input_ids=torch.tensor([ids[len(seen):]], device=model.device), **with_cache(cache),
                                use_cache=True)
                    cache, seen = output_cache(out), ids
                    pick = int(torch.argmax(out.logits[0, -1][torch.tensor(firsts, device=out.logits.device)]))
                    chosen.append(pick)
                    reply += options[pick] + (separator if k < count - 1 else suffix)
            return chosen, len(seen)

    def expected_scores(self, messages: list[dict[str, Any]], reply_prefixes: list[str]) -> tuple[list[float], int]:
        """G-Eval scoring: for each reply prefix ending just before a score's first decimal (``... "score": 0.``),
        the expected score under the model's next-token distribution over the digits 0-9
        (``sum p(d) (d + 0.5) / 10``), so a small judge's scores carry a ranking instead of a
        sampled tie. One batched forward pass; returns the scores and the prompt tokens read."""
        import torch

        with self._lock:
            model, tokenizer = self._load()
            digits = [tokenizer.encode(str(d), add_special_tokens=False) for d in range(10)]
            if any(len(ids) != 1 for ids in digits):
                raise ValueError(f"{self.name}: probability scoring needs single-token digits")
            digit_ids = torch.tensor([ids[0] for ids in digits])
            prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            sequences = [tokenizer.encode(prompt + prefix, add_special_tokens=False) for prefix in reply_prefixes]
            width = max(len(seq) for seq in sequences)
            pad = tokenizer.pad_token_id
            ids = torch.tensor([[pad] * (width - len(seq)) + seq for seq in sequences], device=model.device)
            mask = torch.tensor([[0] * (width - len(seq)) + [1] * len(seq) for seq in sequences], device=model.device)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1, :].float()
            probabilities = torch.softmax(logits[:, digit_ids.to(logits.device)], dim=-1)
            values = (torch.arange(10, device=logits.device, dtype=torch.float32) + 0.5) / 10
            return (probabilities * values).sum(-1).tolist(), int(mask.sum())

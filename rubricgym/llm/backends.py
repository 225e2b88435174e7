"""Backends of :class:`rubricgym.llm.LLM`: LiteLLM (any provider, or a local OpenAI-compatible
server through ``api_base``) and an in-process transformers model."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from .client import Completion


class LiteLLMBackend:
    """Any LiteLLM model string (``openai/gpt-4o-mini``, ``anthropic/...``, ``openai/<name>`` with ``api_base``)."""

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


class TransformersBackend:
    """An in-process causal LM (default: the project's SmolLM2-135M-Instruct, offline).

    Generation runs in a worker thread under transformers' ``max_time`` limit (the per-call
    timeout), one call at a time. ``response_format`` is not enforced by decoding; the JSON in
    the reply is extracted and validated by the client like any other.
    """

    def __init__(self, model: str | None = None, device: str = "cpu", model_and_tokenizer: Any = None):
        self.model_name = model or "default"
        self.name = f"local:{self.model_name}"
        self.device = device
        self._loaded = model_and_tokenizer
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
            if response_format and response_format.get("schema"):
                import json

                hint = "Reply with only a JSON object that follows this JSON schema:\n" + json.dumps(response_format["schema"])
                messages = list(messages) + [{"role": "user", "content": hint}] if messages[-1]["role"] != "user" else \
                    list(messages[:-1]) + [{**messages[-1], "content": messages[-1]["content"] + "\n\n" + hint}]
            prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                   return_dict=True).to(model.device)
            sample = temperature > 0
            with torch.no_grad():
                output = model.generate(**prompt, max_new_tokens=max_tokens, do_sample=sample,
                                        temperature=temperature if sample else None, top_p=None, top_k=None,
                                        max_time=timeout_s, pad_token_id=tokenizer.pad_token_id)
            new_tokens = output[0, prompt["input_ids"].shape[1]:]
            return Completion(text=tokenizer.decode(new_tokens, skip_special_tokens=True),
                              prompt_tokens=int(prompt["input_ids"].shape[1]), completion_tokens=int(new_tokens.shape[0]),
                              model=self.name)

    async def complete(self, messages, response_format, timeout_s, **params) -> Completion:
        return await asyncio.to_thread(self._generate, messages, response_format, timeout_s, **params)

"""A vLLM-API double for the rollout-server tests: the completions endpoint with prompt token ids
in and sampled token ids + log-probs out, and runtime LoRA loading, answered by a real
in-process policy (the tests give it the tiny model) that loads each adapter the trainer posts. llama.cpp has
neither token ids nor a LoRA endpoint; this double has both and samples for real."""

from __future__ import annotations

import threading
from typing import Any

from rubricgym.testing.loopback import LoopbackServer, Reply


class VLLMDouble:
    def __init__(self, fail_first: int = 0, lora_r: int = 16, model: str | None = None):
        from rubricgym.agents.policy import Policy, PolicyConfig

        self.policy = Policy(PolicyConfig(model=model, lora_r=lora_r, cpu_threads="fixed"))
        self.lock = threading.Lock()
        self.fail_first = fail_first
        self.completion_calls = 0
        self.served_models: list[str] = []
        self.returned_ids: list[list[int]] = []
        self.server = LoopbackServer(completions=self.complete)
        self.server.route = self._route(self.server.route)
        self.base = self.server.base

    def _route(self, route):
        def wrapped(path: str, body: dict[str, Any]) -> Reply:
            if path.rstrip("/").endswith("/load_lora_adapter"):
                from peft import set_peft_model_state_dict
                from safetensors.torch import load_file

                with self.lock:
                    set_peft_model_state_dict(self.policy.model, load_file(f"{body['lora_path']}/adapter_model.safetensors"))
            return route(path, body)
        return wrapped

    def complete(self, body: dict[str, Any]) -> Any:
        with self.lock:
            self.completion_calls += 1
            if self.completion_calls <= self.fail_first:
                return Reply(503, {"error": {"message": "engine restarting"}})
            self.served_models.append(body["model"])
            samples = self.policy.sample_ids(body["prompt"], max_new_tokens=body["max_tokens"],
                                             temperature=body["temperature"] or None, greedy=body["temperature"] == 0)
        choices = []
        for index, sample in enumerate(samples):
            self.returned_ids.append(list(sample.completion_ids))
            choices.append({"index": index, "text": sample.text, "token_ids": sample.completion_ids,
                            "finish_reason": "length" if sample.truncated else "stop",
                            "logprobs": {"token_logprobs": sample.logprobs, "tokens": [str(t) for t in sample.completion_ids]}})
        return {"id": "cmpl-double", "object": "text_completion", "model": body["model"], "choices": choices}

    def close(self):
        self.server.close()

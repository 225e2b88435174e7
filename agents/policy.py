"""The LLM policy: a causal LM with an optional LoRA adapter, batched sampling that returns
per-token log-probs, and the training-time log-prob computation that matches it.

Left padding shifts positions, so every forward pass here passes explicit ``position_ids``
(``cumsum(attention_mask) - 1``), exactly as ``generate`` does internally: the log-probs
recorded while sampling then equal the ones recomputed for training (fp32 CPU, within 1e-4).
"""

from __future__ import annotations

from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from rubricgym.sampling import (PrefixCache, common_prefix_length, generate_with_logprobs, left_pad, output_cache,
                                stop_token_ids, with_cache)
from rubricgym.tools import render_messages

#: a shared prefix shorter than this is not read on its own (score_samples) nor counted once (pass_tokens)
MIN_SHARED_TOKENS = 16


@dataclass
class PolicyConfig:
    """Model, adapter and sampling knobs."""

    model: str | None = None
    """Hugging Face id or local path; None = the default SmolLM2-135M-Instruct (offline GGUF)."""
    device: str = "auto"
    """``"auto"``: CUDA with bf16 when present, else CPU float32."""
    lora_r: int = 16
    """LoRA rank; 0 trains the full model."""
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: str | list[str] = "all-linear"
    adapter: str | None = None
    """A checkpoint folder (``rubricgym train`` / ``train-judge``) whose LoRA weights the adapter
    starts from (its rank and targets must match), e.g. GRPO after a supervised cold start."""
    max_new_tokens: int = 48
    """Completion budget per turn."""
    role_max_new_tokens: dict[str, int] = field(default_factory=lambda: {"rubricator": 200})
    """Per-role budgets that override ``max_new_tokens`` (a rubric in JSON needs more room
    than a short answer)."""
    temperature: float = 1.0
    """Sampling temperature (log-probs are of the tempered distribution, in sampling and training)."""
    top_p: float = 1.0
    max_prompt_tokens: int = 4096
    """Longer prompts keep their last tokens. Only long prompts cost anything, so the default is
    generous: at 1024 the shop's first turn (``ToolUse-v0``, 1,439 tokens with its nine tools)
    lost its start, the shop's rules included, and trained on what was left."""
    head_chunk_tokens: int = 256
    """Training scores completion tokens through the LM head this many positions at a time (the
    logits recomputed in backward), so a micro-batch never holds all its (positions x vocabulary)
    logits: 256 x 49,152 x 4 bytes = 50 MB for the default model."""
    kv_cache_mb: int = 1024
    """Memory for reusing what the model has read (in-process sampling): a turn's prompt is read
    only from where it leaves the episode's previous prompt and completion, and a group's shared
    prompt once (benchmarks/kv_reuse.py). Entries are dropped when their episode ends; the
    samples are the same with or without it. 0: read every prompt in full."""
    cpu_threads: str = "auto"
    """Torch threads on CPU, for generation and the update alike, fixed when the policy is built
    (:func:`cpu_threads_for`): ``"auto"`` = ``$RUBRICGYM_CPU_THREADS`` or the cores this process
    may use (at most 8), the same on every rerun on one machine, loaded or not; ``"fixed"`` leaves
    torch's default; or a number. A thread count changes sampling log-probs by about 1e-5 and so,
    in time, the samples: it never changes during a run. (Until this wave ``auto`` switched counts
    by measured speed, which made results depend on the machine's load.)"""


@dataclass
class Sample:
    """One generated completion: token ids, their sampling log-probs, and the decoded text."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    truncated: bool
    """Hit ``max_new_tokens`` without an end-of-turn token."""
    meta: dict[str, Any] = field(default_factory=dict)


MAX_AUTO_THREADS = 8
"""``cpu_threads="auto"`` uses at most this many threads (more rarely pays for a small model)."""


def cpu_threads_for(setting: str | int) -> int | None:
    """The torch thread count a run uses, fixed when its policy is built and never changed after:
    a thread count changes float summation order, so log-probs (by ~1e-5), sampled tokens and the
    saved weights. ``"auto"``: ``$RUBRICGYM_CPU_THREADS`` when set (a fan-out worker's share), else
    the cores this process may run on (``os.sched_getaffinity``), at most :data:`MAX_AUTO_THREADS`
    - a property of the machine, not of its load, so a rerun beside busy processes gets the same
    count and the same numbers (only slower). ``"fixed"``: torch's own default (None: left
    alone); a number: that many.

    Examples:
        >>> cpu_threads_for("3"), cpu_threads_for("fixed")
        (3, None)
        >>> cpu_threads_for("auto") == cpu_threads_for("auto")  # the same on every rerun
        True
    """
    import os

    setting = str(setting)
    if setting == "fixed":
        return None
    if setting != "auto":
        count = int(setting)
        if count < 1:
            raise ValueError(f"cpu_threads must be 'auto', 'fixed' or a positive number, got {setting!r}")
        return count
    if os.environ.get("RUBRICGYM_CPU_THREADS"):
        return cpu_threads_for(os.environ["RUBRICGYM_CPU_THREADS"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_AUTO_THREADS))


@dataclass
class TokenScores:
    """What one training forward pass gives: per-token log-probs (right-aligned completions),
    and optionally hidden states and per-position entropy."""

    logprobs: torch.Tensor
    hidden: torch.Tensor | None = None
    entropy: torch.Tensor | None = None


class HeadLogprobs(torch.autograd.Function):
    """Log-probs of target tokens, and their positions' entropies (no gradient), through a frozen
    LM head, a chunk of positions at a time: backward recomputes each chunk's logits, so the
    (positions x vocabulary) logits of a micro-batch are never held at once (the idea of Liger's
    fused linear cross-entropy; exact, at the cost of one more head matmul).

    Examples:
        >>> hidden, head = torch.randn(5, 4, requires_grad=True), torch.randn(7, 4)
        >>> targets = torch.tensor([0, 3, 6, 1, 1])
        >>> chosen, _ = HeadLogprobs.apply(hidden, head, targets, 1.0, 2)
        >>> plain = torch.log_softmax(hidden @ head.t(), -1).gather(-1, targets[:, None]).squeeze(-1)
        >>> bool(torch.allclose(chosen, plain, atol=1e-6))
        True
    """

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature, chunk):
        chosen = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        entropy = torch.empty_like(chosen)
        for start in range(0, hidden.shape[0], chunk):
            logits = (hidden[start:start + chunk] @ weight.t()).float() / temperature
            log_norm = torch.logsumexp(logits, dim=-1)
            chosen[start:start + chunk] = logits.gather(-1, targets[start:start + chunk, None]).squeeze(-1) - log_norm
            log_p = logits - log_norm[:, None]
            entropy[start:start + chunk] = -(log_p.exp() * log_p).sum(-1)
        ctx.save_for_backward(hidden, weight, targets)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.mark_non_differentiable(entropy)
        return chosen, entropy

    @staticmethod
    def backward(ctx, grad_chosen, grad_entropy):
        hidden, weight, targets = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden)
        for start in range(0, hidden.shape[0], ctx.chunk):
            end = start + ctx.chunk
            logits = (hidden[start:end] @ weight.t()).float() / ctx.temperature
            # d log p(t) / d logits = onehot(t) - softmax
            grad_logits = torch.softmax(logits, dim=-1).mul_(-grad_chosen[start:end, None])
            grad_logits.scatter_add_(-1, targets[start:end, None], grad_chosen[start:end, None])
            grad_hidden[start:end] = (grad_logits / ctx.temperature).to(weight.dtype) @ weight
        return grad_hidden, None, None, None, None


def resolve_device(device: str) -> tuple[torch.device, torch.dtype]:
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda"), torch.bfloat16
        return torch.device("cpu"), torch.float32
    dev = torch.device(device)
    return dev, (torch.bfloat16 if dev.type == "cuda" else torch.float32)


def adapter_state(folder: str | Path) -> dict[str, torch.Tensor]:
    """The LoRA weights a checkpoint folder holds (``<folder>/adapter/adapter_model.safetensors``)."""
    from safetensors.torch import load_file

    path = Path(folder) / "adapter" / "adapter_model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} holds no LoRA adapter (expected {path})")
    return load_file(str(path))


class Policy:
    """A causal LM (+ LoRA) that samples with log-probs and scores tokens for training.

    Examples:
        >>> policy = Policy(PolicyConfig(max_new_tokens=16))                         # doctest: +SKIP
        >>> samples = policy.sample([[{"role": "user", "content": "2+2?"}]] * 4)       # doctest: +SKIP
    """

    def __init__(self, config: PolicyConfig | None = None, model: Any = None, tokenizer: Any = None,
                 generator: Any = None):
        self.config = config or PolicyConfig()
        self.generator = generator  # None: transformers generate in-process (see agents/generation.py)
        self._versioning()
        self.device, self.dtype = resolve_device(self.config.device)
        if model is None:
            from rubricgym.models import load_model_and_tokenizer

            model, tokenizer = load_model_and_tokenizer(self.config.model, device="cpu", dtype=self.dtype)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        if self.config.lora_r > 0:
            from peft import LoraConfig, get_peft_model

            lora = LoraConfig(r=self.config.lora_r, lora_alpha=self.config.lora_alpha, lora_dropout=self.config.lora_dropout,
                              target_modules=self.config.lora_target_modules, task_type="CAUSAL_LM")
            from rubricgym.models import peft_wrapping

            with peft_wrapping():
                model = get_peft_model(model, lora)
            if self.config.adapter:
                from peft import set_peft_model_state_dict

                set_peft_model_state_dict(model, adapter_state(self.config.adapter))
        self.model = model.to(self.device, dtype=self.dtype)
        self._set_generation(tokenizer)

    @classmethod
    def wrap(cls, model: Any, tokenizer: Any, config: PolicyConfig | None = None) -> "Policy":
        """Sampling on a model another trainer owns (TRL's): no adapter added, nothing moved or cast.

        Example:
            >>> policy = Policy.wrap(trainer.model, trainer.processing_class)        # doctest: +SKIP
        """
        policy = cls.__new__(cls)
        policy.config = config or PolicyConfig(lora_r=0)
        parameter = next(model.parameters())
        policy.device, policy.dtype = parameter.device, parameter.dtype
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        policy.tokenizer, policy.model, policy.generator = tokenizer, model, None
        policy._versioning()
        policy._set_generation(tokenizer)
        return policy

    def _versioning(self) -> None:
        import threading

        self.version = 0
        """Updates applied to the weights so far (samples record the version they came from)."""
        self.weights_lock = threading.RLock()
        """Held while sampling and while the optimizer changes the weights (off-policy rollouts run
        in another thread: a sample never mixes two versions)."""

    def _set_generation(self, tokenizer: Any) -> None:
        self.cpu_threads = cpu_threads_for(self.config.cpu_threads) if self.device.type == "cpu" else None
        """The torch thread count of this run (None: torch's default), set once here."""
        if self.cpu_threads is not None:
            torch.set_num_threads(self.cpu_threads)
        self.stop_ids = stop_token_ids(tokenizer)
        mb = self.config.kv_cache_mb
        self.prefix_cache = PrefixCache(max_bytes=mb << 20) if mb > 0 else None

    def weights_stamp(self) -> int:
        """Changes whenever any weight changes in place (optimizer steps, loaded checkpoints):
        the prefix cache's entries are only valid under the stamp they were read with."""
        return sum(p._version for p in self.model.parameters())

    def forget(self, samples: Sequence[Sample]) -> None:
        """Drop what the prefix cache holds for these samples' episodes (they ended)."""
        if self.prefix_cache is not None:
            with self.weights_lock:
                for s in samples:
                    self.prefix_cache.forget(s.prompt_ids + s.completion_ids)

    @property
    def has_adapter(self) -> bool:
        return self.config.lora_r > 0

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    # -- prompts --------------------------------------------------------------------------------

    def encode_prompt(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(render_messages(messages), add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        ids = list(ids)
        return ids[-self.config.max_prompt_tokens:]

    def _left_pad(self, sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        return left_pad(sequences, self.tokenizer.pad_token_id, self.device)

    # -- sampling -------------------------------------------------------------------------------

    @torch.no_grad()
    def sample(self, conversations: Sequence[Sequence[dict[str, Any]]], max_new_tokens: int | None = None,
               temperature: float | None = None, greedy: bool = False, seeds: Sequence[int] | None = None) -> list[Sample]:
        """Sample one completion per conversation (one batch), with per-token log-probs; ``seeds``
        (one per conversation) make each completion independent of the rest of the batch."""
        return self.sample_ids([self.encode_prompt(c) for c in conversations], max_new_tokens, temperature, greedy, seeds)

    @torch.no_grad()
    def sample_ids(self, prompts: Sequence[Sequence[int]], max_new_tokens: int | None = None,
                   temperature: float | None = None, greedy: bool = False,
                   seeds: Sequence[int] | None = None) -> list[Sample]:
        """Sample one completion per token prompt (a trainer's own token sequences, e.g. multi-turn
        transcripts in TRL), with per-token log-probs; the model's train/eval mode is restored.
        ``seeds`` (one per prompt) apply to in-process sampling; a server draws its own."""
        if not prompts:
            return []
        prompts = [list(p) for p in prompts]
        max_new_tokens = max_new_tokens or self.config.max_new_tokens
        temperature = temperature if temperature is not None else self.config.temperature
        with self.weights_lock:
            version = self.version
            if self.generator is not None:  # a serving engine samples (vLLM): the model here only trains
                samples = self.generator.generate(self, prompts, max_new_tokens, temperature, greedy)
            else:
                was_training = self.model.training
                try:
                    samples = self._generate(prompts, max_new_tokens, temperature, greedy, seeds)
                finally:
                    self.model.train(was_training)
        for sample in samples:
            sample.meta["version"] = version
        return samples

    def _generate(self, prompts: list[list[int]], max_new_tokens: int, temperature: float, greedy: bool,
                  seeds: Sequence[int] | None = None) -> list[Sample]:
        generated = generate_with_logprobs(self.model, self.tokenizer, prompts, max_new_tokens, temperature,
                                           self.config.top_p, greedy, self.stop_ids, seeds=seeds,
                                           prefix_cache=self.prefix_cache,
                                           stamp=self.weights_stamp() if self.prefix_cache is not None else None)
        return [Sample(prompt, g.completion_ids, g.logprobs, g.text, truncated=not g.finished)
                for prompt, g in zip(prompts, generated)]

    # -- training-time scoring ------------------------------------------------------------------

    def batch_tensors(self, samples: Sequence[Sample], skip: int = 0) -> dict[str, torch.Tensor]:
        """Left-padded prompt+completion ids, attention mask, position ids and the completion mask
        (completions right-aligned); with ``skip``, each row without its first ``skip`` tokens, the
        positions still counted from the sequence's start."""
        ids, mask = self._left_pad([(list(s.prompt_ids) + list(s.completion_ids))[skip:] for s in samples])
        completion_mask = torch.zeros_like(mask, dtype=torch.float32)
        width = ids.shape[1]
        for row, s in enumerate(samples):
            completion_mask[row, width - len(s.completion_ids):] = 1.0
        positions = skip + (mask.cumsum(-1) - 1).clamp(min=0)
        return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "completion_mask": completion_mask}

    def score_tokens(self, batch: dict[str, torch.Tensor], temperature: float | None = None, hidden: bool = False,
                     entropy: bool = False) -> "TokenScores":
        """Log-probs of each token given the ones before it (position t scores token t), and
        optionally the backbone's last hidden states and each position's entropy (no gradient).

        Completions are right-aligned (left padding), so only the last ``completion width``
        positions need logits: the LM head runs on those alone (``logits_to_keep``), which keeps
        the (batch x positions x vocabulary) tensor small. Other positions get 0.
        """
        width = batch["input_ids"].shape[1]
        mask = batch.get("completion_mask")
        # right-aligned completions fill the last (longest completion) columns
        keep = width - 1 if mask is None else min(max(int((mask.sum(0) > 0).sum()), 1), width - 1)
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         position_ids=batch["position_ids"], output_hidden_states=hidden, use_cache=False,
                         logits_to_keep=keep + 1)
        scores = self._scores(out.logits, batch["input_ids"], keep, temperature, entropy)
        scores.hidden = out.hidden_states[-1] if hidden else None
        return scores

    def score_samples(self, samples: Sequence[Sample], temperature: float | None = None, entropy: bool = False,
                      min_shared_tokens: int = MIN_SHARED_TOKENS) -> tuple["TokenScores", torch.Tensor]:
        """:meth:`score_tokens` for samples, with the prefix they all share (a group's prompt)
        read once: its keys and values, computed with gradient, serve every row, so a group of G
        completions costs one prompt instead of G; the LM head runs only on completion positions,
        a chunk at a time (:class:`HeadLogprobs`). Exact: each row's tokens see the same positions
        and predecessors as in :meth:`batch_tensors`' layout.

        Returns the scores and the completion mask, both over the rows' suffixes (after the
        shared prefix), completions right-aligned as :meth:`score_tokens` lays them out. A prefix
        shorter than ``min_shared_tokens`` is not worth its own pass: the rows then hold it all.
        """
        # the suffix keeps at least the prompt's last token, which predicts the first completion token
        shared = common_prefix_length([s.prompt_ids for s in samples]) - 1
        if len(samples) < 2 or shared < min_shared_tokens:
            shared = 0
        rows = self.batch_tensors(samples, skip=shared)
        ids, attention, positions, completion_mask = (rows[k] for k in ("input_ids", "attention_mask", "position_ids",
                                                                         "completion_mask"))
        width = ids.shape[1]
        cache = None
        if shared:
            cache = output_cache(self.model(input_ids=torch.tensor([list(samples[0].prompt_ids[:shared])], device=self.device),
                                            use_cache=True, logits_to_keep=1))  # only its keys and values are needed
            cache.batch_repeat_interleave(len(samples))  # differentiable: the prompt's gradient sums over rows
            attention = torch.cat([torch.ones(len(samples), shared, dtype=attention.dtype, device=self.device),
                                   attention], dim=1)
        keep = max(min(max(len(s.completion_ids) for s in samples), width - 1), 1)
        inputs = dict(input_ids=ids, attention_mask=attention, position_ids=positions, **with_cache(cache),
                      use_cache=cache is not None)
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        head = base.get_output_embeddings()
        if not _plain_frozen_head(base, head):  # a trained, biased or soft-capped head: the model's own logits
            out = self.model(**inputs, logits_to_keep=keep + 1)
            return self._scores(out.logits, ids, keep, temperature, entropy), completion_mask
        # the head runs only where a completion token is scored, a chunk of positions at a time
        hidden = base.get_decoder()(**inputs).last_hidden_state[:, width - keep - 1:-1]
        scored = completion_mask[:, width - keep:].bool()
        temperature = temperature if temperature is not None else self.config.temperature
        chosen, spread = HeadLogprobs.apply(hidden[scored], head.weight, ids[:, width - keep:][scored], temperature,
                                            self.config.head_chunk_tokens)
        logprobs = torch.zeros(scored.shape, dtype=chosen.dtype, device=chosen.device)
        logprobs[scored] = chosen
        scores = TokenScores(F.pad(logprobs, (width - keep, 0)))
        if entropy:
            scores.entropy = F.pad(torch.zeros_like(logprobs).index_put_(torch.nonzero(scored, as_tuple=True), spread),
                                   (width - keep, 0))
        return scores, completion_mask

    def _scores(self, logits: torch.Tensor, input_ids: torch.Tensor, keep: int, temperature: float | None,
                entropy: bool) -> "TokenScores":
        """Log-probs (and entropies) of the last ``keep`` tokens of ``input_ids`` from the logits of
        the ``keep + 1`` positions before them, padded with zeros on the left to the full width."""
        temperature = temperature if temperature is not None else self.config.temperature
        width = input_ids.shape[1]
        logits = logits[:, :-1].float()  # position j predicts token j + 1
        if temperature != 1.0:  # a (rows x positions x vocabulary) copy: only when it changes something
            logits = logits / temperature
        targets = input_ids[:, width - keep:]
        log_norm = torch.logsumexp(logits, dim=-1)
        chosen = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_norm
        scores = TokenScores(F.pad(chosen, (width - keep, 0)))
        if entropy:
            with torch.no_grad():  # row by row: two vocabulary-wide temporaries of one row, not of the batch
                spread = []
                for row, norm in zip(logits, log_norm):
                    log_p = row - norm.unsqueeze(-1)
                    spread.append(-(log_p.exp() * log_p).sum(-1))
                scores.entropy = F.pad(torch.stack(spread), (width - keep, 0))
        return scores

    def token_logprobs(self, batch: dict[str, torch.Tensor], temperature: float | None = None,
                       return_hidden: bool = False):
        """:meth:`score_tokens`' log-probs (and hidden states with ``return_hidden``)."""
        scores = self.score_tokens(batch, temperature, hidden=return_hidden)
        return (scores.logprobs, scores.hidden) if return_hidden else scores.logprobs

    def reference_logprobs(self, batch: dict[str, torch.Tensor] | Sequence[Sample]) -> torch.Tensor:
        """Log-probs under the reference policy: the same weights with the adapter disabled; of a
        :meth:`batch_tensors` batch, or of samples laid out as :meth:`score_samples` lays them."""
        if not self.has_adapter:
            raise ValueError("a reference policy needs a LoRA adapter (lora_r > 0): it is the base model")
        with torch.no_grad(), self.model.disable_adapter():
            return self.token_logprobs(batch) if isinstance(batch, dict) else self.score_samples(batch)[0].logprobs

    def sync_generator(self, step: int) -> dict[str, float]:
        """After an update: make the generation backend sample from the new weights (a server
        loads the adapter); returns its timings for the logs."""
        return self.generator.sync(self, step) if self.generator is not None else {}

    def behaviour_logprobs(self, samples: Sequence[Sample], logprobs: torch.Tensor) -> torch.Tensor:
        """The old policy's log-probs for the clipped ratio: the sampler's own when it was this
        model, the trainer's recomputed ones (``logprobs``, detached) when a server sampled: a
        serving engine's numbers are compared (drift), never trained on."""
        if any(s.meta.get("logprobs_from") == "server" for s in samples):
            return logprobs.detach()
        return self.sampled_logprobs_tensor(samples, logprobs)

    def sampled_logprobs_tensor(self, samples: Sequence[Sample], like: torch.Tensor) -> torch.Tensor:
        """The sampling log-probs laid out like ``token_logprobs`` (right-aligned in the batch)."""
        old = torch.zeros_like(like)
        width = like.shape[1]
        for row, s in enumerate(samples):
            if s.logprobs:
                old[row, width - len(s.logprobs):] = torch.tensor(s.logprobs, dtype=old.dtype)
        return old


def _plain_frozen_head(model: Any, head: Any) -> bool:
    """Whether the logits are exactly ``hidden @ head.weight.T``, with no gradient to the head (what
    :class:`HeadLogprobs` computes): a bias-free linear head outside the adapter, no soft-capping."""
    config = getattr(model, "config", None)
    return (type(head) is torch.nn.Linear and head.bias is None and not head.weight.requires_grad
            and not getattr(config, "final_logit_softcapping", None) and getattr(config, "logit_scale", None) in (None, 1.0)
            and hasattr(model, "get_decoder"))

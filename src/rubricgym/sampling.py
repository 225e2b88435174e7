"""Sampling from a causal LM with the log-probs of the sampled tokens, shared by our policy
(``rubricgym.agents.policy``) and the adapters that sample with another trainer's model
(``rubricgym.integrations.trl``). torch is imported when a function is called.

Examples:
    >>> stop_token_ids(type("T", (), {"eos_token_id": 2, "convert_tokens_to_ids": lambda self, t: 7})())
    [2, 7]
"""

from __future__ import annotations

from functools import lru_cache

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass
class Generated:
    """One sampled completion: its token ids, their log-probs under the sampling distribution,
    its text, and whether it ended on a stop token (False: cut at the token budget)."""

    completion_ids: list[int]
    logprobs: list[float]
    text: str
    finished: bool



@lru_cache(maxsize=1)
def cache_kwarg() -> str:
    """The name transformers' ``forward`` takes (and returns) the KV cache under: ``cache`` from
    5.2x on, ``past_key_values`` before (the old name still works there but warns of its removal)."""
    import dataclasses

    from transformers.modeling_outputs import CausalLMOutputWithPast

    return "cache" if "cache" in {f.name for f in dataclasses.fields(CausalLMOutputWithPast)} else "past_key_values"


def with_cache(cache: Any) -> dict[str, Any]:
    """``{<cache kwarg>: cache}``, to pass to a model's forward under the name its transformers takes."""
    return {cache_kwarg(): cache}


def output_cache(out: Any) -> Any:
    """The KV cache of a model output, read under the name its transformers writes."""
    return getattr(out, cache_kwarg())

def stop_token_ids(tokenizer: Any) -> list[int]:
    """The ids that end a completion: the tokenizer's eos and the chat template's ``<|im_end|>``."""
    return sorted({i for i in (tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>"))
                   if isinstance(i, int) and i >= 0})


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int, device: Any = "cpu"):
    """Left-padded ids and attention mask (generation appends on the right)."""
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, width - len(seq):] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, width - len(seq):] = 1
    return ids.to(device), mask.to(device)


def common_prefix_length(sequences: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every sequence shares.

    Examples:
        >>> common_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]])
        2
        >>> common_prefix_length([[5], [6]])
        0
    """
    first, n = sequences[0], min(len(s) for s in sequences)
    for i in range(n):
        if any(s[i] != first[i] for s in sequences[1:]):
            return i
    return n


class PrefixCache:
    """Key / value states of token sequences the model has already read, so that a prompt that
    extends one of them (the next turn of an episode: the last prompt, the sampled completion, the
    tool's result) or shares its start with one (a group's members, one system prompt) is only
    read from where they part. A lookup takes the stored sequence with the longest common prefix,
    so a re-rendered transcript that tokenizes differently from the sampled ids reuses what
    matches and reads the rest: the result never depends on what was cached, only the cost does.

    Entries are per sequence, copied out of the batch (``[1, kv heads, length, head dim]`` per
    layer), least recently used first out beyond ``max_bytes``; ``stamp`` names the weights they
    were computed with, and a lookup under other weights empties the cache.

    Examples:
        >>> import torch
        >>> cache = PrefixCache(max_bytes=10**6)
        >>> layer = (torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
        >>> cache.store([5, 6, 7], [layer], stamp=0)
        >>> cache.lookup([5, 6, 9, 9], stamp=0)[0]     # reuses the shared [5, 6]
        2
        >>> cache.lookup([5, 6, 7], stamp=0)[0]        # at most all but the last token
        2
        >>> cache.lookup([5, 6, 7, 8], stamp=1)[0]     # other weights: nothing to reuse
        0
    """

    def __init__(self, max_bytes: int = 1 << 30):
        from collections import OrderedDict

        self.max_bytes = max_bytes
        self.entries: "OrderedDict[tuple[int, ...], list]" = OrderedDict()
        self._arrays: dict[tuple[int, ...], Any] = {}  # each key as an array once, not per lookup
        self.bytes = 0
        self.stamp: Any = None
        self.reused_tokens = 0
        """Prompt tokens read from the cache instead of the model (since the last ``clear``)."""
        self.read_tokens = 0
        """Prompt tokens the model read."""

    def _check(self, stamp: Any) -> None:
        if stamp != self.stamp:
            self.clear()
            self.stamp = stamp

    def clear(self) -> None:
        self.entries.clear()
        self._arrays.clear()
        self.bytes = 0

    def lookup(self, prompt: Sequence[int], stamp: Any = None) -> tuple[int, list | None]:
        """(tokens to reuse, the entry's layers): the longest common prefix with a stored
        sequence, at most ``len(prompt) - 1`` (the model must read one token to predict the next)."""
        import numpy as np

        self._check(stamp)
        best, best_key = 0, None
        wanted = np.asarray(prompt, dtype=np.int64)
        for key in self.entries:
            n = min(len(key), len(wanted) - 1)
            if n <= best:
                continue
            differ = np.flatnonzero(self._arrays[key][:n] != wanted[:n])
            common = int(differ[0]) if len(differ) else n
            if common > best:
                best, best_key = common, key
        if best_key is None:
            return 0, None
        self.entries.move_to_end(best_key)
        return best, self.entries[best_key]

    def store(self, tokens: Sequence[int], layers: list, stamp: Any = None) -> None:
        """Keep ``layers`` (one (keys, values) pair per layer, covering ``tokens``); stored
        sequences that ``tokens`` extends are dropped (the new entry holds them)."""
        self._check(stamp)
        key = tuple(int(t) for t in tokens)
        for old in [k for k in self.entries if len(k) <= len(key) and key[:len(k)] == k]:
            self._drop(old)
        import numpy as np

        self.entries[key] = layers
        self._arrays[key] = np.asarray(key, dtype=np.int64)
        self.bytes += sum(k.nbytes + v.nbytes for k, v in layers)
        while self.bytes > self.max_bytes and self.entries:
            self._drop(next(iter(self.entries)))

    def forget(self, tokens: Sequence[int]) -> None:
        """Drop the stored sequences that ``tokens`` starts with (an episode that ended)."""
        key = tuple(int(t) for t in tokens)
        for old in [k for k in self.entries if len(k) <= len(key) and key[:len(k)] == k]:
            self._drop(old)

    def _drop(self, key: tuple[int, ...]) -> None:
        layers = self.entries.pop(key)
        self._arrays.pop(key, None)
        self.bytes -= sum(k.nbytes + v.nbytes for k, v in layers)


def reuses_prefixes(model: Any) -> bool:
    """Whether :class:`PrefixCache` applies: every layer attends to the whole past (no sliding
    window, no recurrent state), so a cached prefix's keys and values are all the model needs."""
    config = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") else model.config
    if getattr(config, "sliding_window", None) or getattr(config, "attention_chunk_size", None):
        return False
    return all(kind == "full_attention" for kind in (getattr(config, "layer_types", None) or ["full_attention"]))


def _read(model: Any, rows: Sequence[tuple[int, list | None]], suffixes: Sequence[Sequence[int]], device: Any):
    """Run the model over each row's unread tokens (``suffixes``) after its cached prefix.

    The batch lays out ``[pad, cached prefix | pad, suffix]``: both parts left-padded, padding
    masked out, positions counted over real tokens only (what ``generate`` does with left padding),
    so each row's numbers are the ones it would get alone. Returns the last position's logits,
    the cache, the attention mask and each row's next position."""
    import torch
    from transformers import DynamicCache

    cached = [n for n, _ in rows]
    width_c, width_s = max(cached), max(len(s) for s in suffixes)
    batch = len(rows)
    mask = torch.zeros((batch, width_c + width_s), dtype=torch.long)
    ids = torch.zeros((batch, width_s), dtype=torch.long)
    positions = torch.zeros((batch, width_s), dtype=torch.long)
    for row, ((n, _), suffix) in enumerate(zip(rows, suffixes)):
        mask[row, width_c - n:width_c] = 1
        mask[row, width_c + width_s - len(suffix):] = 1
        ids[row, width_s - len(suffix):] = torch.tensor(list(suffix), dtype=torch.long)
        positions[row, width_s - len(suffix):] = torch.arange(n, n + len(suffix))
    if width_c:
        layers = []
        template = next(entry for n, entry in rows if entry is not None)
        for layer, (k0, v0) in enumerate(template):
            keys = k0.new_zeros((batch, k0.shape[1], width_c, k0.shape[3]))
            values = v0.new_zeros((batch, v0.shape[1], width_c, v0.shape[3]))
            for row, (n, entry) in enumerate(rows):
                if n:
                    keys[row, :, width_c - n:] = entry[layer][0][0, :, :n]
                    values[row, :, width_c - n:] = entry[layer][1][0, :, :n]
            layers.append((keys, values))
        past = DynamicCache(ddp_cache_data=layers)
    else:
        past = DynamicCache(config=model.config)
    mask, ids, positions = mask.to(device), ids.to(device), positions.to(device)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, **with_cache(past), use_cache=True,
                logits_to_keep=1)
    next_positions = torch.tensor([n + len(s) for (n, _), s in zip(rows, suffixes)], device=device)
    return out.logits[:, -1].float(), output_cache(out), mask, next_positions


def _row_layers(past: Any, row: int, mask: Any) -> list:
    """One row's keys and values over its real (unmasked) positions, copied out of the batch."""
    keep = mask[row].nonzero().squeeze(-1)
    return [(layer.keys[row:row + 1].index_select(2, keep), layer.values[row:row + 1].index_select(2, keep))
            for layer in past.layers]


def _draw(logits: Any, temperature: float, top_p: float | None, greedy: bool, generators: list | None):
    """The next token of each row and its log-prob under the tempered distribution (greedy:
    untempered). ``generators`` (one per row) make a row's draw independent of the batch it is in.

    Sampling is Gumbel-max (the argmax of the scores plus Gumbel noise draws exactly from their
    softmax): a draw only changes when two perturbed scores are within the numerical noise of each
    other, where inverse-CDF sampling over a 49k-token cumulative sum moves the boundaries of every
    tail token at once, so the same seed would pick another rare token after a 1e-5 change in the
    logits (cached against re-read prompts, another batch)."""
    import torch

    scaled = logits if greedy else logits / temperature
    log_probs = torch.log_softmax(scaled, dim=-1)
    if greedy:
        tokens = scaled.argmax(-1)
    else:
        scores = log_probs
        if top_p is not None and top_p < 1.0:  # nucleus: the smallest set of likeliest tokens reaching top_p
            sorted_probs, order = log_probs.exp().sort(-1, descending=True)
            outside = sorted_probs.cumsum(-1) - sorted_probs > top_p
            scores = log_probs.masked_fill(torch.zeros_like(outside).scatter(-1, order, outside), float("-inf"))
        if generators is None:
            uniform = torch.rand(scores.shape)
        else:
            uniform = torch.stack([torch.rand(scores.shape[-1], generator=g) for g in generators])
        gumbel = -torch.log(-torch.log(uniform.clamp(min=1e-20, max=1.0 - 1e-7)))
        tokens = (scores + gumbel.to(scores.device)).argmax(-1)
    return tokens, log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def generate_with_logprobs(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                           temperature: float = 1.0, top_p: float | None = None, greedy: bool = False,
                           stop_ids: Sequence[int] | None = None, seeds: Sequence[int] | None = None,
                           prefix_cache: PrefixCache | None = None, stamp: Any = None) -> list[Generated]:
    """One completion per token prompt, in eval mode (the caller restores training mode); each
    token's log-prob is read from the raw logits scaled by the temperature (greedy: unscaled).

    ``seeds`` (one per prompt) give each row its own random stream, so a completion does not
    depend on which other prompts share its batch; without them the draws come from torch's
    global generator. With a ``prefix_cache`` a prompt is read only from where it leaves the
    cache, prompts repeated in the batch (a group's members) are read once, and each finished
    row's prompt and completion are stored for its next turn (``stamp``: the weights' identity).
    Rows leave the batch as they finish.
    """
    import torch

    stop = set(stop_ids if stop_ids is not None else stop_token_ids(tokenizer))
    device = next(model.parameters()).device
    prompts = [list(p) for p in prompts]
    if prefix_cache is not None and not reuses_prefixes(model):
        prefix_cache = None
    generators = None if seeds is None else [torch.Generator().manual_seed(int(s)) for s in seeds]
    model.eval()
    with torch.no_grad():
        read = 0
        if prefix_cache is not None:  # a prompt several rows share is read once, then found by each
            repeated = sorted({tuple(p) for p in prompts if len(p) > 1 and prompts.count(p) > 1})
            todo = [(prefix_cache.lookup(p, stamp), list(p)) for p in repeated]
            todo = [(hit, p) for hit, p in todo if hit[0] < len(p) - 1]
            if todo:
                _, past, mask, _ = _read(model, [hit for hit, _ in todo], [p[hit[0]:-1] for hit, p in todo], device)
                read += sum(len(p) - 1 - hit[0] for hit, p in todo)
                for row, (_, p) in enumerate(todo):
                    prefix_cache.store(p[:-1], _row_layers(past, row, mask), stamp)
        hits = [prefix_cache.lookup(p, stamp) if prefix_cache is not None else (0, None) for p in prompts]
        if prefix_cache is not None:  # every prompt token is either read by the model or taken from the cache
            read += sum(len(p) - n for p, (n, _) in zip(prompts, hits))
            prefix_cache.read_tokens += read
            prefix_cache.reused_tokens += sum(len(p) for p in prompts) - read
        logits, past, mask, positions = _read(model, hits, [p[n:] for p, (n, _) in zip(prompts, hits)], device)
        completions: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        finished = [False] * len(prompts)
        alive = list(range(len(prompts)))  # batch row -> prompt index
        for step in range(max_new_tokens):
            tokens, token_logprobs = _draw(logits, temperature, top_p, greedy,
                                           None if generators is None else [generators[i] for i in alive])
            keep = []
            for row, (i, token, logprob) in enumerate(zip(alive, tokens.tolist(), token_logprobs.tolist())):
                completions[i].append(token)
                logprobs[i].append(logprob)
                finished[i] = token in stop
                if finished[i] or step == max_new_tokens - 1:
                    if prefix_cache is not None:  # what the model has read: the prompt and all but the last token
                        prefix_cache.store(prompts[i] + completions[i][:-1], _row_layers(past, row, mask), stamp)
                else:
                    keep.append(row)
            if not keep:
                break
            if len(keep) < len(alive):
                index = torch.tensor(keep, device=device)
                past.batch_select_indices(index)
                mask, positions, tokens = mask[index], positions[index], tokens[index]
                alive = [alive[row] for row in keep]
            mask = torch.cat([mask, mask.new_ones((len(alive), 1))], dim=1)
            out = model(input_ids=tokens.unsqueeze(-1), attention_mask=mask, position_ids=positions.unsqueeze(-1),
                        **with_cache(past), use_cache=True)
            past, positions = output_cache(out), positions + 1
            logits = out.logits[:, -1].float()
    return [Generated(c, lp, tokenizer.decode(c, skip_special_tokens=True), f)
            for c, lp, f in zip(completions, logprobs, finished)]

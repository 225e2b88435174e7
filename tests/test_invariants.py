"""Numerics invariants on the tiny model: a 3-step GRPO run with a fixed seed reproduces a stored
trajectory (per-step loss, reward, reward spread, entropy, clipping, and the adapter's weights at
the end), so a change to the loss, the advantages, the sampler or the optimiser shows up in
seconds instead of in a learning curve.

The stored file is ``tests/data/grpo_invariant.json``. When a change is *meant* to move the
numbers (a new default, a fixed bug), regenerate it on purpose and commit it with the reason::

    RUBRICGYM_UPDATE_INVARIANTS=1 python -m pytest tests/test_invariants.py

then read the diff of the JSON: every field that moved should be one the change explains."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from conftest import require

require("peft", "agents")

STORED = Path(__file__).parent / "data" / "grpo_invariant.json"
FIELDS = ("loss", "reward", "group_reward_std", "entropy", "clip_fraction", "approx_kl", "zero_variance_fraction")
# Same machine class, same torch: bit-identical in practice. The tolerance leaves room for another
# BLAS summation order (1e-6 relative moves the loss's 7th digit), not for a changed formula: hand
# edits of the advantage normalisation move these numbers by 1e-2 or more (closing note of #49).
REL, ABS = 1e-4, 1e-6


def variety(messages, info):
    """A reward with spread even for a random model's noise: distinct characters of the reply / 20."""
    return len(set(messages[-1]["content"])) / 20


def run_invariant(tiny_model_path: str, output_dir: Path) -> dict:
    import torch

    import rubricgym  # noqa: F401
    from rubricgym.agents.grpo import GRPOConfig
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer

    config = TrainConfig(env="MathFunction-v0", env_kwargs={"levels": (1,), "fn": variety, "name": "variety", "combine": "replace"},
                         steps=3, group_size=4, groups_per_step=2, eval_tasks=0, checkpoint_every=0, record_groups=0,
                         report_to=(), show_completions=0, output_dir=str(output_dir), seed=0,
                         grpo=GRPOConfig(learning_rate=1e-2, num_iterations=2),
                         policy=PolicyConfig(model=tiny_model_path, max_new_tokens=8, cpu_threads="fixed", lora_r=4))
    trainer = Trainer(config)
    trainer.run(progress=False)
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [{name: row[name] for name in FIELDS} for row in rows if "loss" in row]
    weights = [p.detach().double() for p in trainer.policy.trainable_parameters()]
    trainer.envs.close()
    return {"steps": steps, "adapter_abs_sum": float(sum(w.abs().sum() for w in weights)),
            "adapter_square_sum": float(sum((w * w).sum() for w in weights)), "torch": torch.__version__.split("+")[0]}


def test_three_grpo_steps_reproduce_the_stored_trajectory(tiny_model_path, tmp_path):
    got = run_invariant(tiny_model_path, tmp_path / "run")
    assert len(got["steps"]) == 3 and all(step["zero_variance_fraction"] < 1 for step in got["steps"])  # every step trains
    if os.environ.get("RUBRICGYM_UPDATE_INVARIANTS"):
        STORED.write_text(json.dumps(got, indent=2) + "\n")
    stored = json.loads(STORED.read_text())
    for step, (want, have) in enumerate(zip(stored["steps"], got["steps"])):
        for name in FIELDS:
            assert math.isclose(have[name], want[name], rel_tol=REL, abs_tol=ABS), (
                f"step {step} {name}: {have[name]!r} against the stored {want[name]!r} (torch {got['torch']}, stored with "
                f"{stored['torch']}); if the change is meant, regenerate: see this module's docstring")
    for name in ("adapter_abs_sum", "adapter_square_sum"):
        assert math.isclose(got[name], stored[name], rel_tol=REL), (name, got[name], stored[name])


def test_the_tiny_model_is_built_offline_from_its_seed_alone(tmp_path):
    """Two builds with one seed are byte-identical, another seed differs; the folder loads with the
    default model's tokenizer and chat template, and generates."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubricgym.testing.tiny import TinyModelConfig, tiny_model_dir

    first, second = tiny_model_dir(tmp_path / "a"), tiny_model_dir(tmp_path / "b")
    other = tiny_model_dir(tmp_path / "c", TinyModelConfig(seed=1))
    weights = (first / "model.safetensors").read_bytes()
    assert weights == (second / "model.safetensors").read_bytes() != (other / "model.safetensors").read_bytes()
    model = AutoModelForCausalLM.from_pretrained(first)
    tokenizer = AutoTokenizer.from_pretrained(first)
    assert sum(p.numel() for p in model.parameters()) < 2_000_000 and model.config.num_hidden_layers == 2
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")  # the default model's template
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert out.shape == (1, ids.shape[1] + 3)

#!/usr/bin/env bash
# GPU check for a lent CUDA machine (not run by CI): one GRPO step and one PPO step of a ~0.5B
# model in bf16, printing tokens/s and peak GPU memory. Needs a CUDA torch and the model files:
#   MODEL=/path/to/Qwen2.5-0.5B-Instruct bash benchmarks/gpu_check.sh
# Without MODEL it builds a randomly initialised ~0.5B Qwen2-shaped model (same shapes and cost),
# since the machine has no hub access. TOKENIZER=<folder> names a tokenizer folder to use instead
# of the default model's (the default model's GGUF is too large to carry to a bare machine).
set -euo pipefail
cd "$(dirname "$0")/.."
python - <<'PY'
import os, time, json
import torch, gymnasium as gym
import rubricgym
from rubricgym.agents.policy import Policy, PolicyConfig
from rubricgym.agents.grpo import GRPO, GRPOConfig
from rubricgym.agents.ppo import PPO, PPOConfig
from rubricgym.agents.rollout import collect_rollouts
from rubricgym.models import default_model_dir
from transformers import AutoTokenizer, AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

assert torch.cuda.is_available(), "this check needs a CUDA GPU"
tokenizer = AutoTokenizer.from_pretrained(os.environ.get("TOKENIZER") or os.environ.get("MODEL") or default_model_dir())
if os.environ.get("MODEL"):
    model = AutoModelForCausalLM.from_pretrained(os.environ["MODEL"], dtype=torch.bfloat16)
else:
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                      num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
print("parameters:", sum(p.numel() for p in model.parameters()) / 1e6, "M")
# (algorithm, completions: groups of 8, micro-batch size): the defaults (GRPO 2, PPO 16) were
# measured on the 2-core CPU machine; GRPO at 16 shows what a GPU user should set
for algo, num_envs, micro in (("grpo", 32, 2), ("grpo", 256, 2), ("grpo", 256, 16), ("ppo", 32, 16), ("ppo", 256, 16)):
    torch.cuda.reset_peak_memory_stats()
    policy = Policy(PolicyConfig(device="auto", max_new_tokens=128), model=model, tokenizer=tokenizer)
    trainer = (GRPO(policy, GRPOConfig(micro_batch_size=micro)) if algo == "grpo"
               else PPO(policy, PPOConfig(micro_batch_size=micro)))
    envs = gym.make_vec("Math-v0", num_envs=num_envs, group_size=8, levels=(3,))
    collect_rollouts(gym.make_vec("Math-v0", num_envs=8, group_size=8, levels=(3,)), policy, seed=1)  # warm-up
    torch.cuda.synchronize(); start = time.perf_counter()
    batch = collect_rollouts(envs, policy, seed=0)
    torch.cuda.synchronize(); rollout = time.perf_counter() - start
    # a random model earns one reward for all (GRPO would skip the update): alternate the rewards
    # so that the timed update is a real one over every completion
    for i, turn in enumerate(batch.turns):
        turn.reward = float(i % 2)
    start = time.perf_counter()
    stats = trainer.update(batch)
    torch.cuda.synchronize(); update = time.perf_counter() - start
    tokens = sum(len(t.sample.completion_ids) for t in batch.turns)
    print(json.dumps({"algo": algo, "micro_batch_size": micro, "dtype": str(policy.dtype), "completions": len(batch.turns), "tokens": tokens,
                      "sample_tokens_per_s": round(tokens / rollout, 1), "update_tokens_per_s": round(tokens / update, 1),
                      "rollout_s": round(rollout, 2), "update_s": round(update, 2),
                      "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                      "loss": stats.get("loss"), "trained": stats.get("trained_completions")}), flush=True)
    model = policy.model.unload() if hasattr(policy.model, "unload") else policy.model  # drop the adapter
PY

# TRL + vLLM (colocate) through rubricgym's rollout function: 2 GRPO steps on MathRuler-v0 with
# the in-process judge, tokens/s and step time (needs: pip install -e '.[trl]' vllm).
if python -c "import vllm, trl" 2>/dev/null; then
python - <<'PY'
import os, time, json
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
import torch
from peft import LoraConfig
from trl import GRPOConfig, GRPOTrainer
from transformers import AutoTokenizer, AutoModelForCausalLM
from rubricgym.integrations.trl import EnvRollout, env_reward
from rubricgym.models import default_model_dir

path = os.environ.get("MODEL") or str(default_model_dir())
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
rollout = EnvRollout("MathRuler-v0", levels=(3,))
args = GRPOConfig(output_dir="/tmp/trl-vllm", per_device_train_batch_size=16, num_generations=4, max_completion_length=128,
                  max_steps=2, logging_steps=1, report_to="none", bf16=True, save_strategy="no", use_vllm=True,
                  vllm_mode="colocate", vllm_gpu_memory_utilization=0.3)
trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward, train_dataset=rollout.dataset(64),
                      rollout_func=rollout, args=args, peft_config=LoraConfig(r=16, lora_alpha=32, task_type="CAUSAL_LM",
                                                                              target_modules="all-linear"))
start = time.perf_counter(); trainer.train(); seconds = time.perf_counter() - start
rows = [r for r in trainer.state.log_history if "loss" in r]
print(json.dumps({"check": "trl_vllm_colocate", "steps": len(rows), "seconds": round(seconds, 1),
                  "tokens": rows[-1].get("num_tokens"), "loss": [r["loss"] for r in rows],
                  "ruler": [r.get("rubricgym/reward_components/ruler") for r in rows], "groups": rollout.groups_played}))
PY
else
  echo "skipping the TRL + vLLM check: pip install vllm trl"
fi

# Our trainer (rubricgym train's Trainer, RLVR on Math-v0) with in-process generate, and with
# rollouts from a vLLM server (LoRA loaded after every update) where vllm is installed: tokens/s of
# each, adapter reload seconds, GRPO step time, the drift ratio.
MODEL_DIR="${MODEL:-/tmp/rubricgym-gpu-model}"
if [ -z "${MODEL:-}" ]; then
python - <<'PY'
import os
import torch
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM
from rubricgym.models import default_model_dir
tokenizer = AutoTokenizer.from_pretrained(os.environ.get("TOKENIZER") or default_model_dir())
torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True)
Qwen2ForCausalLM(cfg).to(torch.bfloat16).save_pretrained("/tmp/rubricgym-gpu-model")
tokenizer.save_pretrained("/tmp/rubricgym-gpu-model")
PY
fi
MODES="in-process"
PORT=8011
if python -c "import vllm" 2>/dev/null; then
MODES="in-process vllm-server"
VLLM_ALLOW_RUNTIME_LORA_UPDATING=True python -m vllm.entrypoints.openai.api_server --model "$MODEL_DIR" \
  --served-model-name policy --enable-lora --max-lora-rank 16 --gpu-memory-utilization 0.3 --port $PORT \
  > /tmp/vllm_server.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 180); do curl -sf http://127.0.0.1:$PORT/v1/models >/dev/null && break; sleep 1; done
else
  echo "the vLLM rollout-server check is skipped: pip install vllm"
fi
MODES="$MODES" MODEL_DIR="$MODEL_DIR" PORT=$PORT python - <<'PY'
import json, os, time
import torch
from rubricgym.agents.policy import PolicyConfig
from rubricgym.agents.train import TrainConfig, Trainer
for mode in os.environ["MODES"].split():
    config = TrainConfig(env="Math-v0", env_kwargs={"levels": (3,)}, steps=3, group_size=8, groups_per_step=8,
                         eval_tasks=0, checkpoint_every=0, record_groups=0, report_to=(), show_completions=0,
                         output_dir=f"/tmp/rubricgym-gpu-{mode}",
                         rollout_server=f"http://127.0.0.1:{os.environ['PORT']}/v1" if mode == "vllm-server" else None,
                         policy=PolicyConfig(model=os.environ["MODEL_DIR"], max_new_tokens=128))
    trainer = Trainer(config)
    rows = []
    for _ in range(3):
        torch.cuda.synchronize(); start = time.perf_counter()
        stats = trainer.train_step()
        torch.cuda.synchronize(); stats["wall_s"] = time.perf_counter() - start
        rows.append(stats)
    last = rows[1:]  # the first step pays warm-up
    print(json.dumps({"check": "rollouts", "mode": mode,
                      "sample_tokens_per_s": round(sum(r["completion_tokens"] for r in last) / sum(r["rollout_seconds"] for r in last), 1),
                      "step_s": round(sum(r["wall_s"] for r in last) / len(last), 2),
                      "adapter_reload_s": [round(r.get("adapter_reload_seconds", 0.0), 2) for r in rows],
                      "rollout_ratio_mean": [r.get("rollout_ratio_mean") for r in rows]}))
    del trainer
    torch.cuda.empty_cache()
PY
[ -n "${SERVER:-}" ] && kill $SERVER 2>/dev/null || true

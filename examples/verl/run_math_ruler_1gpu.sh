#!/usr/bin/env bash
# GRPO with verl on one GPU: MathRuler-v0 (verified outcome + RULER group judge), LoRA on a 0.5B
# model, vLLM rollouts. Every uid group is judged whole by GroupJudgedAgentLoopManager.
# Needs: pip install -e '.[verl,llm]' plus vllm on a CUDA machine; JUDGE is any LiteLLM model
# string (or "local" for the in-process plumbing judge).
set -euo pipefail
cd "$(dirname "$0")"
MODEL=${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
python - <<'PY'
from rubricgym.integrations.verl import write_dataset
write_dataset("train.parquet", "MathRuler-v0", num_tasks=2000, levels=(1, 2, 3), split="train")
write_dataset("val.parquet", "Math-v0", num_tasks=200, levels=(1, 2, 3), split="test")
PY
python -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  data.train_files=train.parquet data.val_files=val.parquet \
  data.train_batch_size=32 data.max_prompt_length=512 data.max_response_length=256 data.return_raw_chat=True \
  actor_rollout_ref.model.path="$MODEL" actor_rollout_ref.model.lora_rank=16 actor_rollout_ref.model.lora_alpha=32 \
  actor_rollout_ref.actor.optim.lr=1e-5 actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 actor_rollout_ref.actor.use_kl_loss=False \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.rollout.agent.default_agent_loop=rubricgym_env \
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$PWD/agent_loops.yaml" \
  actor_rollout_ref.rollout.agent.agent_loop_manager_class=rubricgym.integrations.verl.GroupJudgedAgentLoopManager \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
  trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.total_epochs=1 trainer.logger='["console"]' \
  trainer.project_name=rubricgym trainer.experiment_name=math_ruler_verl "$@"

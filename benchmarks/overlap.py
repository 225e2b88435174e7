"""Judging overlapped with generation: GRPO steps with a RULER judge that takes 1 s per call.

The judge is an OpenAI-compatible server on loopback (rubricgym.testing.loopback) that waits
``--latency`` seconds per call and then scores each trajectory from a hash of its text (so the
same trajectories always get the same scores). The agent (default model + LoRA, CPU) trains on
``MathRuler-v0`` with each step's groups played in waves (``rollout_waves``, one group each); with
``overlap_judging`` a wave's judge call runs while the next wave generates, without it the same
waves run one after the other. Same seeds, same steps: the rewards must be identical, and the
step time ratio (on / off) is the figure.

    python benchmarks/overlap.py            # 8 groups x 2, 8 tokens, 3 steps each way

The ratio depends on how long a wave generates against how long the judge takes: here a wave is
short (one group of 2, 8 tokens, about 0.3 s on one CPU thread) against 1 s of judge latency, as
with a GPU policy and an API judge. Generation uses one torch thread in both modes: on 2 cores,
OpenMP's spinning threads stall whenever the judging thread takes a core.

Ends with ``RESULT step_time_ratio=<on/off> identical_rewards=<true|false>`` (target <= 0.7).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import time
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

RESULTS = results_dir(__file__)
BLOCK = re.compile(r'<trajectory id="(t\d+)">\n(.*?)\n</trajectory>', re.DOTALL)


def ruler_reply(body: dict) -> str:
    """RULER's JSON reply: a score per trajectory id from a hash of the trajectory's text."""
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    scores = [{"trajectory_id": tid, "explanation": "scored by hash",
               "score": int(hashlib.sha256(text.encode()).hexdigest()[:4], 16) / 0xFFFF}
              for tid, text in BLOCK.findall(prompt)]
    return json.dumps({"scores": scores})


def run(overlap: bool, args, judge_url: str) -> tuple[list[float], list[list[float]]]:
    """Step seconds and each step's episode rewards."""
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer
    from rubricgym.llm import LLMConfig, make_llm

    judge = make_llm("openai/judge", api_base=judge_url, config=LLMConfig(cache_dir=None, timeout_s=60))
    config = TrainConfig(env="MathRuler-v0", env_kwargs={"levels": (1,), "judge": judge, "combine": "replace"},
                         steps=args.steps, group_size=args.group_size, groups_per_step=args.groups,
                         rollout_waves=args.groups, overlap_judging=overlap, eval_tasks=0, checkpoint_every=0,
                         record_groups=0, report_to=(), show_completions=0, seed=0,
                         output_dir=f"/tmp/rubricgym-overlap/{'on' if overlap else 'off'}",
                         policy=PolicyConfig(max_new_tokens=args.max_new_tokens, cpu_threads=args.threads))
    trainer = Trainer(config)
    seconds, rewards = [], []
    for _ in range(args.steps):
        started = time.perf_counter()
        trainer.train_step()
        seconds.append(time.perf_counter() - started)
        rewards.append([round(t.reward, 9) for t in trainer.last_batch.turns])
    trainer.envs.close()
    return seconds, rewards


def main() -> None:
    from rubricgym.testing.loopback import LoopbackServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--groups", type=int, default=8, help="groups per step (one wave each)")
    parser.add_argument("--group-size", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--threads", default="1",
                        help="torch threads for generation (1: a judge thread's work does not stall OpenMP's spinning threads)")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per judge call")
    add_smoke_flag(parser, steps=1, groups=2, group_size=2, max_new_tokens=4, latency=0.1)
    args = parser.parse_args()
    with LoopbackServer(chat=ruler_reply, latency_s=args.latency) as server:
        run(False, argparse.Namespace(**{**vars(args), "steps": 1}), server.base)  # warm-up: model load, LiteLLM import
        calls_before = len(server.requests)
        off_seconds, off_rewards = run(False, args, server.base)
        on_seconds, on_rewards = run(True, args, server.base)
        calls = len(server.requests) - calls_before
    ratio = sum(on_seconds) / sum(off_seconds)
    identical = off_rewards == on_rewards
    print(f"overlap off: {[round(s, 1) for s in off_seconds]} s per step; on: {[round(s, 1) for s in on_seconds]} s; "
          f"{calls} judge calls at {args.latency:.1f} s each")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "overlap.json").write_text(json.dumps({"args": vars(args), "off_seconds": off_seconds,
                                                      "on_seconds": on_seconds, "identical_rewards": identical,
                                                      "step_time_ratio": ratio, "judge_calls": calls}, indent=1))
    print(f"RESULT step_time_ratio={ratio:.3f} identical_rewards={str(identical).lower()}")


if __name__ == "__main__":
    main()

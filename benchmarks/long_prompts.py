"""What a group's shared prompt costs on CPU, read once or once per member (#52): the shop's first
turn (`ToolUse-v0`, system prompt, tools and task: ~1,400 tokens) for a group of ``--group-size``.

Two parts of a GRPO step, each in its own process (so its peak memory is its own), shared and
not, in the order shared, per-member, per-member, shared (the machine drifts):

- ``sample``: ``--new-tokens`` tokens for every member (``Policy.sample``), with the prefix cache
  (the group's prompt read once, its keys and values copied to every row) and without
  (``kv_cache_mb=0``: every row reads the whole prompt, under a padding mask);
- ``score``: the update's forward and backward over the samples (``Policy.score_samples``), with the
  shared prefix read once and with every row read whole (``min_shared_tokens`` past the prompt).

Exactness: both ways sample the same tokens and score the same log-probs (checked here on the real
model; tests/test_agents_real_model.py checks sampling too). Tokens per second counts the tokens
the step works on (prompt + completion, every row), not the ones read.

    python benchmarks/long_prompts.py                 # default model, group of 8, 32 new tokens
    python benchmarks/long_prompts.py --smoke

Ends with ``RESULT sample_speedup=<per-member s / shared s> sample_peak_mb=<shared>/<per-member>
score_speedup=<...> score_peak_mb=<shared>/<per-member> prompt_tokens=<n> same_tokens=<bool>
max_logprob_diff=<d>``, and writes ``benchmarks/results/long_prompts.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402
from rubricgym.app.provenance import provenance  # noqa: E402

WAYS = ("shared", "per_member")


def measure(part: str, way: str, group_size: int, new_tokens: int, model: str | None) -> dict:
    """In this process: one part, one way; its seconds, tokens, peak memory and what it produced."""
    import gymnasium as gym
    import torch

    import rubricgym  # noqa: F401
    from rubricgym.agents.policy import Policy, PolicyConfig

    torch.manual_seed(0)
    config = PolicyConfig(max_new_tokens=new_tokens, device="cpu", cpu_threads="fixed",
                          kv_cache_mb=0 if (part, way) == ("sample", "per_member") else 256, **({"model": model} if model else {}))
    policy = Policy(config)
    env = gym.make("ToolUse-v0")
    warm_up, _ = env.reset(seed=1)  # another task: first calls pay for lazy set-up, not for the way measured
    messages, _ = env.reset(seed=0)
    conversations = [list(messages)] * group_size
    seeds = list(range(100, 100 + group_size))
    policy.sample([list(warm_up)] * group_size, max_new_tokens=2, seeds=seeds)
    samples = policy.sample(conversations, seeds=seeds) if part == "score" else None
    if part == "score":
        policy.model.train()
        warm_samples = policy.sample([list(warm_up)] * group_size, seeds=seeds)
        scores, mask = policy.score_samples(warm_samples, min_shared_tokens=32 if way == "shared" else 10**9)
        (scores.logprobs * mask).sum().backward()
        policy.model.zero_grad(set_to_none=True)
    if policy.prefix_cache is not None:
        policy.prefix_cache.clear()  # nothing of the measured prompt read before it is timed
    started = time.perf_counter()
    if part == "sample":
        samples = policy.sample(conversations, seeds=seeds)
        logprobs = [list(s.logprobs) for s in samples]
    else:
        scores, mask = policy.score_samples(samples, min_shared_tokens=32 if way == "shared" else 10**9)
        (scores.logprobs * mask).sum().backward()
        # each row's completion log-probs, right-aligned as score_samples lays them out
        logprobs = [scores.logprobs[row][mask[row].bool()].tolist() for row in range(len(samples))]
    seconds = time.perf_counter() - started
    tokens = sum(len(s.prompt_ids) + len(s.completion_ids) for s in samples)
    return {"part": part, "way": way, "seconds": seconds, "tokens_per_s": tokens / seconds,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "prompt_tokens": len(samples[0].prompt_ids), "completions": [list(s.completion_ids) for s in samples],
            "logprobs": logprobs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--model", default="", help="a model folder or hub id (default: the policy's default model)")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)  # part:way, measured in this process
    add_smoke_flag(parser, group_size=2, new_tokens=4)
    args = parser.parse_args()
    if args.one:
        part, way = args.one.split(":")
        print(json.dumps(measure(part, way, args.group_size, args.new_tokens, args.model or None)))
        return
    if args.smoke and not args.model:  # the plumbing on the tiny test model (seconds)
        from rubricgym.testing.tiny import tiny_model_dir

        args.model = str(tiny_model_dir())
    runs: dict[tuple[str, str], list[dict]] = {}
    for part in ("sample", "score"):
        for way in ("shared", "per_member", "per_member", "shared"):
            command = [sys.executable, __file__, "--one", f"{part}:{way}", "--group-size", str(args.group_size),
                       "--new-tokens", str(args.new_tokens), *(["--model", args.model] if args.model else [])]
            if any(r.get("killed") for r in runs.get((part, way), [])):
                continue  # killed once (out of memory): not tried again
            done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
            if done.returncode == -9:  # the kernel's out-of-memory killer: a result, not a failure
                runs.setdefault((part, way), []).append({"killed": True})
                print(f"{part:>6} {way:>10}: killed (out of memory)", flush=True)
                continue
            if done.returncode != 0:
                raise SystemExit(f"{part}:{way} failed:\n{done.stderr[-3000:]}")
            run = json.loads(done.stdout.strip().splitlines()[-1])
            runs.setdefault((part, way), []).append(run)
            print(f"{part:>6} {way:>10}: {run['seconds']:.2f} s, {run['tokens_per_s']:,.0f} tokens/s, peak {run['peak_mb']:,.0f} MB",
                  flush=True)
    summary = {}
    for part in ("sample", "score"):
        done = {way: [r for r in runs[(part, way)] if not r.get("killed")] for way in WAYS}
        seconds = {way: sum(r["seconds"] for r in done[way]) / len(done[way]) if done[way] else None for way in WAYS}
        summary[part] = {"seconds": seconds, "killed": {way: len(done[way]) < len(runs[(part, way)]) for way in WAYS},
                         "peak_mb": {way: max((r["peak_mb"] for r in done[way]), default=None) for way in WAYS},
                         "speedup": seconds["per_member"] / seconds["shared"] if None not in seconds.values() else None}
    first = {way: runs[("sample", way)][0] for way in WAYS}
    same_tokens = first["shared"]["completions"] == first["per_member"]["completions"]
    diffs = [abs(a - b) for part in ("sample", "score") if not any(r.get("killed") for w in WAYS for r in runs[(part, w)])
             for x, y in zip(runs[(part, "shared")][0]["logprobs"], runs[(part, "per_member")][0]["logprobs"])
             for a, b in zip(x, y)]
    max_diff = max(diffs) if diffs else 0.0
    prompt_tokens = first["shared"]["prompt_tokens"]
    folder = results_dir(__file__)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "long_prompts.json").write_text(json.dumps({
        "summary": summary, "prompt_tokens": prompt_tokens, "same_tokens": same_tokens, "max_logprob_diff": max_diff,
        "runs": {f"{p}:{w}": [{k: v for k, v in r.items() if k not in ("completions", "logprobs")} for r in rs]
                 for (p, w), rs in runs.items()},
        "provenance": provenance({"benchmark": "long_prompts", **vars(args)})}, indent=1))
    def shown(value, form: str) -> str:
        return "killed" if value is None else format(value, form)

    s, c = summary["sample"], summary["score"]
    print(f"RESULT sample_speedup={shown(s['speedup'], '.2f')} "
          f"sample_peak_mb={shown(s['peak_mb']['shared'], '.0f')}/{shown(s['peak_mb']['per_member'], '.0f')} "
          f"score_speedup={shown(c['speedup'], '.2f')} "
          f"score_peak_mb={shown(c['peak_mb']['shared'], '.0f')}/{shown(c['peak_mb']['per_member'], '.0f')} "
          f"prompt_tokens={prompt_tokens} group_size={args.group_size} same_tokens={str(same_tokens).lower()} "
          f"max_logprob_diff={max_diff:.1e}")

if __name__ == "__main__":
    main()

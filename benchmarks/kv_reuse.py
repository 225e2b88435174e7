"""Multi-turn rollouts with the calculator: what reusing the KV cache and batching across turns save.

The policy (default model + LoRA, CPU) first gets the warm start that makes it call the
calculator (``--warm-start scripted:calculator``, 4 SFT steps), then plays the same Math-v0
level-3 groups with tools three ways, side by side in this one process, ``--rounds`` times in
alternation:

- ``plain``: the groups in waves one after the other, every prompt read in full each turn
  (no prefix cache): how the rollout worked before;
- ``kv``: the same waves with the prefix cache (a group's shared prompt read once, each turn read
  from where the previous turn ended);
- ``kv_batched``: the cache, and the waves in threads (``--concurrency`` at a time) whose members
  are sampled in one batch per model call whatever turn each is at.

Every member's turn is sampled from its own seed, so all three must produce the same completions
(checked: ``same_samples``); only the time differs.

    python benchmarks/kv_reuse.py [--groups 4] [--group-size 8] [--rounds 1]

Ends with ``RESULT kv_speedup=<plain/kv> batched_speedup=<plain/kv_batched> same_samples=<true|false>
reused_share=<cached prompt tokens / all prompt tokens> turns_per_episode=<t>``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

RESULTS = results_dir(__file__)
MODES = ("plain", "kv", "kv_batched")


def play(trainer, mode: str, seed: int, concurrency: int) -> tuple[float, list, dict]:
    """One step's rollouts in ``mode``: seconds, every turn's completion ids, cache counters."""
    from rubricgym.agents.rollout import collect_waves
    from rubricgym.sampling import PrefixCache

    policy = trainer.policy
    policy.prefix_cache = None if mode == "plain" else PrefixCache(max_bytes=policy.config.kv_cache_mb << 20)
    started = time.perf_counter()
    batch = collect_waves(trainer.envs, policy, seed, overlap=mode == "kv_batched", concurrency=concurrency)
    seconds = time.perf_counter() - started
    cache = policy.prefix_cache
    counters = {"reused": cache.reused_tokens if cache else 0, "read": cache.read_tokens if cache else 0,
                "turns": len(batch.turns), "episodes": len(batch.episode_rewards),
                "calls": len(batch.generation_batches), "tool_turns": sum("<tool_call>" in t.sample.text for t in batch.turns)}
    key = sorted((t.group, t.env_index, tuple(t.sample.prompt_ids), tuple(t.sample.completion_ids)) for t in batch.turns)
    return seconds, key, counters


def plot(times: dict[str, list[float]], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    medians = [statistics.median(times[m]) for m in MODES]
    ax.bar(MODES, medians, color=["#999999", "#4c72b0", "#55a868"])
    for x, value in enumerate(medians):
        ax.text(x, value, f"{value:.1f} s", ha="center", va="bottom")
    ax.set_ylim(0, max(medians) * 1.15)
    ax.set_ylabel("seconds per step's rollouts (median)")
    ax.set_title("Math-v0 L3 with the calculator: the same samples, three ways")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4, help="groups per step, one wave each")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=2, help="waves in flight at once in kv_batched")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of the three modes")
    parser.add_argument("--warm-start-steps", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--level", type=int, default=3)
    add_smoke_flag(parser, argv, groups=2, group_size=2, warm_start_steps=1, max_new_tokens=8, concurrency=1)
    args = parser.parse_args(argv)

    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer

    config = TrainConfig(env="Math-v0", env_kwargs={"levels": [args.level], "tools": ["calculator"]},
                         group_size=args.group_size, groups_per_step=args.groups, rollout_waves=args.groups,
                         warm_start="scripted:calculator", warm_start_steps=args.warm_start_steps,
                         eval_tasks=0, checkpoint_every=0, record_groups=0, report_to=(), show_completions=0,
                         seed=0, output_dir="/tmp/rubricgym-kv-reuse",
                         policy=PolicyConfig(max_new_tokens=args.max_new_tokens, cpu_threads="fixed"))
    trainer = Trainer(config)
    print(json.dumps(trainer.warm_start()), flush=True)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    keys, counters = {}, {}
    for round_ in range(args.rounds):
        for mode in (MODES if round_ % 2 == 0 else MODES[::-1]):
            seconds, key, counted = play(trainer, mode, seed=1000 + round_, concurrency=args.concurrency)
            times[mode].append(seconds)
            keys.setdefault(round_, {})[mode] = key
            counters[mode] = counted
            print(f"round {round_} {mode}: {seconds:.1f} s {counted}", flush=True)
    same = all(len({tuple(map(str, by_mode[m])) for m in MODES}) == 1 for by_mode in keys.values())
    median = {m: statistics.median(times[m]) for m in MODES}
    kv = counters["kv"]
    result = {"kv_speedup": median["plain"] / median["kv"], "batched_speedup": median["plain"] / median["kv_batched"],
              "same_samples": same, "reused_share": kv["reused"] / max(kv["reused"] + kv["read"], 1),
              "turns_per_episode": kv["turns"] / max(kv["episodes"], 1),
              "calls_batched": counters["kv_batched"]["calls"], "seconds": median, "counters": counters,
              "groups": args.groups, "group_size": args.group_size, "concurrency": args.concurrency, "rounds": args.rounds}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "kv_reuse.json").write_text(json.dumps(result, indent=2))
    plot(times, RESULTS / "kv_reuse.png")
    print(f"RESULT kv_speedup={result['kv_speedup']:.2f} batched_speedup={result['batched_speedup']:.2f} "
          f"same_samples={str(same).lower()} reused_share={result['reused_share']:.2f} "
          f"turns_per_episode={result['turns_per_episode']:.2f}")
    trainer.envs.close()
    return result


if __name__ == "__main__":
    main()

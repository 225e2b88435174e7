"""Judge agreement with verifiable correctness on math groups (RULER scores and rubric scores).

Rollouts: the default model (SmolLM2-135M-Instruct, in-process, temperature 1.0) answers
built-in and ../shared/data GSM8K problems through the group vector env of ``Math-v0``;
correctness comes from the env's verified outcome. Each group is then judged by RULER with the
configured judge, and the pairwise accuracy is the fraction of (correct, incorrect) pairs in
the same group where the correct rollout scored higher (ties count one half), as RewardBench
reports it. Groups where every rollout is right, or every one wrong, have no pairs.

    python benchmarks/judge_agreement.py [--judge local | --judge openai/<name> --api-base URL]
        [--groups 12] [--group-size 4]

Rubric scores: the same judge writes ``--rubrics`` rubrics per group (fixed-LLM rubricator) and
verifies every item on every rollout; the chain-of-thought reward is scored the same way
(pairwise), and the valid fraction and mean correlation of valid items are reported. A table is
written to benchmarks/results/judge_quality.md.

Ends with ``RESULT pairwise_accuracy=<x> judge=<name>``.
"""

from __future__ import annotations

import argparse
import asyncio
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym  # noqa: E402
from tqdm import tqdm  # noqa: E402

import rubricgym  # noqa: E402,F401
from rubricgym.data import shared_data_dir  # noqa: E402
from rubricgym.llm import LLMConfig, make_llm  # noqa: E402
from rubricgym.wrappers.rubrics import RubricConfig, _RubricScorer, trajectory_record  # noqa: E402
from rubricgym.wrappers.ruler import RulerConfig, ruler_score  # noqa: E402


def pairwise_accuracy(scores: list[float], correct: list[bool]) -> tuple[float, int]:
    """Sum of wins (ties 0.5) and number of (correct, incorrect) pairs."""
    wins, pairs = 0.0, 0
    for i, ci in enumerate(correct):
        for j, cj in enumerate(correct):
            if ci and not cj:
                pairs += 1
                wins += 1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0
    return wins, pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", default="local")
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--groups", type=int, default=16, help="groups of built-in single-digit sums")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--gsm8k-groups", type=int, default=4, help="groups from ../shared/data GSM8K (0 to skip)")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rubrics", type=int, default=2, help="rubrics per group for the rubric-score part (0 skips it)")
    args = parser.parse_args()

    policy = make_llm("local", config=LLMConfig(cache_dir=None, temperature=1.0, max_tokens=args.max_tokens))
    judge = make_llm(args.judge, api_base=args.api_base, config=LLMConfig(timeout_s=300, max_retries=1))
    datasets = [("generated", {"levels": (1,), "split": "test"})]
    if shared_data_dir() is not None and args.gsm8k_groups:
        datasets.append(("gsm8k", {}))

    total_wins, total_pairs, failed_groups, mixed_groups, all_correct = 0.0, 0, 0, 0, []
    rubric_wins, rubric_pairs, rubric_stats = 0.0, 0, []
    scorer = _RubricScorer(RubricConfig(rubricator=judge, verifier=judge, rubrics_per_group=args.rubrics)) if args.rubrics else None
    for name, kwargs in datasets:
        envs = gym.make_vec("Math-v0", num_envs=args.group_size, group_size=args.group_size, dataset=name, **kwargs)
        count = args.groups if name == "generated" else args.gsm8k_groups
        for g in tqdm(range(count), desc=f"{name} groups"):
            obs, info = envs.reset(seed=args.seed + 1000 * g)
            replies = [asyncio.run(policy.complete(list(o), use_cache=False)).text for o in obs]
            _, rewards, terminated, _, info = envs.step(replies)
            correct = [bool(c) for c in info["correct"]]
            all_correct.extend(correct)
            if all(correct) or not any(correct):
                continue
            mixed_groups += 1
            trajectories = [t.messages for t in info["trajectory"]]
            result = asyncio.run(ruler_score(trajectories, judge, RulerConfig(max_tokens=512)))
            if result.failed:
                failed_groups += 1
            else:
                wins, pairs = pairwise_accuracy(result.scores, correct)
                total_wins += wins
                total_pairs += pairs
            if scorer is not None:
                members = [trajectory_record(t) for t in info["trajectory"]]
                rubric_result, _, _ = asyncio.run(scorer.score(f"{name}-{g}", members))
                wins, pairs = pairwise_accuracy(list(rubric_result.cot_rewards), correct)
                rubric_wins += wins
                rubric_pairs += pairs
                rubric_stats.append(rubric_result.stats)
        envs.close()
    accuracy = total_wins / total_pairs if total_pairs else float("nan")
    rubric_accuracy = rubric_wins / rubric_pairs if rubric_pairs else float("nan")
    valid_fraction = sum(s["valid_fraction"] for s in rubric_stats) / len(rubric_stats) if rubric_stats else float("nan")
    with_valid = [s["mean_valid_corr"] for s in rubric_stats if s["valid_fraction"] > 0]
    mean_corr = sum(with_valid) / len(with_valid) if with_valid else float("nan")
    format_rate = sum(s["format_rate"] for s in rubric_stats) / len(rubric_stats) if rubric_stats else float("nan")
    print(f"rollouts={len(all_correct)} policy_accuracy={sum(all_correct) / len(all_correct):.3f} "
          f"mixed_groups={mixed_groups} judge_failures={failed_groups} pairs={total_pairs}")
    print(f"rubric scores: pairwise_accuracy={rubric_accuracy:.3f} pairs={rubric_pairs} valid_fraction={valid_fraction:.3f} "
          f"mean_valid_corr={mean_corr:.3f} rubric_format_rate={format_rate:.3f}")
    from pathlib import Path
    import sys

    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / "judge_quality.md").write_text(
        f"Command: `python benchmarks/judge_agreement.py {' '.join(sys.argv[1:])}`\n\n"
        f"Rollouts: {len(all_correct)} by the default model (accuracy {sum(all_correct) / len(all_correct):.3f}); "
        f"{mixed_groups} groups mix right and wrong answers.\n\n"
        "| judge | score | pairwise accuracy | pairs | judge failures | rubric valid fraction | mean valid corr | rubric format rate |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        f"| {judge.name} | RULER | {accuracy:.3f} | {total_pairs} | {failed_groups} | | | |\n"
        f"| {judge.name} | rubric CoT reward | {rubric_accuracy:.3f} | {rubric_pairs} | | {valid_fraction:.3f} | {mean_corr:.3f} | {format_rate:.3f} |\n")
    print(f"judge usage: calls={judge.usage.calls} prompt_tokens={judge.usage.prompt_tokens} "
          f"completion_tokens={judge.usage.completion_tokens}")
    print(f"RESULT pairwise_accuracy={accuracy:.3f} judge={judge.name}")


if __name__ == "__main__":
    main()

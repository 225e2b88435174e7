"""Judge quality: RULER scores and rubric scores against known correctness, per judge.

Groups with known correctness:

* math: the default model (SmolLM2-135M-Instruct, in-process, temperature 1.0) answers
  built-in problems and ../shared/data GSM8K problems through the group vector env of
  ``Math-v0``; correctness is the env's verified outcome. The rollouts are made once and every
  judge scores the same groups.
* refund: the refund example of ../shared/examples/refund_group.json under its strict system
  prompt, four answers whose order is published (faithful > verbose > hallucinating >
  off-context): six ordered pairs.

Pairwise accuracy is the fraction of (better, worse) pairs in the same group where the better
one scored higher, ties counting one half, as RewardBench reports it; groups where every rollout
is right, or every one wrong, have no pairs. A judge that fails a group (no valid reply after
the fix requests) is counted as a failure and its pairs are left out. A seeded random scorer is
the chance line (0.5 expected).

Rubric scores (math only): the judge writes ``--rubrics`` rubrics per mixed group (fixed-LLM
rubricator) and verifies every item on every rollout; the chain-of-thought reward is scored the
same way (pairwise), with the valid fraction and mean correlation of valid items.

    python benchmarks/judge_agreement.py --judges local,openai/smollm2 --api-base http://127.0.0.1:8765/v1

``--api-base`` applies to every judge that is not ``local``. Writes
benchmarks/results/judge_quality.md and ends with
``RESULT judges=<n> <judge>:ruler=<x> ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym  # noqa: E402
from tqdm import tqdm  # noqa: E402

import rubricgym  # noqa: E402,F401
from rubricgym.testing.examples import load_refund_group  # noqa: E402
from rubricgym.data import shared_data_dir  # noqa: E402
from rubricgym.llm import LLMConfig, make_llm  # noqa: E402
from rubricgym.judges import Member  # noqa: E402
from rubricgym.judges.rlcer import RubricConfig, RubricScorer  # noqa: E402
from rubricgym.judges.ruler import RulerConfig, ruler_score  # noqa: E402
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

RESULTS = results_dir(__file__)


def pairwise_accuracy(scores: list[float], quality: list[float]) -> tuple[float, int]:
    """Sum of wins (ties 0.5) and number of pairs where one member's known quality is higher."""
    wins, pairs = 0.0, 0
    for i, qi in enumerate(quality):
        for j, qj in enumerate(quality):
            if qi > qj:
                pairs += 1
                wins += 1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0
    return wins, pairs


class Tally:
    """Wins, pairs and failed groups of one (judge, score) cell."""

    def __init__(self) -> None:
        self.wins, self.pairs, self.failures, self.groups = 0.0, 0, 0, 0

    def add(self, scores: list[float] | None, quality: list[float]) -> None:
        self.groups += 1
        if scores is None:
            self.failures += 1
            return
        wins, pairs = pairwise_accuracy(scores, quality)
        self.wins += wins
        self.pairs += pairs

    @property
    def accuracy(self) -> float:
        return self.wins / self.pairs if self.pairs else float("nan")


def math_groups(args) -> tuple[list[dict], float]:
    """Groups of rollouts by the default model with verified correctness (made once, shared by every judge)."""
    policy = make_llm("local", config=LLMConfig(cache_dir=None, temperature=1.0, max_tokens=args.max_tokens))
    datasets = [("generated", {"levels": (1,), "split": "test"}, args.groups)]
    if shared_data_dir() is not None and args.gsm8k_groups:
        datasets.append(("gsm8k", {}, args.gsm8k_groups))
    groups, all_correct = [], []
    for name, kwargs, count in datasets:
        envs = gym.make_vec("Math-v0", num_envs=args.group_size, group_size=args.group_size, dataset=name, **kwargs)
        for g in tqdm(range(count), desc=f"rollouts ({name})"):
            obs, _ = envs.reset(seed=args.seed + 1000 * g)
            replies = [asyncio.run(policy.complete(list(o), use_cache=False)).text for o in obs]
            _, _, _, _, info = envs.step(replies)
            correct = [bool(c) for c in info["correct"]]
            all_correct.extend(correct)
            if any(correct) and not all(correct):
                groups.append({"id": f"{name}-{g}", "trajectories": list(info["trajectory"]), "correct": correct})
        envs.close()
    return groups, sum(all_correct) / max(1, len(all_correct))


def refund_group() -> dict | None:
    loaded = load_refund_group("strict")
    if loaded is None:
        return None
    labels, trajectories = loaded  # published order, best first
    return {"trajectories": trajectories, "quality": [float(len(labels) - k) for k in range(len(labels))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", default="local", help="comma-separated: local, or LiteLLM model strings")
    parser.add_argument("--api-base", default=None, help="OpenAI-compatible server for the judges that are not local")
    parser.add_argument("--groups", type=int, default=16, help="groups of built-in single-digit sums")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--gsm8k-groups", type=int, default=4, help="groups from ../shared/data GSM8K (0 to skip)")
    parser.add_argument("--max-tokens", type=int, default=160, help="policy completion budget")
    parser.add_argument("--judge-max-tokens", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rubrics", type=int, default=2, help="rubrics per group for the rubric-score part (0 skips it)")
    add_smoke_flag(parser, groups=1, group_size=2, gsm8k_groups=0, max_tokens=8, judge_max_tokens=64, rubrics=0)
    args = parser.parse_args()

    groups, policy_accuracy = math_groups(args)
    refund = refund_group()
    ruler_config = RulerConfig(max_tokens=args.judge_max_tokens)
    rows, summary = [], []
    chance = random.Random(args.seed)
    random_math, random_refund = Tally(), Tally()
    for group in groups:
        random_math.add([chance.random() for _ in group["correct"]], [float(c) for c in group["correct"]])
    if refund:
        for _ in range(200):  # the chance line of one group of four, averaged over draws
            random_refund.add([chance.random() for _ in refund["quality"]], refund["quality"])
    rows.append(("random (seeded)", "RULER-style score", random_math, random_refund, None))

    for name in [j for j in args.judges.split(",") if j]:
        judge = make_llm(name, api_base=None if name == "local" else args.api_base,
                         config=LLMConfig(cache_dir=None, timeout_s=300, max_retries=1))
        ruler_math, ruler_refund, rubric_math, rubric_stats = Tally(), Tally(), Tally(), []
        scorer = RubricScorer(RubricConfig(rubricator=judge, verifier=judge, rubrics_per_group=args.rubrics)) \
            if args.rubrics else None
        for group in tqdm(groups, desc=f"judging ({judge.name})"):
            quality = [float(c) for c in group["correct"]]
            result = asyncio.run(ruler_score([t.messages for t in group["trajectories"]], judge, ruler_config))
            ruler_math.add(None if result.failed else list(result.scores), quality)
            if scorer is not None:
                members = [Member.from_trajectory(t) for t in group["trajectories"]]
                rubric_result, _, _ = asyncio.run(scorer.rubrics_and_rewards(group["id"], members))
                rubric_math.add(list(rubric_result.cot_rewards), quality)
                rubric_stats.append(rubric_result.stats)
        if refund:
            result = asyncio.run(ruler_score(refund["trajectories"], judge, ruler_config))
            ruler_refund.add(None if result.failed else list(result.scores), refund["quality"])
        rows.append((judge.name, "RULER", ruler_math, ruler_refund, None))
        if scorer is not None:
            rows.append((judge.name, "rubric CoT reward", rubric_math, None, rubric_stats))
        summary.append(f"{name}:ruler={ruler_math.accuracy:.3f}")
        print(f"{judge.name}: RULER pairwise {ruler_math.accuracy:.3f} over {ruler_math.pairs} pairs "
              f"({ruler_math.failures} failed groups); refund {ruler_refund.accuracy:.3f}; "
              f"calls={judge.usage.calls} prompt_tokens={judge.usage.prompt_tokens} "
              f"completion_tokens={judge.usage.completion_tokens}", flush=True)

    write_table(rows, groups, policy_accuracy, args)
    print(f"RESULT judges={len(summary)} {' '.join(summary)}")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def write_table(rows, groups, policy_accuracy: float, args) -> None:
    lines = [f"Command: `python benchmarks/judge_agreement.py {' '.join(sys.argv[1:])}`", "",
             f"Math groups: {len(groups)} groups of {args.group_size} that mix right and wrong answers, from rollouts "
             f"by the default model (accuracy {policy_accuracy:.3f}); refund: the strict-prompt group of four with "
             "its published order (6 pairs).", "",
             "| judge | score | math pairwise accuracy | math pairs | failed groups | refund pairwise accuracy "
             "| rubric valid fraction | mean valid corr | rubric format rate |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for judge, score, math, refund, stats in rows:
        refund_cell = "" if refund is None or not refund.groups else (
            "failed" if refund.failures == refund.groups else f"{refund.accuracy:.3f}")
        rubric_cells = ["", "", ""]
        if stats:
            with_valid = [s["mean_valid_corr"] for s in stats if s["valid_fraction"] > 0]
            rubric_cells = [f"{_mean([s['valid_fraction'] for s in stats]):.3f}", f"{_mean(with_valid):.3f}",
                            f"{_mean([s['format_rate'] for s in stats]):.3f}"]
        lines.append(f"| {judge} | {score} | {math.accuracy:.3f} | {math.pairs} | {math.failures} of {math.groups} | "
                     f"{refund_cell} | {' | '.join(rubric_cells)} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "judge_quality.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[4:]))


if __name__ == "__main__":
    main()

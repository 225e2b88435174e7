"""The ``rubricgym`` command line."""

from __future__ import annotations

import argparse
import sys


def cmd_envs(args: argparse.Namespace) -> int:
    from rubricgym.registration import ENVS

    width = max(len(env.id) for env in ENVS)
    for env in ENVS:
        print(f"{env.id:<{width}}  {env.summary}")
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    from rubricgym.baseline import run_baseline

    levels = tuple(int(x) for x in args.levels.split(","))
    for policy in args.policy.split(","):
        result = run_baseline(policy, episodes=args.episodes, group_size=args.group_size, seed=args.seed, levels=levels)
        per_level = "  ".join(f"L{level}={acc:.2f}" for level, acc in result["by_level"].items())
        print(f"{policy:<12} accuracy={result['accuracy']:.3f} over {result['episodes']} episodes   {per_level}")
    return 0


def _read_trajectories(path: str) -> tuple[list[str], list[list[dict]], list | None]:
    """JSONL rows: a message list, or {"id": ..., "messages": [...], "tools": [...]}."""
    import json

    labels, trajectories, tools = [], [], None
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise SystemExit(f"{path}:{number}: not valid JSON ({err.msg})")
            if isinstance(row, dict):
                messages = row.get("messages")
                labels.append(str(row.get("id", f"#{len(labels) + 1}")))
                tools = tools or row.get("tools")
            else:
                messages = row
                labels.append(f"#{len(labels) + 1}")
            from rubricgym.spaces import ChatSpace

            if not ChatSpace().contains(messages):
                raise SystemExit(f"{path}:{number}: expected a list of chat messages (role/content dicts)")
            trajectories.append(messages)
    if not trajectories:
        raise SystemExit(f"{path}: no trajectories")
    return labels, trajectories, tools


def cmd_judge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rubricgym.llm import LLMConfig, make_llm
    from rubricgym.wrappers.ruler import DEFAULT_RUBRIC, RulerConfig, print_ruler_result, ruler_score_sync

    labels, trajectories, tools = _read_trajectories(args.file)
    rubric = DEFAULT_RUBRIC
    if args.rubric:
        rubric = Path(args.rubric[1:]).read_text() if args.rubric.startswith("@") else args.rubric
    llm_config = LLMConfig(timeout_s=args.timeout, cache_dir=None if args.no_cache else LLMConfig().cache_dir)
    judge = make_llm(args.judge, api_base=args.api_base, config=llm_config)
    config = RulerConfig(rubric=rubric, permutations=args.permutations, shuffle=args.shuffle, seed=args.seed)
    result = ruler_score_sync(trajectories, judge, config, tools)
    if args.debug:
        print_ruler_result(result, title=f"RULER ({judge.name})", labels=labels)
    if result.failed:
        print(f"judge failed: {result.error}")
        return 1
    ranking = sorted(range(len(labels)), key=lambda i: -result.scores[i])
    for rank, i in enumerate(ranking, start=1):
        explanation = " ".join(result.explanations[i].split())
        print(f"{rank}. {labels[i]:<16} {result.scores[i]:.3f}  {explanation}")
    print(f"judge={judge.name} calls={judge.usage.calls} cache_hits={judge.usage.cache_hits} "
          f"prompt_tokens={judge.usage.prompt_tokens} completion_tokens={judge.usage.completion_tokens} "
          f"cost_usd={judge.usage.cost_usd:.4f} clamped={result.clamped}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rubricgym", description="Gymnasium envs and reward wrappers for LLM RL.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list the registered environment ids")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("baseline", help="run scripted baseline policies on Math-v0 (built-in data) and print accuracy")
    p.add_argument("--policy", default="calculator,last_number", help="comma-separated: calculator, last_number")
    p.add_argument("--episodes", type=int, default=120)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--levels", default="1,2,3,4,5,6")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_baseline)

    p = sub.add_parser("judge", help="score a JSONL file of trajectories (message lists) with RULER and print the ranking")
    p.add_argument("file", help="JSONL: one message list, or {id, messages, tools}, per line")
    p.add_argument("--judge", default="local", help="LiteLLM model string, or 'local' for the in-process default model")
    p.add_argument("--api-base", default=None, help="OpenAI-compatible server (use --judge openai/<name>)")
    p.add_argument("--rubric", default=None, help="rubric text, or @file")
    p.add_argument("--permutations", type=int, default=1, help="presentation orders to average (position bias)")
    p.add_argument("--shuffle", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per judge call")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--debug", action="store_true", help="print the judge's reasoning (rich table)")
    p.set_defaults(func=cmd_judge)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

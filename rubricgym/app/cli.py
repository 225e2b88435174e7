"""The ``rubricgym`` command line."""

from __future__ import annotations

import argparse
import sys


def cmd_envs(args: argparse.Namespace) -> int:
    from rubricgym.registration import ENVS

    width = max(len(env.id) for env in ENVS.values())
    for env in ENVS.values():
        print(f"{env.id:<{width}}  {env.summary}")
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    from rubricgym.app.baseline import run_baseline

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
    from rubricgym.judges.ruler import DEFAULT_RUBRIC, RulerConfig, print_ruler_result, ruler_score_sync

    labels, trajectories, tools = _read_trajectories(args.file)
    rubric = DEFAULT_RUBRIC
    if args.rubric:
        rubric = Path(args.rubric[1:]).read_text() if args.rubric.startswith("@") else args.rubric
    llm_config = LLMConfig(timeout_s=args.timeout, cache_dir=None if args.no_cache else LLMConfig().cache_dir)
    judge = make_llm(args.judge, api_base=args.api_base, config=llm_config)
    config = RulerConfig(rubric=rubric, permutations=args.permutations, shuffle=args.shuffle, seed=args.seed,
                         max_tokens=args.max_tokens)
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


def _env_kwargs(args: argparse.Namespace) -> dict:
    kwargs: dict = {}
    if args.dataset:
        kwargs["dataset"] = args.dataset
    if args.levels and (not args.dataset or args.dataset == "generated"):
        kwargs["levels"] = tuple(int(x) for x in args.levels.split(","))
    if args.tools:
        kwargs["tools"] = args.tools.split(",")
    if getattr(args, "judge", None):
        # RULER envs take a judge; rubric envs take the judge as verifier (and fixed rubricator if asked)
        from rubricgym.registration import scheme_of

        kwargs["verifier" if scheme_of(args.env) == "rubric" else "judge"] = args.judge
        if args.api_base:
            kwargs["api_base"] = args.api_base
    return kwargs


def cmd_train(args: argparse.Namespace) -> int:
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, train

    policy = PolicyConfig(model=None if args.model == "default" else args.model, max_new_tokens=args.max_new_tokens,
                          lora_r=args.lora_r, device=args.device)
    config = TrainConfig(env=args.env, env_kwargs=_env_kwargs(args), algo=args.algo, steps=args.steps,
                         group_size=args.group_size, groups_per_step=args.groups_per_step, seed=args.seed,
                         output_dir=args.output, checkpoint_every=args.checkpoint_every, eval_tasks=args.eval_tasks,
                         eval_every=args.eval_every, policy=policy)
    if args.lr is not None:
        config.grpo.learning_rate = config.ppo.learning_rate = args.lr
    result = train(config, resume=args.resume)
    before = result["before"].get("eval_accuracy", float("nan"))
    after = result["after"].get("eval_accuracy", float("nan"))
    print(f"held-out accuracy: before {before:.3f} -> after {after:.3f}   ({result['steps']} steps, "
          f"{result['minutes']:.1f} min; curve {result['plot']}; metrics {args.output}/metrics.jsonl)")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.train import evaluate

    policy = Policy(PolicyConfig(model=None if args.model == "default" else args.model, max_new_tokens=args.max_new_tokens,
                                 lora_r=16 if args.checkpoint else 0, device=args.device))
    if args.checkpoint:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(policy.model, load_file(str(Path(args.checkpoint) / "adapter" / "adapter_model.safetensors")))
    kwargs = _env_kwargs(args)
    if kwargs.get("dataset", "generated") == "generated":
        kwargs["split"] = "test"
    for k in (int(x) for x in args.k.split(",")):
        result = evaluate(policy, kwargs, tasks=args.tasks, k=k, env_id=args.env)
        print("  ".join(f"{key}={value:.3f}" for key, value in result.items()) + f"  (k={k}, {args.tasks} tasks)")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import shlex
    import sys

    from rubricgym.app.bench import BenchConfig, markdown_table, run_bench

    config = BenchConfig(suites=tuple(args.suites.split(",")), schemes=tuple(s for s in args.schemes.split(",") if s),
                         judge=args.judge, api_base=args.api_base, seed=args.seed, output_dir=args.output,
                         command=("rubricgym bench " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else sys.argv[1:])).strip())
    if args.quick:
        config.steps, config.groups_per_step, config.group_size, config.eval_tasks = 2, 1, 4, 24
        config.judge_max_tokens, config.judge_max_fixes = 300, 1
    if args.steps:
        config.steps = args.steps
    if args.judge_explanation_chars is not None:
        config.judge_explanation_chars = args.judge_explanation_chars
    rows = run_bench(config)
    print(markdown_table(rows))
    scores = " ".join(f"{r['suite']}:{r['scheme']}={r['held_out_after']:.3f}" for r in rows)
    print(f"RESULT schemes={len(rows)} {scores}")
    return 0


def _add_env_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", default="Math-v0")
    p.add_argument("--dataset", default=None, help="generated (default), gsm8k, math500, aime2024, a path, or a hub id")
    p.add_argument("--levels", default="1", help="generator levels, comma-separated")
    p.add_argument("--tools", default=None, help="comma-separated tool names, e.g. calculator")
    p.add_argument("--model", default="default", help="'default' (SmolLM2-135M-Instruct, offline), an HF id or a path")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--device", default="auto")


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
    p.add_argument("--max-tokens", type=int, default=1024, help="completion budget of the judge call")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--debug", action="store_true", help="print the judge's reasoning (rich table)")
    p.set_defaults(func=cmd_judge)

    p = sub.add_parser("train", help="train the LLM policy by GRPO or PPO through the env loop")
    _add_env_flags(p)
    p.add_argument("--algo", choices=["grpo", "ppo"], default="grpo")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--groups-per-step", type=int, default=4)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: the algorithm's)")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--judge", default=None, help="judge model for *Ruler-v0 ids, verifier for *Rubric-v0 ids")
    p.add_argument("--api-base", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="runs/latest")
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--eval-tasks", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="held-out accuracy and pass@k of the default model or a checkpoint")
    _add_env_flags(p)
    p.add_argument("--checkpoint", default=None, help="a checkpoint folder written by rubricgym train")
    p.add_argument("--tasks", type=int, default=100)
    p.add_argument("--k", default="1", help="comma-separated: 1 = greedy accuracy, k > 1 = pass@k")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("bench", help="compare reward schemes side by side (same env family, agent, seeds, budget)")
    p.add_argument("--suites", default="math,rag")
    p.add_argument("--schemes", default="", help="comma-separated subset, e.g. rlvr,ruler")
    p.add_argument("--judge", default="local", help="judge / verifier model ('local' = the in-process default model)")
    p.add_argument("--api-base", default=None)
    p.add_argument("--steps", type=int, default=0, help="training steps per scheme (default 8; --quick 2)")
    p.add_argument("--quick", action="store_true", help="a small budget that finishes in under 10 minutes on CPU")
    p.add_argument("--judge-explanation-chars", type=int, default=None,
                   help="longest RULER explanation (default: 0, scores only, for the local judge; 160 otherwise)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="benchmarks/results")
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

"""The ``rubricgym`` command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from rubricgym.app.flags import add_config_flags, config_from_args


def cmd_envs(args: argparse.Namespace) -> int:
    from rubricgym.registration import ENVS, default_env

    # the default family first (the ids runs use when they name none), then registration order
    default = default_env()
    envs = sorted(ENVS.values(), key=lambda env: (env.base or env.id) != default)
    width = max(len(env.id) for env in envs)
    for env in envs:
        print(f"{env.id:<{width}}  {env.summary}")
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    from rubricgym.app.baseline import run_baseline

    levels = tuple(int(x) for x in args.levels.split(","))
    if args.write_sft:
        from rubricgym.envs.math.scripted import scripted_sft_rows

        policy = args.policy.split(",")[0]
        rows = scripted_sft_rows(policy, episodes=args.episodes, seed=args.seed, env_kwargs={"levels": levels})
        Path(args.write_sft).parent.mkdir(parents=True, exist_ok=True)
        with open(args.write_sft, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        print(f"wrote {len(rows)} SFT rows ({policy}'s solved train-split episodes of {args.episodes}) to {args.write_sft}; "
              f"warm-start a run with them: rubricgym train --warm-start {args.write_sft} ...")
        return 0
    for policy in args.policy.split(","):
        result = run_baseline(policy, episodes=args.episodes, group_size=args.group_size, seed=args.seed, levels=levels)
        per_level = "  ".join(f"L{level}={acc:.2f}" for level, acc in result["by_level"].items())
        print(f"{policy:<12} accuracy={result['accuracy']:.3f} over {result['episodes']} episodes   {per_level}")
    return 0


def _policies(text: str) -> str:
    from rubricgym.envs.math.scripted import POLICIES

    unknown = [name for name in text.split(",") if name not in POLICIES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown policy {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
    return text


def _read_trajectories(path: str) -> tuple[list[str], list[list[dict]], list | None]:
    """JSONL rows: a message list, or {"id": ..., "messages": [...], "tools": [...]}."""
    if not Path(path).is_file():
        raise SystemExit(f"{path}: no such file (expected JSONL: one message list, or {{id, messages, tools}}, per line)")
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

    from rubricgym.llm import LLMConfig, make_llm
    from rubricgym.judges.ruler import RulerConfig, print_ruler_result, ruler_score_sync

    labels, trajectories, tools = _read_trajectories(args.file)
    if args.rubric.startswith("@"):
        args.rubric = Path(args.rubric[1:]).read_text()
    llm_config = LLMConfig(timeout_s=args.timeout, cache_dir=None if args.no_cache else LLMConfig().cache_dir)
    judge = make_llm(args.judge, api_base=args.api_base, config=llm_config)
    config = config_from_args(RulerConfig, args, args.config_flags["ruler"], debug=False)
    with _spinner(f"judging {len(trajectories)} trajectories with {judge.name}"):
        result = ruler_score_sync(trajectories, judge, config, tools)
    if args.debug:
        print_ruler_result(result, title=f"RULER ({judge.name})", labels=labels)
    if args.output:
        write_judged(args.output, labels, trajectories, tools, result, judge.name)
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


def cmd_judge_eval(args: argparse.Namespace) -> int:
    from rubricgym.app.llmbar import SUBSETS, judge_pairs, published_rows
    from rubricgym.judges.ruler import RulerConfig

    if args.calibrate:
        from rubricgym.app.calibration import judge_profile, profile_line

        profile = judge_profile(args.judge, args.groups, args.limit or 0, args.scoring, args.threshold)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(profile, indent=1) + "\n")
        print(profile_line(profile))
        print(f"profile written to {args.output}")
        from rubricgym.judges.correction import JudgeCorrection

        try:  # what --judge-correction would do with it
            print(f"--judge-correction {args.output}: {JudgeCorrection.from_profile(profile).describe()}")
        except ValueError as err:
            print(f"--judge-correction {args.output}: refused: {err}")
        return 0

    subsets = args.subsets.split(",")
    unknown = [s for s in subsets if s not in SUBSETS]
    if unknown:
        print(f"error: unknown subset(s) {unknown}; choose from {list(SUBSETS)}", file=sys.stderr)
        return 2
    for subset in subsets:
        config = RulerConfig(scoring=args.scoring)
        print(judge_pairs(args.judge, subset, args.limit, api_base=args.api_base, config=config).line(), flush=True)
        for name, stats in published_rows(subset).items():
            if name.endswith("(Vanilla)"):
                print(f"  published {name:<22} acc={stats['accuracy']:.3f} both={stats['both_correct']:.3f}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from rubricgym.app import llmbar
    from rubricgym.data import KNOWN_DATASETS, DatasetFetchError, DatasetLoadError, fetch_dataset, fetch_plan, find_data_file

    llmbar.register()
    if args.action == "list":
        width = max(len(name) for name in KNOWN_DATASETS)
        for name, dataset in sorted(KNOWN_DATASETS.items()):
            found = find_data_file(dataset.file) if dataset.file else None
            where = str(found) if found else ("fetchable" if dataset.urls else f"hub only: {dataset.hub_id}")
            print(f"{name:<{width}}  {where}   licence: {dataset.licence or '-'}")
        return 0
    names = [n for n, d in sorted(KNOWN_DATASETS.items()) if d.urls] if args.names == ["all"] else args.names
    dest = Path(args.dest) if args.dest else None
    status = 0
    for name in names:
        try:
            print(fetch_plan(name, dest))
            if not args.dry_run:
                print(f"  wrote {fetch_dataset(name, dest)}")
        except DatasetFetchError as err:
            print(f"  not fetched: {err.reason} (offline? nothing was written)", file=sys.stderr)
            status = 2
        except DatasetLoadError as err:
            print(f"error: {err}", file=sys.stderr)
            status = 2
    return status


@contextlib.contextmanager
def _spinner(description: str):
    """A spinner with elapsed time on stderr for one long call (one judge call has no steps to count)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress:
        progress.add_task(description, total=None)
        yield


def write_judged(path: str, labels: list[str], trajectories: list[list[dict]], tools: list | None, result, judge_name: str) -> None:
    """``rubricgym judge --output``: the judged group as one ``groups.jsonl`` row (``rubricgym view`` reads it)."""
    from rubricgym.agents.logs import group_row
    from rubricgym.records import Group, Trajectory

    members = [Trajectory(messages=messages, metadata={"judged": {
        "ruler_score": float("nan") if score is None else score, "ruler_explanation": why, "ruler_failed": result.failed,
        "scorer": "ruler", "group": {"ruler_error": result.error, "judge": judge_name, "tools": tools}}})
        for messages, score, why in zip(trajectories, result.scores, result.explanations)]
    row = group_row(Group(task_id=Path(path).stem, trajectories=members), None, f"rubricgym judge ({judge_name})", labels)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


def cmd_view(args: argparse.Namespace) -> int:
    from rubricgym.app.view import render

    path = render(args.source, args.output)
    print(f"wrote {path} (open it in a browser; it needs no server or network)")
    return 0


def judge_kwargs(env_id: str, judge: str | None, api_base: str | None) -> dict:
    """``--judge`` / ``--api-base`` as the knobs of ``env_id``'s reward scheme (RULER's ``judge``,
    the rubrics' ``verifier`` ...); an id whose scheme takes no judge refuses them."""
    from rubricgym.registration import base_env_id, scheme_of

    if not judge:
        return {}
    base_env_id(env_id)  # an unknown id says so first
    scheme = scheme_of(env_id)
    if scheme is None or scheme.judge_knob is None:
        raise SystemExit(f"error: --judge applies to judged ids (e.g. {base_env_id(env_id).replace('-v0', 'Ruler-v0')}); "
                         f"{env_id} takes no judge")
    kwargs = {scheme.judge_knob: judge}
    if api_base:
        kwargs["api_base"] = api_base
    return kwargs


def _env_kwargs(args: argparse.Namespace, env_id: str) -> dict:
    """The run's env kwargs: ``--env-kwargs`` (the family's and the scheme's knobs) and ``--judge``."""
    return {**(args.env_kwargs or {}), **judge_kwargs(env_id, getattr(args, "judge", None), getattr(args, "api_base", None))}


def train_config(args: argparse.Namespace):
    """The :class:`TrainConfig` that ``rubricgym train`` flags describe."""
    from rubricgym.agents.grpo import GRPOConfig
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.ppo import PPOConfig
    from rubricgym.agents.train import TrainConfig

    from rubricgym.registration import default_env

    names = args.config_flags
    env_id = args.env or default_env()
    policy = config_from_args(PolicyConfig, args, names["policy"])
    grpo, ppo = config_from_args(GRPOConfig, args, names["grpo"]), config_from_args(PPOConfig, args, names["ppo"])
    if args.lr is not None:
        grpo.learning_rate = ppo.learning_rate = args.lr
    return config_from_args(TrainConfig, args, names["train"], env=env_id, env_kwargs=_env_kwargs(args, env_id),
                            policy=policy, grpo=grpo, ppo=ppo)


def eval_policy_config(args: argparse.Namespace):
    """The policy of ``rubricgym eval``: a checkpoint's own model and adapter shape, else the base model."""
    from rubricgym.agents.checkpoints import checkpoint_policy_config
    from rubricgym.agents.policy import PolicyConfig

    names = args.config_flags["policy"]
    if args.checkpoint:  # the adapter's shape (rank, targets) and base model come from the checkpoint
        trained = checkpoint_policy_config(args.checkpoint)
        keep = {k: v for k, v in trained.items() if k in ("model", "lora_r", "lora_alpha", "lora_target_modules")}
        return config_from_args(PolicyConfig, args, {k: v for k, v in names.items() if k not in keep}, **keep)
    return config_from_args(PolicyConfig, args, {k: v for k, v in names.items() if k != "lora_r"}, lora_r=0)


def cmd_train(args: argparse.Namespace) -> int:
    from rubricgym.agents.train import train

    config = train_config(args)
    result = train(config, resume=args.resume)
    if result.get("rank", 0):  # under torchrun only rank 0 reports
        return 0
    before = result["before"].get("eval_accuracy", float("nan"))
    after = result["after"].get("eval_accuracy", float("nan"))
    warm = result.get("warm_start", {}).get("warm_start_eval_accuracy")
    between = "" if warm is None else f" -> after the warm start {warm:.3f}"
    print(f"held-out accuracy: before {before:.3f}{between} -> after {after:.3f}   ({result['steps']} steps, "
          f"{result['minutes']:.1f} min; curve {result['plot']}; metrics {config.output_dir}/metrics.jsonl)")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from rubricgym.agents.checkpoints import load_adapter
    from rubricgym.agents.evaluation import evaluate
    from rubricgym.agents.policy import Policy
    from rubricgym.registration import check_env_kwargs, default_env, held_out

    policy_config = eval_policy_config(args)
    env_id, kwargs = held_out(args.env or default_env(), args.env_kwargs or {})
    check_env_kwargs(env_id, kwargs)  # before the model loads
    policy = Policy(policy_config)
    if args.checkpoint:
        load_adapter(policy, args.checkpoint)
    for k in (int(x) for x in args.k.split(",")):
        result = evaluate(policy, kwargs, tasks=args.tasks, k=k, env_id=env_id, progress=True)
        print("  ".join(f"{key}={value:.3f}" for key, value in result.items()) + f"  (k={k}, {args.tasks} tasks)")
    return 0


def cmd_judge_data(args: argparse.Namespace) -> int:
    from rubricgym.app.judge_data import record_groups
    from rubricgym.registration import default_env, held_out

    env_id = args.env or default_env()
    kwargs = args.env_kwargs or {}
    if args.split == "test":  # the family's held-out tasks (the base env, no judge)
        env_id, kwargs = held_out(env_id, kwargs)
    policy = None
    if args.adapter:  # a cold-started or trained policy's own answers (a verifier learns the responses it will judge)
        from rubricgym.agents.policy import Policy, PolicyConfig

        policy = Policy(PolicyConfig(adapter=args.adapter, **({"max_new_tokens": args.max_new_tokens} if args.max_new_tokens else {})))
    path = record_groups(env_id, kwargs, groups=args.groups, group_size=args.group_size, out=args.output, seed=args.seed,
                         max_new_tokens=args.max_new_tokens, policy=policy)
    print(f"appended {args.groups} groups of {args.group_size} to {path} (train a judge on them: "
          f"rubricgym train-judge --groups {path} --eval-groups <held-out groups>)")
    return 0


def cmd_rubric_data(args: argparse.Namespace) -> int:
    from rubricgym.app.rubric_data import group_references, rubricator_rows, verifier_rows, write_rows
    from rubricgym.data import read_file
    from rubricgym.envs.judge import groups_path
    from rubricgym.registration import default_env, held_out, training_kwargs

    env_id = args.env or default_env()
    kwargs = training_kwargs(env_id, args.env_kwargs or {})
    if args.split == "test":
        env_id, kwargs = held_out(env_id, kwargs)
    rows = [row for name in args.groups.split(",") for row in read_file(groups_path(name, args.split))]
    references = group_references(rows, env_id, kwargs)
    out = Path(args.output)
    written = {"rubricator": write_rows(rubricator_rows(rows, references, args.answer_format), out / "rubricator.jsonl"),
               "verifier": write_rows(verifier_rows(rows, references, args.answer_format, args.seed,
                                                      items_per_row=args.verifier_items_per_row or None,
                                                      balance=args.verifier_items_per_row == 1), out / "verifier.jsonl")}
    for role, file in written.items():
        with file.open() as rows_file:  # closed here: an open handle left to the collector warns (ResourceWarning)
            print(f"{role}: {sum(1 for _ in rows_file)} rows -> {file}")
    print(f"cold start: rubricgym sft --data {written['rubricator']} --output-dir <dir>; "
          f"then train with --adapter <dir>/checkpoint-<n> (and --judge local:<verifier checkpoint>)")
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.sft import SFTConfig, sft
    from rubricgym.data import read_file

    rows = read_file(args.data)
    if args.max_rows:
        rows = rows[:args.max_rows]
    names = args.config_flags
    policy = Policy(config_from_args(PolicyConfig, args, names["policy"]))
    history = sft(policy, rows, config_from_args(SFTConfig, args, names["sft"]), output_dir=args.output_dir)
    print(f"sft: {len(rows)} rows, {len(history)} steps, loss {history[0]['loss']:.3f} -> {history[-1]['loss']:.3f}; "
          f"checkpoint {args.output_dir}/checkpoint-{len(history)} (use it: --adapter, or --judge local:<checkpoint>)")
    return 0


def cmd_train_judge(args: argparse.Namespace) -> int:
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.sft import SFTConfig
    from rubricgym.app.judge_training import JudgeTrainingConfig, train_judge

    names = args.config_flags
    config = config_from_args(JudgeTrainingConfig, args, names["judge"], sft=config_from_args(SFTConfig, args, names["sft"]),
                              policy=config_from_args(PolicyConfig, args, names["policy"]))
    result = train_judge(config)
    start = "not measured" if result["start_pairwise"] is None else f"{result['start_pairwise']:.3f}"
    print(f"held-out pairwise accuracy: at the start {start} -> trained "
          f"{result['held_out_pairwise']:.3f}   ({result['minutes']:.1f} min; curve {result['plot']})")
    print(f"use it: --judge local:{result['checkpoint']}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import shlex
    import sys

    from rubricgym.app.bench import BenchConfig, markdown_table, result_line, run_bench

    command = ("rubricgym bench " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else sys.argv[1:])).strip()
    config = config_from_args(BenchConfig, args, args.config_flags["bench"], judge=args.judge, command=command)
    rows = run_bench(config)
    print(markdown_table(rows))
    print(result_line(rows))
    return 0


#: ``rubricgym bench --quick``: a small budget, 3 seeds (the fewest a claim can rest on)
QUICK_BENCH = {"seeds": (0, 1, 2), "steps": 2, "groups_per_step": 1, "group_size": 4, "eval_tasks": 16, "judge_max_tokens": 300,
               "judge_max_fixes": 1}
#: ``rubricgym bench --smoke``: seconds, a simulated judge, results in a scratch folder (CI runs it)
SMOKE_BENCH = {"schemes": ("ruler",), "steps": 1, "groups_per_step": 1, "group_size": 2,
               "max_new_tokens": 8, "eval_tasks": 4, "resamples": 200, "results_name": "reward_schemes_smoke"}


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve one registered id as an OpenEnv environment server until interrupted."""
    import uvicorn

    from rubricgym.openenv.server import make_app

    env_id = args.env_id
    app = make_app(env_id, max_sessions=args.max_sessions, idle_timeout_s=args.idle_timeout or None,
                   **_env_kwargs(args, env_id))
    print(f"serving {env_id} over OpenEnv at http://{args.host}:{args.port} (WebSocket sessions at /ws, "
          f"at most {args.max_sessions}; gym.make('OpenEnv-v0', url='http://{args.host}:{args.port}') plays it)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, ws_max_size=int(args.max_message_mb * 2**20))
    return 0


def cmd_judge_proxy(args: argparse.Namespace) -> int:
    """Write the LiteLLM proxy config from the judge settings and serve it until interrupted."""
    from rubricgym.app.judge_proxy import ProxyConfig, ensure_master_key, install_proxy, proxy_command, write_proxy_config
    from rubricgym.llm.client import PROXY_KEY_ENV

    if args.install:
        print(f"LiteLLM proxy: {install_proxy()}")
        if not args.judge:
            return 0
    config = config_from_args(ProxyConfig, args, args.proxy_flags, model=args.judge or "")
    path = write_proxy_config(config, args.config_out)
    command = proxy_command(path, config)
    key, made = ensure_master_key()
    print(f"judge proxy config: {path}\nevery judge setting: --judge proxy:http://{config.host}:{config.port} "
          f"with {PROXY_KEY_ENV} set in the client's environment"
          + (f" (made for this proxy: export {PROXY_KEY_ENV}={key})" if made else "")
          + f"\n$ {' '.join(command)}", flush=True)
    if args.print_only:
        print(path.read_text())
        return 0
    os.execv(command[0], command)  # the proxy gets the signals (Ctrl-C stops it)
    return 0  # not reached


def _add_env_flags(p: argparse.ArgumentParser, env_help: str = "a registered id (`rubricgym envs`)") -> None:
    from rubricgym.app.flags import json_object

    p.add_argument("--env", default="", help=env_help + "; default: the default family's base id")
    p.add_argument("--env-kwargs", type=json_object, default={}, metavar="JSON",
                   help='the family\'s knobs and the reward scheme\'s, as a JSON object, e.g. \'{"levels": [1, 2]}\' '
                        "(over the family's training defaults; checked before the model loads)")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    from rubricgym.agents.grpo import GRPOConfig
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.ppo import PPOConfig
    from rubricgym.agents.train import TrainConfig
    from rubricgym.agents.sft import SFTConfig
    from rubricgym.app.bench import BenchConfig
    from rubricgym.app.judge_proxy import ProxyConfig
    from rubricgym.app.flags import json_object
    from rubricgym.app.judge_training import JudgeTrainingConfig
    from rubricgym.judges.ruler import RulerConfig

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="rubricgym", description="Gymnasium envs and reward wrappers for LLM RL.")
    sub = parser.add_subparsers(dest="command", required=True)
    formatter = argparse.ArgumentDefaultsHelpFormatter

    p = sub.add_parser("envs", help="list the registered environment ids")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("serve", help="serve a registered id (base or judged) as an OpenEnv environment server",
                       formatter_class=formatter)
    p.add_argument("env_id", help="a registered id (`rubricgym envs`)")
    p.add_argument("--env-kwargs", type=json_object, default={}, metavar="JSON",
                   help="the family's knobs and the reward scheme's, as a JSON object")
    p.add_argument("--judge", default=None, help="the judged id's judge (or rubric verifier)")
    p.add_argument("--api-base", default=None, help="the judge's OpenAI-compatible server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-sessions", type=int, default=64, help="concurrent sessions (one env instance each)")
    p.add_argument("--idle-timeout", type=float, default=300.0, help="seconds before an idle session is reaped (0: never)")
    p.add_argument("--max-message-mb", type=float, default=16.0, help="larger WebSocket messages are refused")
    p.add_argument("--log-level", default="warning")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("judge-proxy", help="serve the judge through LiteLLM's proxy: one rate limit and cache for "
                                           "every rank and node (--judge proxy:<url> points clients at it)",
                       formatter_class=formatter)
    p.add_argument("--judge", default="", help="the judge model (a LiteLLM model string)")
    p.add_argument("--config-out", default="runs/judge-proxy.yaml", help="where the proxy's config is written")
    p.add_argument("--install", action="store_true", help="make the proxy's own virtualenv first (litellm[proxy], pinned)")
    p.add_argument("--print-only", action="store_true", help="write and print the config, do not start the proxy")
    p.set_defaults(func=cmd_judge_proxy, proxy_flags=add_config_flags(p, ProxyConfig, skip=("model",)))

    p = sub.add_parser("baseline", help="run scripted baseline policies on Math-v0 (built-in data) and print accuracy")
    p.add_argument("--policy", default="calculator,estimate", help="comma-separated: calculator, estimate",
                   type=_policies)
    p.add_argument("--episodes", type=int, default=120)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--levels", default="1,2,3,4,5,6")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--write-sft", default="", metavar="FILE",
                   help="instead of scoring: write the first policy's solved train-split episodes as SFT rows (JSONL, "
                        "one per agent turn), the warm start of `rubricgym train --warm-start FILE`")
    p.set_defaults(func=cmd_baseline)

    p = sub.add_parser("judge", help="score a JSONL file of trajectories (message lists) with RULER and print the ranking",
                       formatter_class=formatter)
    p.add_argument("file", help="JSONL: one message list, or {id, messages, tools}, per line")
    p.add_argument("--judge", default="local", help="LiteLLM model string, 'local' for the in-process default model, or "
                   "'local:<checkpoint>' (a judge trained by rubricgym train-judge)")
    p.add_argument("--api-base", default=None, help="OpenAI-compatible server (use --judge openai/<name>)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per judge call (default: the backend's, 60 s for servers and APIs, 300 s in-process)")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--output", default=None, help="append the judged group to this JSONL file (for rubricgym view)")
    ruler = add_config_flags(p, RulerConfig)  # --rubric takes text or @file
    p.set_defaults(func=cmd_judge, config_flags={"ruler": ruler})

    p = sub.add_parser("judge-eval", help="pairwise accuracy of a judge on LLMBar (both presentation orders)",
                       formatter_class=formatter)
    p.add_argument("--judge", default="local", help="LiteLLM model string, 'local', 'local:<checkpoint>', 'oracle:<accuracy>' (simulated) "
                   "or 'random'")
    p.add_argument("--api-base", default=None, help="OpenAI-compatible server (use --judge openai/<name>)")
    p.add_argument("--subsets", default="natural", help="comma-separated: natural, adversarial_neighbor, adversarial_gptinst")
    p.add_argument("--limit", type=int, default=None, help="pairs per subset (default: all)")
    p.add_argument("--scoring", default="sampled", choices=["sampled", "probability", "pointwise"],
                   help="probability: G-Eval expected scores from the judge's next-token distribution (in-process judge); "
                   "pointwise: the same, each answer alone in its prompt (a judge trained with train-judge --pointwise)")
    p.add_argument("--calibrate", action="store_true",
                   help="write the judge's error profile instead: false-positive / false-negative rates of its implied "
                   "pass / fail, pairwise accuracy in each presentation order, ties (docs/judges.md)")
    p.add_argument("--groups", default="math",
                   help="--calibrate's labelled set: math (held-out math groups), llmbar:<subset>, or a groups.jsonl file")
    p.add_argument("--threshold", type=float, default=0.5, help="--calibrate: a score at or above it passes")
    p.add_argument("--output", default="judge_profile.json", help="--calibrate: where the profile (JSON) goes")
    p.set_defaults(func=cmd_judge_eval)

    p = sub.add_parser("data", help="list the public datasets envs read by name, or fetch their pinned upstream files")
    p.add_argument("action", choices=["list", "fetch"])
    p.add_argument("names", nargs="*", default=["all"], help="dataset names (`rubricgym data list`), or all")
    p.add_argument("--dest", default=None, help="data folder to write (default: $RUBRICGYM_DATA_DIR, else ~/.cache/rubricgym/data)")
    p.add_argument("--dry-run", action="store_true", help="say what would be fetched, under which licence, to where")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("view", help="write a self-contained HTML report of a run folder or a judged JSONL file")
    p.add_argument("source", help="a `rubricgym train` output folder, or the JSONL of `rubricgym judge --output`")
    p.add_argument("-o", "--output", default=None, help="where to write the HTML (default: report.html in the run folder)")
    p.set_defaults(func=cmd_view)

    p = sub.add_parser("train", help="train the LLM policy by GRPO or PPO through the env loop", formatter_class=formatter)
    p.add_argument("--judge", default=None, help="the judge of a judged id (its scheme's judge knob: RULER's judge, the "
                   "rubrics' verifier): a LiteLLM model, 'local', 'local:<checkpoint>', 'oracle:<accuracy>'")
    p.add_argument("--api-base", default=None, help="OpenAI-compatible server of the judge")
    p.add_argument("--lr", type=float, default=None, help="learning rate of either algorithm (default: the algorithm's)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output-dir")
    flags = {"train": add_config_flags(p, TrainConfig, skip=("env", "env_kwargs")), "policy": add_config_flags(p, PolicyConfig),
             "grpo": add_config_flags(p, GRPOConfig, prefix="grpo_"), "ppo": add_config_flags(p, PPOConfig, prefix="ppo_")}
    _add_env_flags(p)
    p.set_defaults(func=cmd_train, config_flags=flags)

    p = sub.add_parser("judge-data", help="record groups of a policy's own episodes (verified outcomes kept) as "
                       "groups.jsonl rows, to train a judge on", formatter_class=formatter)
    _add_env_flags(p)
    p.add_argument("--split", default="train", choices=["train", "test"], help="test: the family's held-out tasks")
    p.add_argument("--groups", type=int, default=64)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=None, help="reply budget (default: the policy's)")
    p.add_argument("--adapter", default=None, help="play with this checkpoint's LoRA weights (default: the untrained model)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, help="the groups.jsonl file to append to")
    p.set_defaults(func=cmd_judge_data)

    p = sub.add_parser("train-judge", help="train a small local judge (SFT distillation and / or GRPO on JudgeGroup-v0); "
                       "use it as --judge local:<checkpoint>", formatter_class=formatter)
    judge_flags = add_config_flags(p, JudgeTrainingConfig, skip=("sft", "policy"))
    sft_flags = add_config_flags(p, SFTConfig, prefix="sft_")
    policy_flags = add_config_flags(p, PolicyConfig, defaults={"max_new_tokens": 96})
    p.set_defaults(func=cmd_train_judge, config_flags={"judge": judge_flags, "sft": sft_flags, "policy": policy_flags})

    p = sub.add_parser("rubric-data", help="RLCER cold-start rows (rubric writing and verification, labelled by the "
                       "reference teacher) from recorded groups", formatter_class=formatter)
    _add_env_flags(p, "the id that recorded the groups (its reference answers label the rows)")
    p.add_argument("--groups", default="math", help="groups.jsonl files (rubricgym judge-data), comma-separated, or 'math' "
                                                     "(built-in)")
    p.add_argument("--split", default="train", choices=["train", "test"], help="built-in groups' split; test: "
                   "the family's held-out tasks")
    p.add_argument("--answer-format", default="\\boxed{{{}}}", help="how the family's final answer is written")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verifier-items-per-row", type=int, default=0,
                   help="rubric items per verifier row (0: all of a response's items in one row; 1: one verdict a row, "
                        "as many yes as no rows); a verifier trained on 1 is called with the env knob verifier_items_per_call=1")
    p.add_argument("-o", "--output", required=True, help="folder for rubricator.jsonl and verifier.jsonl")
    p.set_defaults(func=cmd_rubric_data)

    p = sub.add_parser("sft", help="supervised fine-tuning of the policy (LoRA) on prompt-completion rows: RLCER's "
                       "cold start, a verifier or judge", formatter_class=formatter)
    p.add_argument("--data", required=True, help="a JSONL / JSON / Parquet file of TRL prompt-completion rows")
    p.add_argument("--max-rows", type=int, default=0, help="use the first k rows (0: all)")
    p.add_argument("--output-dir", required=True, help="checkpoint-<steps> is written here")
    p.set_defaults(func=cmd_sft, config_flags={"sft": add_config_flags(p, SFTConfig),
                                                "policy": add_config_flags(p, PolicyConfig)})

    p = sub.add_parser("eval", help="held-out accuracy and pass@k of the default model or a checkpoint",
                       formatter_class=formatter)
    _add_env_flags(p, "the id trained (its family's held-out tasks are evaluated, without the judge)")
    p.add_argument("--checkpoint", default=None, help="a checkpoint folder written by rubricgym train")
    p.add_argument("--tasks", type=int, default=100)
    p.add_argument("--k", default="1", help="comma-separated: 1 = greedy accuracy, k > 1 = pass@k")
    p.set_defaults(func=cmd_eval, config_flags={"policy": add_config_flags(p, PolicyConfig)})

    p = sub.add_parser("bench", help="compare reward schemes side by side (same env family, agent, seeds, budget)",
                       formatter_class=formatter)
    p.add_argument("--judge", default="local", help="judge / verifier model ('local' = the in-process default model, "
                   "'local:<checkpoint>' = a trained judge)")
    p.add_argument("--quick", action="store_true", help="a small budget over 3 seeds (add --workers 2 to fan out; "
                   "its time on a 2-core CPU is in docs/bench.md): "
                   + ", ".join(f"{k}={v}" for k, v in QUICK_BENCH.items()))
    p.add_argument("--smoke", action="store_true", help="seconds, for CI: judge oracle:1.0, "
                   + ", ".join(f"{k}={v}" for k, v in SMOKE_BENCH.items()) + "; results in a scratch folder")
    preset = QUICK_BENCH if "--quick" in argv else SMOKE_BENCH if "--smoke" in argv else None
    bench = add_config_flags(p, BenchConfig, skip=("command",), defaults=preset)
    if "--smoke" in argv:
        import tempfile

        from rubricgym.registration import default_env

        p.set_defaults(judge="oracle:1.0", envs=(default_env(),),  # one family: the default one
                       output_dir=str(Path(tempfile.gettempdir()) / "rubricgym-smoke-results"))
    p.set_defaults(func=cmd_bench, config_flags={"bench": bench})
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

"""Judge recipes: ``judge``, ``judge-eval``, ``judge-data``, ``train-judge``, ``rubric-data``, ``judge-proxy``."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rubricgym.agents.policy import PolicyConfig
from rubricgym.app.judge_proxy import ProxyConfig
from rubricgym.app.judge_training import JudgeTrainingConfig
from rubricgym.judges.ruler import RulerConfig

from . import EnvSettings, JudgeSettings, recipe


def _local_judge() -> JudgeSettings:
    return JudgeSettings(judge="local")


@dataclass(kw_only=True)
class JudgeFileRecipe:
    """``rubricgym judge``: score a JSONL file of trajectories with RULER."""

    file: str
    """JSONL: one message list, or {id, messages, tools}, per line."""
    judge: JudgeSettings = field(default_factory=_local_judge)
    timeout: float | None = None
    """Seconds per judge call (default: the backend's, 60 s for servers and APIs, 300 s in-process)."""
    no_cache: bool = False
    """Call the judge even where its cache has the answer."""
    output: str | None = None
    """Append the judged group to this JSONL file (for rubricgym view)."""
    ruler: RulerConfig = field(default_factory=RulerConfig)


@recipe(name="judge", config=JudgeFileRecipe, positional=("file",), help="score a JSONL file of trajectories "
        "(message lists) with RULER and print the ranking")
def run_judge(config: JudgeFileRecipe) -> int:
    from dataclasses import replace

    from rubricgym.app.judge_file import read_trajectories, write_judged
    from rubricgym.judges.ruler import print_ruler_result, ruler_score_sync
    from rubricgym.llm import LLMConfig, make_llm

    labels, trajectories, tools = read_trajectories(config.file)
    ruler = config.ruler
    if ruler.rubric.startswith("@"):  # --rubric @file
        ruler = replace(ruler, rubric=Path(ruler.rubric[1:]).read_text())
    llm_config = LLMConfig(timeout_s=config.timeout, cache_dir=None if config.no_cache else LLMConfig().cache_dir)
    judge = make_llm(config.judge.judge, api_base=config.judge.api_base, config=llm_config)
    with _spinner(f"judging {len(trajectories)} trajectories with {judge.name}"):
        result = ruler_score_sync(trajectories, judge, replace(ruler, debug=False), tools)
    if ruler.debug:
        print_ruler_result(result, title=f"RULER ({judge.name})", labels=labels)
    if config.output:
        write_judged(config.output, labels, trajectories, tools, result, judge.name)
    if result.failed:
        print(f"judge failed: {result.error}")
        return 1
    for rank, i in enumerate(sorted(range(len(labels)), key=lambda i: -result.scores[i]), start=1):
        print(f"{rank}. {labels[i]:<16} {result.scores[i]:.3f}  {' '.join(result.explanations[i].split())}")
    print(f"judge={judge.name} calls={judge.usage.calls} cache_hits={judge.usage.cache_hits} "
          f"prompt_tokens={judge.usage.prompt_tokens} completion_tokens={judge.usage.completion_tokens} "
          f"cost_usd={judge.usage.cost_usd:.4f} clamped={result.clamped}")
    return 0


@contextlib.contextmanager
def _spinner(description: str):
    """A spinner with elapsed time on stderr for one long call (one judge call has no steps to count)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress:
        progress.add_task(description, total=None)
        yield


@dataclass
class JudgeEvalRecipe:
    """``rubricgym judge-eval``: a judge's pairwise accuracy on LLMBar, or its error profile."""

    judge: JudgeSettings = field(default_factory=_local_judge)
    subsets: str = "natural"
    """Comma-separated: natural, adversarial_neighbor, adversarial_gptinst."""
    limit: int | None = None
    """Pairs per subset (default: all)."""
    scoring: Literal["sampled", "probability", "pointwise"] = "sampled"
    """probability: G-Eval expected scores from the judge's next-token distribution (in-process judge); pointwise:
    the same, each answer alone in its prompt (a judge trained with train-judge --pointwise)."""
    calibrate: bool = False
    """Write the judge's error profile instead: false-positive / false-negative rates of its implied pass / fail,
    pairwise accuracy in each presentation order, ties (docs/judges.md)."""
    groups: str = "math"
    """--calibrate's labelled set: math (held-out math groups), llmbar:<subset>, or a groups.jsonl file."""
    threshold: float = 0.5
    """--calibrate: a score at or above it passes."""
    output: str = "judge_profile.json"
    """--calibrate: where the profile (JSON) goes."""


@recipe(name="judge-eval", config=JudgeEvalRecipe, help="pairwise accuracy of a judge on LLMBar (both presentation orders)")
def run_judge_eval(config: JudgeEvalRecipe) -> int:
    from rubricgym.app.llmbar import SUBSETS, judge_pairs, published_rows

    if config.calibrate:
        from rubricgym.app.calibration import judge_profile, profile_line
        from rubricgym.judges.correction import JudgeCorrection

        profile = judge_profile(config.judge.judge, config.groups, config.limit or 0, config.scoring, config.threshold)
        Path(config.output).parent.mkdir(parents=True, exist_ok=True)
        Path(config.output).write_text(json.dumps(profile, indent=1) + "\n")
        print(profile_line(profile))
        print(f"profile written to {config.output}")
        try:  # what --judge-correction would do with it
            print(f"--judge-correction {config.output}: {JudgeCorrection.from_profile(profile).describe()}")
        except ValueError as err:
            print(f"--judge-correction {config.output}: refused: {err}")
        return 0
    subsets = config.subsets.split(",")
    unknown = [s for s in subsets if s not in SUBSETS]
    if unknown:
        print(f"error: unknown subset(s) {unknown}; choose from {list(SUBSETS)}", file=sys.stderr)
        return 2
    for subset in subsets:
        result = judge_pairs(config.judge.judge, subset, config.limit, api_base=config.judge.api_base,
                             config=RulerConfig(scoring=config.scoring))
        print(result.line(), flush=True)
        for name, stats in published_rows(subset).items():
            if name.endswith("(Vanilla)"):
                print(f"  published {name:<22} acc={stats['accuracy']:.3f} both={stats['both_correct']:.3f}")
    return 0


@dataclass(kw_only=True)
class JudgeDataRecipe:
    """``rubricgym judge-data``: record groups of a policy's own episodes to train a judge on."""

    output: str
    """The groups.jsonl file to append to."""
    env: EnvSettings = field(default_factory=EnvSettings)
    split: Literal["train", "test"] = "train"
    """test: the family's held-out tasks."""
    groups: int = 64
    group_size: int = 4
    max_new_tokens: int | None = None
    """Reply budget (default: the policy's)."""
    adapter: str | None = None
    """Play with this checkpoint's LoRA weights (default: the untrained model)."""
    seed: int = 0
    scripted_members: int = 0
    """Add this many of the family's scripted agents' episodes (expert, partly right, harmful ...) to
    each group, members shuffled: a spread of quality where the policy rarely succeeds."""


@recipe(name="judge-data", config=JudgeDataRecipe, short={"output": "-o"}, help="record groups of a policy's own "
        "episodes (verified outcomes kept) as groups.jsonl rows, to train a judge on")
def run_judge_data(config: JudgeDataRecipe) -> int:
    from rubricgym.app.judge_data import record_groups
    from rubricgym.registration import held_out

    env_id, kwargs = config.env.env_id(), config.env.env_kwargs
    if config.split == "test":  # the family's held-out tasks (the base env, no judge)
        env_id, kwargs = held_out(env_id, kwargs)
    policy = None
    if config.adapter:  # a cold-started or trained policy's own answers (a verifier learns the responses it will judge)
        from rubricgym.agents.policy import Policy

        policy = Policy(PolicyConfig(adapter=config.adapter,
                                     **({"max_new_tokens": config.max_new_tokens} if config.max_new_tokens else {})))
    path = record_groups(env_id, kwargs, groups=config.groups, group_size=config.group_size, out=config.output,
                         seed=config.seed, max_new_tokens=config.max_new_tokens, policy=policy,
                         scripted_members=config.scripted_members)
    print(f"appended {config.groups} groups of {config.group_size} to {path} (train a judge on them: "
          f"rubricgym train-judge --groups {path} --eval-groups <held-out groups>)")
    return 0


@recipe(name="train-judge", config=JudgeTrainingConfig, prefixes={"sft": "sft_"},
        help="train a small local judge (SFT distillation and / or GRPO on JudgeGroup-v0); use it as --judge "
        "local:<checkpoint>")
def run_train_judge(config: JudgeTrainingConfig) -> int:
    from rubricgym.app.judge_training import train_judge

    result = train_judge(config)
    start = "not measured" if result["start_pairwise"] is None else f"{result['start_pairwise']:.3f}"
    print(f"held-out pairwise accuracy: at the start {start} -> trained "
          f"{result['held_out_pairwise']:.3f}   ({result['minutes']:.1f} min; curve {result['plot']})")
    print(f"use it: --judge local:{result['checkpoint']}")
    return 0


@dataclass(kw_only=True)
class RubricDataRecipe:
    """``rubricgym rubric-data``: RLCER cold-start rows from recorded groups."""

    output: str
    """Folder for rubricator.jsonl and verifier.jsonl."""
    env: EnvSettings = field(default_factory=EnvSettings)
    groups: str = "math"
    """groups.jsonl files (rubricgym judge-data), comma-separated, or 'math' (built-in)."""
    split: Literal["train", "test"] = "train"
    """Built-in groups' split; test: the family's held-out tasks."""
    answer_format: str = "\\boxed{{{}}}"
    """How the family's final answer is written."""
    seed: int = 0
    verifier_items_per_row: int = 0
    """Rubric items per verifier row (0: all of a response's items in one row; 1: one verdict a row, as many yes as
    no rows); a verifier trained on 1 is called with the env knob verifier_items_per_call=1."""


@recipe(name="rubric-data", config=RubricDataRecipe, short={"output": "-o"}, help="RLCER cold-start rows (rubric "
        "writing and verification, labelled by the reference teacher) from recorded groups")
def run_rubric_data(config: RubricDataRecipe) -> int:
    from rubricgym.app.rubric_data import group_references, rubricator_rows, verifier_rows, write_rows
    from rubricgym.data import read_file
    from rubricgym.envs.judge import groups_path
    from rubricgym.registration import held_out, training_kwargs

    env_id = config.env.env_id()
    kwargs = training_kwargs(env_id, config.env.env_kwargs)
    if config.split == "test":
        env_id, kwargs = held_out(env_id, kwargs)
    rows = [row for name in config.groups.split(",") for row in read_file(groups_path(name, config.split))]
    references = group_references(rows, env_id, kwargs)
    out = Path(config.output)
    per_row = config.verifier_items_per_row
    written = {"rubricator": write_rows(rubricator_rows(rows, references, config.answer_format), out / "rubricator.jsonl"),
               "verifier": write_rows(verifier_rows(rows, references, config.answer_format, config.seed,
                                                      items_per_row=per_row or None, balance=per_row == 1),
                                      out / "verifier.jsonl")}
    for role, file in written.items():
        with file.open() as rows_file:  # closed here: an open handle left to the collector warns (ResourceWarning)
            print(f"{role}: {sum(1 for _ in rows_file)} rows -> {file}")
    print(f"cold start: rubricgym sft --data {written['rubricator']} --output-dir <dir>; "
          f"then train with --adapter <dir>/checkpoint-<n> (and --judge local:<verifier checkpoint>)")
    return 0


@dataclass
class JudgeProxyRecipe:
    """``rubricgym judge-proxy``: the judge behind LiteLLM's proxy (one rate limit and cache for every rank)."""

    judge: JudgeSettings = field(default_factory=JudgeSettings)
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    config_out: str = "runs/judge-proxy.yaml"
    """Where the proxy's config is written."""
    install: bool = False
    """Make the proxy's own virtualenv first (litellm[proxy], pinned)."""
    print_only: bool = False
    """Write and print the config, do not start the proxy."""


@recipe(name="judge-proxy", config=JudgeProxyRecipe, skip=("proxy.model", "proxy.api_base"),
        help="serve the judge through LiteLLM's proxy: one rate limit and cache for every rank and node "
        "(--judge proxy:<url> points clients at it)")
def run_judge_proxy(config: JudgeProxyRecipe) -> int:
    from dataclasses import replace

    from rubricgym.app.judge_proxy import ensure_master_key, install_proxy, proxy_command, write_proxy_config
    from rubricgym.llm.client import PROXY_KEY_ENV

    if config.install:
        print(f"LiteLLM proxy: {install_proxy()}")
        if not config.judge.judge:
            return 0
    proxy = replace(config.proxy, model=config.judge.judge or "", api_base=config.judge.api_base)
    path = write_proxy_config(proxy, config.config_out)
    command = proxy_command(path, proxy)
    key, made = ensure_master_key()
    print(f"judge proxy config: {path}\nevery judge setting: --judge proxy:http://{proxy.host}:{proxy.port} "
          f"with {PROXY_KEY_ENV} set in the client's environment"
          + (f" (made for this proxy: export {PROXY_KEY_ENV}={key})" if made else "")
          + f"\n$ {' '.join(command)}", flush=True)
    if config.print_only:
        print(path.read_text())
        return 0
    os.execv(command[0], command)  # the proxy gets the signals (Ctrl-C stops it)
    return 0  # not reached

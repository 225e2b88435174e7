"""Reward schemes side by side: the same env family, agent, seeds and budget under each scheme.

The rows derive from the registry: for each family (``--envs``; default: the families whose
:class:`~rubricgym.chatenv.TrainingDefaults` ask for the default bench) the env's own reward (the
family's ``reward_name``: ``rlvr`` for math, ``components`` for RAG), then every registered
variant of that family: a judged scheme that can combine gives two rows, the judge alone
(``ruler``: combine = replace) and the judge with the env's reward (``ruler+rlvr``: the family's
default combination); any other scheme one row under its name (``rubric``, ``function``).

Every scheme starts from the same base weights and trains with the same seeds (paired); the
held-out score before training is measured once per family (identical by construction: LoRA starts
at zero, greedy decoding), on the family's held-out tasks. Every held-out number comes with a paired
95 % bootstrap interval over seeds x held-out tasks (:mod:`rubricgym.app.stats`), and so do each
scheme's gain over the untrained weights and its difference from the env-reward row; the table
marks the intervals that exclude zero. Claims rest on the few-seed statistics beside them (seeds
as the unit, paired t intervals, MDD; :func:`rubricgym.app.stats.seed_table`), and the controls
(``random``, ``format``) sit right after the reference row. The grid of rows x seeds runs as cells,
one after another or fanned out (``workers``, Ray), each kept on disk with its provenance so a
stopped run resumes. Each family has its own budget (its training defaults:
RAG answers need more tokens than a boxed number). Judge calls and tokens are counted from the
judge's client; policy tokens from the rollouts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from rubricgym.judges.oracle import is_oracle
from rubricgym.judges.ruler import RulerConfig
from rubricgym.llm import LLM, LLMConfig, make_llm
from rubricgym.registration import CORRECTION_KNOB, check_env_kwargs, env_class, held_out, scheme_of, training_kwargs

from rubricgym.agents.policy import PolicyConfig
from rubricgym.agents.evaluation import evaluate
from rubricgym.agents.train import TrainConfig, Trainer
from rubricgym.app.provenance import provenance, same_provenance
from rubricgym.app.bench_report import write_results
from rubricgym.app.stats import paired_bootstrap, seed_table
from rubricgym.app.bench_rows import CONTROLS, BenchRow, bench_envs, bench_rows  # noqa: F401  (the bench's public names)


@dataclass
class BenchConfig:
    """What to compare and with what budget (the default run's RLVR gain is significant on 2 CPU cores)."""

    envs: tuple[str, ...] = ()
    """Base ids of the families to compare (empty: the families that ask for the default bench: math and RAG)."""
    schemes: tuple[str, ...] = ()
    """Subset of row names (``ruler``, or ``<env id>:ruler``; empty: every row of each family)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """The families' knobs, over their training defaults, for every family of the run (JSON on the command line)."""
    steps: int = 6
    """Training steps per scheme."""
    seeds: tuple[int, ...] = (0,)
    """Training seeds, the same for every scheme (paired); more seeds widen the intervals honestly."""
    eval_tasks: int = 48
    """Held-out tasks per family (greedy; the same tasks for every scheme and seed)."""
    learning_rate: float = 0.0
    """GRPO's learning rate (0: its default, 2e-4); hashed into a cell's provenance only when set."""
    group_size: int = 0
    """Rollouts per task (0: each family's training default: math 8, RAG 4)."""
    groups_per_step: int = 0
    """Tasks per step (0: each family's default: math 4, RAG 2; RAG prompts carry three articles)."""
    max_new_tokens: int = 0
    """Reply budget (0: each family's default: math 48, a boxed single-digit sum needs about 15 tokens;
    RAG 128, its reference answers are 24 tokens at the median and need their citations too)."""
    judge: Any = "local"
    """Judge / verifier: a LiteLLM model string, ``openai/<name>`` with ``api_base``, ``local``,
    ``local:<checkpoint>`` (a judge trained by ``rubricgym train-judge``), ``oracle:<a>``, or an LLM / backend."""
    api_base: str | None = None
    judge_max_tokens: int = 1024
    """Completion budget of one RULER call (small local judges ramble: --quick uses 300)."""
    judge_max_fixes: int = 2
    """Fix requests after an invalid judge reply (constrained decoding makes them rare)."""
    judge_timeout_s: float = 120.0
    """Limit on one judge call."""
    judge_explanation_chars: int | None = None
    """Longest RULER explanation per trajectory; None: 0 (scores only) for the in-process judge,
    whose explanations echo the input and cost most of its tokens, 160 for any other judge."""
    judge_scoring: str = "sampled"
    """How RULER reads scores: ``sampled`` (the judge writes them; any judge) or ``probability``
    (G-Eval expected scores; the in-process judge only). Sampled, the in-process judge ties whole
    groups; by probability it ranks (at chance on LLMBar)."""
    judge_correction: str = ""
    """A judge's calibrated error profile (``rubricgym judge-eval --calibrate --output <file>``) that
    corrects the judge of every row whose scheme reads one (RULER's); empty: none."""
    resamples: int = 4000
    """Bootstrap resamples per interval."""
    model: str | None = None
    """The policy's base model (a local folder or hub id); None: the default model."""
    workers: int = 1
    """Cells (one row, one seed) run at once: 1 in this process, one after another; more in Ray
    tasks (a local Ray started with this many CPUs, or the cluster at ``$RAY_ADDRESS``). Results
    are the same either way: each cell is seeded alone and runs on ``cell_threads`` threads."""
    cell_threads: int = 1
    """Torch threads of every cell, whatever ``workers`` is, so that a cell's numbers do not depend
    on how many run beside it (a thread count changes float summation order)."""
    cells_dir: str = ""
    """Finished cells are kept here (one JSON each, named by its provenance; empty:
    ``<output_dir>/.cells``): a stopped or killed run resumes, and only cells made by the same
    code, config and packages are taken."""
    output_dir: str = "benchmarks/results"
    """Folder of the result files."""
    results_name: str = ""
    """Stem of the result files (``<stem>.md/.png/.json``); empty: ``reward_schemes_quick`` at 4
    steps or fewer, else ``reward_schemes_full``. Name subset runs so they do not replace the full table."""
    command: str = ""
    """The command line of the run, written at the top of the table."""
    rows: tuple[BenchRow, ...] = ()
    """Explicit rows for a one-family run (``benchmarks/rlcer.py``), the reference first, instead of
    the family's registered rows."""
    reuse: tuple[str, ...] = ()
    """Result JSON files of earlier runs (``<stem>.json``): a row measured there with the same name,
    env, knobs, start, judge and budget is taken as it is (its held-out results and curves), not
    trained again; the intervals are recomputed with this run's rows."""

    def __post_init__(self):
        # RULER's own checks (scoring, the profile), before the reference spends minutes
        RulerConfig(scoring=self.judge_scoring, correction=self.judge_correction)
        self.envs = tuple(self.envs) or bench_envs()
        if self.rows and len(self.envs) != 1:
            raise ValueError(f"explicit bench rows are for one family; got envs {self.envs}")
        for env_id in self.envs:  # an unknown id or knob fails now, before any model loads
            check_env_kwargs(env_id, training_kwargs(env_id, self.env_kwargs))

    def budget(self, env_id: str) -> dict[str, int]:
        """The family's group size, groups per step and reply budget (the config's where set)."""
        defaults = env_class(env_id).training
        return {key: getattr(self, key) or getattr(defaults, key) for key in ("group_size", "groups_per_step", "max_new_tokens")}


def _row_kwargs(env_id: str, row: BenchRow, config: BenchConfig, judge: LLM) -> dict[str, Any]:
    kwargs = {**training_kwargs(env_id, config.env_kwargs), **row.knobs}
    scheme = scheme_of(row.env_id)
    if scheme is not None and scheme.judge_knob:
        settings = {scheme.judge_knob: judge, "max_tokens": config.judge_max_tokens, "max_fixes": config.judge_max_fixes,
                    "explanation_max_chars": config.judge_explanation_chars, "scoring": config.judge_scoring,
                    **({CORRECTION_KNOB: config.judge_correction} if config.judge_correction else {})}
        kwargs.update({k: v for k, v in settings.items() if (k == scheme.judge_knob or k in scheme.knobs) and k not in row.knobs})
    return kwargs


CURVE_KEYS = ("reward", "train_accuracy", "trained_completions", "judge_failed_groups", "step_seconds")
"""Per-step training stats kept in the results JSON (``accuracy`` is the verified success)."""


def _judge_name(judge: Any) -> str:
    """A judge's backend name without building it: ``local:...`` for the in-process one."""
    if isinstance(judge, str):
        return "local:default" if judge == "local" else judge
    return getattr(judge, "name", None) or getattr(getattr(judge, "backend", None), "name", "") or str(judge)


def _explanation_chars(config: BenchConfig, backend_name: str) -> int:
    if config.judge_explanation_chars is not None:
        return config.judge_explanation_chars
    return 0 if backend_name.startswith("local:") else 160  # the in-process backend, however it was given


def _scheme_judge(backend, config: BenchConfig) -> LLM:
    # one client per scheme over one backend (the in-process model loads once): its usage counts
    # only that scheme's calls, and no disk cache, so a rerun pays for (and times) every call
    return LLM(backend, LLMConfig(cache_dir=None, timeout_s=config.judge_timeout_s, max_tokens=config.judge_max_tokens))


def _held_out(policy, env_id: str, config: BenchConfig) -> list[bool]:
    """Solved or not, per held-out task (the same tasks every time)."""
    return _held_out_run(policy, env_id, config)["solved"]


def _held_out_run(policy, env_id: str, config: BenchConfig) -> dict[str, Any]:
    """The held-out evaluation: ``solved`` per task, the mean reward and, where the env offers
    tools, the tool-call and valid-call rates and calls per episode."""
    base, kwargs = held_out(env_id, config.env_kwargs)
    return evaluate(policy, kwargs, tasks=config.eval_tasks, env_id=base, per_task=True)


def _selected(config: BenchConfig, env_id: str) -> list[BenchRow]:
    if config.rows:
        return list(config.rows)
    rows = bench_rows(env_id)
    chosen = [row for row in rows if not config.schemes or row.name in config.schemes
              or f"{env_id}:{row.name}" in config.schemes]
    # the env-reward row always runs: every difference is measured against it
    if chosen and chosen[0] is not rows[0]:
        chosen.insert(0, rows[0])
    return chosen


def _judge_usage(judge: LLM | None) -> dict[str, float]:
    if judge is None:
        return {"judge_calls": 0, "judge_prompt_tokens": 0, "judge_completion_tokens": 0, "judge_failures": 0}
    return {"judge_calls": judge.usage.calls, "judge_prompt_tokens": judge.usage.prompt_tokens,
            "judge_completion_tokens": judge.usage.completion_tokens, "judge_failures": judge.usage.failures}


def _train_scheme(env_id: str, row: BenchRow, seed: int, config: BenchConfig, backend, progress: bool,
                  measure_before: bool) -> tuple[list[dict[str, float]], Any, dict[str, float], list[bool] | None, float]:
    """One row, one seed: the per-step history, the trained policy, the judge client's usage,
    the untrained weights' held-out results when asked (untimed) and the training minutes."""
    from tqdm import tqdm

    scheme = scheme_of(row.env_id)
    judged = scheme is not None and scheme.judge_knob is not None
    judge = _scheme_judge(backend, config)
    own = row.knobs.get(scheme.judge_knob) if judged else None
    if isinstance(own, str) and not is_oracle(own):  # the row's own judge (a trained verifier), counted as the bench's is
        judge = _scheme_judge(make_llm(own, api_base=config.api_base).backend, config)
        row = replace(row, knobs={**row.knobs, scheme.judge_knob: judge})
    elif own is not None:  # a simulated judge makes no calls
        judged = False
    budget = config.budget(env_id)
    train_config = TrainConfig(env=row.env_id, env_kwargs=_row_kwargs(env_id, row, config, judge), algo="grpo",
                               steps=config.steps, group_size=budget["group_size"],
                               groups_per_step=budget["groups_per_step"], seed=seed, eval_tasks=0,
                               checkpoint_every=0, record_groups=0, report_to=(), show_completions=0,
                               output_dir=f"/tmp/rubricgym-bench/{env_id}-{row.name}-{seed}",
                               policy=PolicyConfig(model=config.model, max_new_tokens=budget["max_new_tokens"],
                                                   cpu_threads="fixed", adapter=row.adapter))
    if config.learning_rate:
        train_config.grpo.learning_rate = config.learning_rate
    trainer = Trainer(train_config)
    before = _held_out(trainer.policy, env_id, config) if measure_before else None  # LoRA starts at zero
    started = time.perf_counter()
    history = [trainer.train_step() for _ in tqdm(range(config.steps), desc=f"{env_id}:{row.name} seed {seed}",
                                                   disable=not progress, leave=False)]
    trainer.envs.close()
    return history, trainer.policy, _judge_usage(judge if judged else None), before, (time.perf_counter() - started) / 60


def _saved_rows(config: BenchConfig) -> dict[tuple[str, str], tuple[dict[str, Any], dict[str, list[float]]]]:
    """The reusable rows of ``config.reuse``: (suite, scheme) -> (row, curves, the run's judge), from
    runs with this run's steps, seeds and held-out tasks (the rest is matched row by row)."""
    saved = {}
    for path in config.reuse:
        data = json.loads(Path(path).read_text())
        earlier = data.get("config", {})
        if (earlier.get("steps"), earlier.get("eval_tasks"), list(earlier.get("seeds") or [])) != (
                config.steps, config.eval_tasks, list(config.seeds)):
            continue
        for row in data.get("rows", []):
            saved[row["suite"], row["scheme"]] = (row, data.get("curves", {}).get(f"{row['suite']}:{row['scheme']}", {}),
                                                  (str(earlier.get("judge")), earlier.get("judge_scoring", "sampled")))
    return saved


def _reusable(saved: dict, env_id: str, row: BenchRow, config: BenchConfig) -> tuple[dict[str, Any], dict] | None:
    found = saved.get((env_id, row.name))
    if found is None:
        return None
    earlier, curves, judged_by = found
    scheme = scheme_of(row.env_id)
    # the judge matters only to rows whose scheme takes one (RLVR's row is the same under any judge)
    same_judge = scheme is None or not scheme.judge_knob or judged_by == (
        str(getattr(config.judge, "name", config.judge)), config.judge_scoring)
    same = (earlier["env"] == row.env_id and earlier["knobs"] == row.knobs and earlier.get("adapter") == row.adapter
            and all(earlier.get(f"budget_{k}") == v for k, v in config.budget(env_id).items()) and same_judge
            # the same code, config and packages: a row made by older code is never mixed in
            and same_provenance(earlier.get("provenance"), row_provenance(env_id, row, config)))
    return (earlier, curves) if same else None


def row_provenance(env_id: str, row: BenchRow, config: BenchConfig, seeds: tuple[int, ...] | None = None) -> dict[str, Any]:
    """The commit, config hash and package versions of one row (all its seeds): everything that
    decides its numbers is in the hashed config (the judge settings only for rows whose scheme
    takes a judge: RLVR's row is the same under any judge). ``seeds`` replaces the run's seeds in the hash
    (one cell's own seed: a cell does not depend on which other seeds its run has)."""
    scheme = scheme_of(row.env_id)
    judged = {}
    if scheme is not None and scheme.judge_knob:
        judge = config.judge if isinstance(config.judge, str) else getattr(config.judge, "name", str(config.judge))
        judged = {"judge": judge, "api_base": config.api_base, "judge_scoring": config.judge_scoring,
                  "judge_max_tokens": config.judge_max_tokens, "judge_max_fixes": config.judge_max_fixes,
                  # as run_bench resolves it (None: 0 for the in-process judge, else 160), resolved or not
                  "judge_explanation_chars": _explanation_chars(config, _judge_name(config.judge)),
                  "judge_correction": config.judge_correction}
    return provenance({"suite": env_id, "row": row.name, "env": row.env_id, "knobs": row.knobs, "adapter": row.adapter,
                       "model": config.model, "budget": config.budget(env_id), "steps": config.steps,
                       "seeds": list(config.seeds if seeds is None else seeds), "eval_tasks": config.eval_tasks, "env_kwargs": config.env_kwargs,
                       "cell_threads": config.cell_threads, **judged,
                       **({"learning_rate": config.learning_rate} if config.learning_rate else {})})


def _before_cell(env_id: str, config: BenchConfig) -> list[bool]:
    """The untrained weights' held-out results (the same for every row and seed: LoRA starts at zero)."""
    from rubricgym.agents.policy import Policy

    return _held_out(Policy(PolicyConfig(model=config.model, max_new_tokens=config.budget(env_id)["max_new_tokens"],
                                         cpu_threads="fixed")), env_id, config)


def run_cell(env_id: str, row: BenchRow | None, seed: int, config: BenchConfig, backend: Any = None) -> dict[str, Any]:
    """One cell: ``row`` trained with ``seed``, then its held-out results (``row`` None: the
    untrained weights). JSON-ready; what a worker process returns."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(config.cell_threads)
    try:
        if row is None:
            return {"solved": [int(x) for x in _before_cell(env_id, config)]}
        backend = backend if backend is not None else make_llm(config.judge, api_base=config.api_base).backend
        # resolved as run_bench resolves it, so one cell recomputed alone trains what the bench trained
        config = replace(config, judge_explanation_chars=_explanation_chars(config, backend.name))
        history, policy, usage, _, spent = _train_scheme(env_id, row, seed, config, backend, False, measure_before=False)
        started = time.perf_counter()
        evaluation = _held_out_run(policy, env_id, config)
        return {"history": history, "usage": usage, "solved": [int(x) for x in evaluation.pop("solved")],
                "held_out": evaluation, "minutes": spent + (time.perf_counter() - started) / 60}
    finally:
        torch.set_num_threads(previous)


def _cell_path(config: BenchConfig, env_id: str, row: BenchRow | None, seed: int) -> tuple[Path, dict[str, Any]]:
    name = "before" if row is None else row.name
    # one seed's cell: the row's settings without the run's list of seeds (a 5-seed run reuses a 3-seed run's cells)
    settings = None if row is None else row_provenance(env_id, row, config, seeds=(seed,))["config_hash"]
    where = provenance({"cell": [env_id, name, seed], "row": settings,
                        "model": config.model, "eval_tasks": config.eval_tasks, "env_kwargs": config.env_kwargs,
                        "budget": config.budget(env_id), "cell_threads": config.cell_threads})
    safe = f"{env_id}-{name}-s{seed}".replace("/", "_").replace("+", "_plus_")
    return Path(config.cells_dir or Path(config.output_dir) / ".cells") / f"{safe}-{where['config_hash']}.json", where


def run_cells(env_id: str, cells: list[tuple[BenchRow | None, int]], config: BenchConfig, backend: Any,
              progress: bool) -> list[dict[str, Any]]:
    """Every cell's result, in order: finished ones from ``cells_dir`` (same provenance), the rest
    computed here one after another or, with ``workers`` > 1, as Ray tasks (a worker that dies is
    retried; each finished cell is written at once, so a stopped run resumes)."""
    results: list[dict[str, Any] | None] = [None] * len(cells)
    todo = []
    for index, (row, seed) in enumerate(cells):
        path, where = _cell_path(config, env_id, row, seed)
        stored = json.loads(path.read_text()) if path.is_file() else None
        if stored is not None and same_provenance(stored.get("provenance"), where):
            results[index] = stored["result"]
            if progress:
                print(f"{env_id}:{'before' if row is None else row.name} seed {seed}: finished cell kept ({path.name})", flush=True)
        else:
            todo.append(index)

    def keep(index: int, result: dict[str, Any]) -> None:
        row, seed = cells[index]
        path, where = _cell_path(config, env_id, row, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps({"provenance": where, "result": result}, default=float))
        partial.replace(path)
        results[index] = result
        if progress and row is not None:
            print(f"{env_id}:{row.name} seed {seed}: held-out {np.mean(result['solved']):.3f}, {result['minutes']:.1f} min", flush=True)

    if config.workers <= 1 or len(todo) <= 1:
        for index in todo:
            row, seed = cells[index]
            keep(index, run_cell(env_id, row, seed, config, backend))
        return results
    if not isinstance(config.judge, str):
        raise ValueError("--workers > 1 needs the judge as a string (a model name, 'local', 'oracle:<a>'): "
                         "each worker builds its own client")
    import ray

    if not ray.is_initialized():  # run_bench shuts down a local Ray it started
        address = os.environ.get("RAY_ADDRESS")
        ray.init(address=address, **({} if address else {"num_cpus": config.workers}), include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)
    remote = ray.remote(num_cpus=1, max_retries=2)(run_cell)
    pending = {remote.remote(env_id, cells[index][0], cells[index][1], config): index for index in todo}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        index = pending.pop(done[0])
        keep(index, ray.get(done[0]))
    return results


def run_bench(config: BenchConfig, progress: bool = True) -> list[dict[str, Any]]:
    if not config.seeds:
        raise ValueError("the bench needs at least one seed")
    saved = _saved_rows(config)
    rows: list[dict[str, Any]] = []
    curves: dict[str, dict[str, list[float]]] = {}
    backend = make_llm(config.judge, api_base=config.api_base).backend
    config = replace(config, judge_explanation_chars=_explanation_chars(config, backend.name))
    try:
        return _run_bench(config, saved, rows, curves, backend, progress)
    finally:
        ray = sys.modules.get("ray")
        if config.workers > 1 and ray is not None and ray.is_initialized() and not os.environ.get("RAY_ADDRESS"):
            ray.shutdown()


def _run_bench(config: BenchConfig, saved: dict, rows: list[dict[str, Any]], curves: dict[str, dict[str, list[float]]],
               backend: Any, progress: bool) -> list[dict[str, Any]]:
    for env_id in config.envs:
        selected = _selected(config, env_id)
        reused = {row.name: _reusable(saved, env_id, row, config) for row in selected}
        before = next(([bool(x) for x in found[0]["before_solved"]] for found in reused.values() if found), None)
        cells: list[tuple[BenchRow | None, int]] = [] if before is not None else [(None, config.seeds[0])]
        # seed by seed: a run cut short holds whole seeds of every row, which pair up (a claim needs pairs)
        cells += [(row, seed) for seed in config.seeds for row in selected if reused[row.name] is None]
        results = dict(zip([(None if row is None else row.name, seed) for row, seed in cells],
                           run_cells(env_id, cells, config, backend, progress)))
        if before is None:
            before = [bool(x) for x in results[None, config.seeds[0]]["solved"]]
        solved: dict[str, list[list[bool]]] = {}
        env_rows = []
        for bench_row in selected:
            name = bench_row.name
            if reused[name] is not None:
                earlier, curves[f"{env_id}:{name}"] = reused[name]
                solved[name] = [[bool(x) for x in s] for s in earlier["solved"]]
                env_rows.append({**earlier, "reused": True})
                if progress:
                    print(f"{env_id}:{name:<22} reused from an earlier run at {earlier['provenance']['commit'][:12]} "
                          f"({earlier['minutes']:.1f} min then)", flush=True)
                continue
            done = [results[name, seed] for seed in config.seeds]
            solved[name] = [[bool(x) for x in cell["solved"]] for cell in done]
            histories, usages = [cell["history"] for cell in done], [cell["usage"] for cell in done]
            minutes = sum(cell["minutes"] for cell in done)
            flat = [h for history in histories for h in history]
            rubric_valid = [h["rubric_valid_fraction"] for h in flat if "rubric_valid_fraction" in h]
            informative = [h["rubric_informative_valid_fraction"] for h in flat if "rubric_informative_valid_fraction" in h]
            evaluations = [cell.get("held_out") or {} for cell in done]
            # the held-out tool use (where the env offers tools), averaged over seeds
            tool_use = {f"held_out_{key}": float(np.mean([e[key] for e in evaluations]))
                        for key in ("tool_call_rate", "valid_call_rate", "tool_calls_per_episode")
                        if all(key in e for e in evaluations)}
            zero_variance = [h["zero_variance_fraction"] for h in flat if "zero_variance_fraction" in h]
            row = {"suite": env_id, "scheme": name, "env": bench_row.env_id, "knobs": bench_row.knobs, "adapter": bench_row.adapter,
                   "seeds": list(config.seeds), **{f"budget_{k}": v for k, v in config.budget(env_id).items()},
                   "held_out_before": float(np.mean(before)), "held_out_after": float(np.mean(solved[name])),
                   "held_out_after_per_seed": [float(np.mean(s)) for s in solved[name]],
                   "mean_train_reward": float(np.mean([h["reward"] for h in flat])),
                   "mean_train_accuracy": float(np.mean([h["train_accuracy"] for h in flat])),
                   "policy_completion_tokens": int(sum(h["completion_tokens"] for h in flat)),
                   "judge_failed_groups": int(sum(h["judge_failed_groups"] for h in flat)),
                   "rubric_valid_fraction": float(np.mean(rubric_valid)) if rubric_valid else None,
                   # of the groups with right and wrong answers, where validity is decidable
                   "rubric_informative_valid_fraction": float(np.mean(informative)) if informative else None,
                   # the share of groups whose members all got one reward (nothing to learn from), over every step
                   "zero_variance_fraction": float(np.mean(zero_variance)) if zero_variance else None,
                   **tool_use,
                   **{key: sum(u[key] for u in usages) for key in usages[0]},
                   "minutes": minutes, "provenance": row_provenance(env_id, bench_row, config)}
            env_rows.append(row)
            key = f"{env_id}:{name}"
            diagnostics = sorted({k for h in flat for k in h if k.startswith("rubric_")})  # RLCER's per-step statistics
            curves[key] = {k: np.nanmean([[h.get(k, float("nan")) for h in history] for history in histories],
                                         axis=0).tolist() for k in CURVE_KEYS + tuple(diagnostics)}
            curves[key]["accuracy"] = curves[key].pop("train_accuracy")
            if progress:
                print(f"{key:<28} held-out {row['held_out_before']:.3f} -> {row['held_out_after']:.3f}  "
                      f"train reward {row['mean_train_reward']:+.3f}  judge calls {row['judge_calls']} "
                      f"(failed groups {row['judge_failed_groups']})  {row['minutes']:.1f} min", flush=True)
        stats = paired_bootstrap(solved, reference=selected[0].name, before=before, resamples=config.resamples)
        few = seed_table(solved, reference=selected[0].name)  # seeds as the unit: what claims rest on
        for done_row in env_rows:
            done_row.update(stats[done_row["scheme"]].as_dict(), solved=[[int(x) for x in s] for s in solved[done_row["scheme"]]],
                            before_solved=[int(x) for x in before], reference=selected[0].name,
                            few_seed=few[done_row["scheme"]].as_dict())
        rows += env_rows
        write_results(rows, curves, config)
    return rows


def bench_config_from_json(settings: dict[str, Any], rows: list[dict[str, Any]], results_name: str,
                           command: str = "") -> BenchConfig:
    """A :class:`BenchConfig` from its stored JSON form (``settings``: BenchConfig fields; ``rows``:
    ``{"name", "env", "knobs", "adapter"}``): how a benchmark that stores its settings recomputes one cell exactly."""
    known = {f.name for f in fields(BenchConfig)}
    return BenchConfig(**{k: tuple(v) if k in ("envs", "seeds") else v for k, v in settings.items() if k in known},
                       rows=tuple(BenchRow(r["name"], r["env"], r.get("knobs") or {}, r.get("adapter")) for r in rows),
                       results_name=results_name, command=command)


def short_commit(commit: str) -> str:
    """``71c7d66fc4cc`` or ``71c7d66fc4cc+dirty`` (uncommitted changes: the full hash is in the stored JSON)."""
    return commit[:12] + ("+dirty" if "+dirty" in commit else "")


def recompute_cell_line(spec: str, env_id: str, row: dict[str, Any], seed: int, settings: dict[str, Any],
                        kept: list[int], results_name: str, commit: str) -> str:
    """Recompute one stored cell (``row`` trained with ``seed`` under the stored ``settings``) and
    compare its held-out results with ``kept``: the ``RESULT cell=...`` line benchmarks print."""
    config = bench_config_from_json({**settings, "workers": 1}, [row], results_name)
    started = time.perf_counter()
    solved = run_cell(env_id, config.rows[0], seed, config)["solved"]
    return (f"RESULT cell={spec} stored={np.mean(kept):.3f} recomputed={np.mean(solved):.3f} "
            f"identical={int(list(solved) == list(kept))} stored_commit={short_commit(commit)} "
            f"minutes={(time.perf_counter() - started) / 60:.1f}")

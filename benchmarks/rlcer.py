"""RLCER at small scale, the paper's stages: a cold start for the rubric writer, a trained verifier,
then the reasoner and rubricator trained together, against RLVR on the same seeds and tasks.

1. Cold start: ``rubricgym sft`` of the default model (LoRA) on rubric-writing rows of the
   built-in math groups (the default model's own answers; generator train tasks), written by the
   reference teacher (checkable items: the boxed answer, the working, the answer); measured on
   held-out prompts (generator test tasks): format rate, items per rubric, the share of checkable
   items and of rubrics that state the right answer, untrained against cold-started.
2. Verifier: ``rubricgym sft`` on verifier rows (teacher items and distractors, verdicts decided by
   program; one item per row, as many "yes" as "no" rows per item pattern) of the built-in groups
   and of groups the cold-started policy played on train tasks (the responses the verifier will
   judge: the untrained model never boxes an answer); held-out verdict accuracy and balanced
   accuracy as the bench rows call it (one item per call, verdicts by probability), untrained against trained.
3. The bench rows (``rubricgym bench`` machinery, Math-v0, the default budget, paired seeds and
   held-out tasks): ``rlvr``; ``rlcer`` (untrained policy and verifier, as the default bench);
   ``rlcer+coldstart``; ``rlcer+coldstart+trained_verifier`` (the full recipe); and
   ``rlcer+oracle_verifier:0.9`` (cold start, a simulated verifier right on 90 % of checkable verdicts).

    python benchmarks/rlcer.py            # the measured run (results: benchmarks/results/rlcer.md)
    python benchmarks/rlcer.py --smoke    # minutes, for CI

Ends with ``RESULT rlvr=<a>[lo,hi] rlcer_full=<b>[lo,hi] valid_fraction_full=<v> diff_full=<b-a>[lo,hi]
informative_valid_fraction_full=<v> valid_fraction_coldstart=<v> diff_oracle=<d>[lo,hi] ...`` (valid fractions over
all groups and over the informative ones, with right and wrong answers: the only groups where an item can be valid).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.app.bench_report import valid_fractions  # noqa: E402
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402
from rubricgym.app.stages import stage, work_folder  # noqa: E402
from rubricgym.app.stats import Interval  # noqa: E402

RESULTS = results_dir(__file__)
#: cheapest first (a stopped run keeps the rows it finished): the simulated verifier makes no calls,
#: the trained one answers in a few seconds, the untrained one takes about 11 s a call here
ROWS = ("rlvr", "rlvr+coldstart", "rlcer+oracle_verifier:0.9", "rlcer+coldstart+trained_verifier", "rlcer", "rlcer+coldstart")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--coldstart-epochs", type=float, default=0.25, help="passes over the 1,408 rubric-writing rows")
    parser.add_argument("--verifier-steps", type=int, default=80, help="SFT steps of 8 verifier rows")
    parser.add_argument("--verifier-items-per-call", type=int, default=1,
                        help="rubric items per verifier row and per call of the trained verifier (its row's "
                             "verifier_items_per_call; 1: balanced single verdicts)")
    parser.add_argument("--learning-rate", type=float, default=3e-4, help="both SFT stages (LoRA)")
    parser.add_argument("--probe-rows", type=int, default=32, help="held-out prompts of the cold start's measurement")
    parser.add_argument("--verifier-probe-rows", type=int, default=96, help="held-out rows of the verifier's measurement")
    parser.add_argument("--policy-groups", type=int, default=64,
                        help="groups of 8 the cold-started policy plays on train tasks, for the verifier's rows (0: none)")
    parser.add_argument("--hint-tasks", type=int, default=48, help="held-out tasks of the hint measurement (0: skip it)")
    parser.add_argument("--results-name", default="rlcer", help="stem of the bench's result files (and <stem>_stages.md)")
    parser.add_argument("--rows", default=",".join(ROWS), help="bench rows to run (rlvr always runs)")
    parser.add_argument("--steps", type=int, default=6, help="the bench's steps per row (its default budget)")
    parser.add_argument("--eval-tasks", type=int, default=48)
    parser.add_argument("--level", type=int, default=0,
                        help="the bench rows' generator level, train and held-out (0: the family's default, level 1, "
                             "where RLVR from the cold start holds 0.958 and leaves no room to beat it)")
    parser.add_argument("--seeds", default="0", help="comma-separated training seeds (paired)")
    parser.add_argument("--work", default="/tmp/rubricgym-rlcer",
                        help="checkpoints; a stage finished there is reused (delete the folder to retrain)")
    add_smoke_flag(parser, argv, coldstart_epochs=0.006, verifier_steps=1, probe_rows=2, verifier_probe_rows=2, steps=1,
                   policy_groups=1, eval_tasks=2, hint_tasks=2, level=2,
                   rows="rlvr,rlcer+coldstart+trained_verifier,rlcer+oracle_verifier:0.9",
                   work="/tmp/rubricgym-rlcer-smoke")
    return parser.parse_args(argv)


def fraction(value: float | None) -> str:
    """A valid fraction for the RESULT line: ``na`` where a row has none (no rubrics, or measured before the statistic)."""
    return "na" if value is None else f"{value:.2f}"


def answer_of(description: str) -> str | None:
    found = re.search(r"\\boxed\{([^}]*)\}", description)
    return found.group(1).strip() if found else None


def probe_rubricator(adapter: str | None, rows: list[dict], references: dict[str, str]) -> dict[str, float]:
    """Greedy rubrics for held-out rubricator prompts: format, items, checkable share, right answer stated."""
    import torch

    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.judges.checkable import quoted_text
    from rubricgym.judges.rlcer import parse_rubric

    policy = Policy(PolicyConfig(max_new_tokens=200, lora_r=16 if adapter else 0, adapter=adapter))
    replies = []
    with torch.no_grad():
        for start in range(0, len(rows), 8):
            replies += [s.text for s in policy.sample([row["prompt"] for row in rows[start:start + 8]], greedy=True)]
    rubrics = [parse_rubric(text)[0] for text in replies]
    items = [item for rubric in rubrics if rubric for item in rubric.items]
    right = [any(answer_of(i.description) == references[row["task_id"]] for i in rubric.items)
             for rubric, row in zip(rubrics, rows) if rubric]
    return {"format_rate": sum(r is not None for r in rubrics) / len(rows),
            "items_per_rubric": len(items) / max(1, sum(r is not None for r in rubrics)),
            "checkable_share": sum(quoted_text(i.description) is not None for i in items) / max(1, len(items)),
            "right_answer_share": sum(right) / len(rows), "example": replies[0][:400]}


def probe_verifier(model: str, rows: list[dict]) -> dict[str, float]:
    """Verdict accuracy on held-out verifier rows, called as the bench rows call it (by probability)."""
    from rubricgym.judges.rlcer import RubricItem, verify_rollout
    from rubricgym.llm import LLMConfig, make_llm

    llm = make_llm(model, config=LLMConfig(cache_dir=None, timeout_s=120))

    async def run() -> list[list[bool] | None]:
        verdicts = []
        for row in rows:  # one at a time: the in-process model serves one call at a time anyway
            items = [RubricItem(description=d, score=1) for d in row["items"]]
            verdicts.append(await verify_rollout(llm, row["problem"], row["response"], items, max_fixes=1,
                                                 scoring="probability"))
        return verdicts

    started = time.perf_counter()
    verdicts = asyncio.run(run())
    pairs = [(v, gold == "yes") for got, row in zip(verdicts, rows) if got is not None
             for v, gold in zip(got, json.loads(row["completion"][0]["content"])["satisfied"])]
    yes = [v for v, gold in pairs if gold]
    no = [not v for v, gold in pairs if not gold]
    recall_yes, recall_no = sum(yes) / max(1, len(yes)), sum(no) / max(1, len(no))
    return {"accuracy": sum(v == gold for v, gold in pairs) / max(1, len(pairs)), "balanced_accuracy": (recall_yes + recall_no) / 2,
            "failed_calls": sum(v is None for v in verdicts) / len(rows), "verdicts": len(pairs),
            "seconds_per_call": (time.perf_counter() - started) / len(rows)}


def hint_probe(adapter: str, tasks: int) -> dict:
    """Rubric hints at inference, paired on held-out tasks: the cold-started policy answers
    (greedy), writes a rubric for its own answer, then answers again with the rubric's positive
    items appended to the problem (as ``rubric_hints`` shows banked items). Items validated
    against correctness cannot be banked for unlabelled held-out tasks (validation needs the
    labels, and a checkable item can name the answer), so the hints are the policy's own rubrics."""
    import gymnasium as gym

    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.app.stats import paired_bootstrap
    from rubricgym.judges.rlcer import parse_rubric, rubricator_messages
    from rubricgym.registration import held_out, training_kwargs

    env_id, kwargs = held_out("Math-v0", training_kwargs("Math-v0", {}))
    env = gym.make(env_id, **kwargs)
    policy = Policy(PolicyConfig(max_new_tokens=48, adapter=adapter))
    ids = [t.id for t in env.unwrapped.tasks[:tasks]]

    def solve(options: list[dict]) -> tuple[list[bool], list[str], list[str]]:
        prompts = [env.reset(options=o)[0] for o in options]
        texts = [s.text for start in range(0, len(prompts), 8) for s in policy.sample(prompts[start:start + 8], greedy=True)]
        solved, problems = [], []
        for o, text in zip(options, texts):
            env.reset(options=o)
            info = env.step(text)[4]
            solved.append(bool(info["episode"].correct))
            problems.append(info["episode"].task)
        return solved, texts, problems

    plain, answers, problems = solve([{"task_id": t} for t in ids])
    rubric_prompts = [rubricator_messages(p, a) for p, a in zip(problems, answers)]
    rubrics = [parse_rubric(s.text)[0] for start in range(0, len(ids), 8)
               for s in policy.sample(rubric_prompts[start:start + 8], max_new_tokens=200, greedy=True)]
    hints = ["Criteria a strong solution meets:\n" + "\n".join(f"- {i.description}" for i in r.items if i.score > 0)
             if r and any(i.score > 0 for i in r.items) else None for r in rubrics]
    hinted, _, _ = solve([{"task_id": t, "hint": h} if h else {"task_id": t} for t, h in zip(ids, hints)])
    stats = paired_bootstrap({"no_hint": [plain], "hint": [hinted]}, reference="no_hint", resamples=4000)
    env.close()
    return {"tasks": len(ids), "with_hint_share": sum(h is not None for h in hints) / len(ids),
            "no_hint": stats["no_hint"].as_dict()["mean"], "hint": stats["hint"].as_dict()["mean"],
            "difference": stats["hint"].as_dict()["difference"], "example_hint": next((h for h in hints if h), None)}


def record_policy_groups(adapter: str, groups: int, out: Path, env_kwargs: dict | None = None) -> dict:
    """Groups of 8 the cold-started policy plays (sampled; train tasks unless ``env_kwargs`` say otherwise), in ``out``."""
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.app.judge_data import record_groups

    out.unlink(missing_ok=True)
    started = time.perf_counter()
    record_groups("Math-v0", env_kwargs or {}, groups=groups, group_size=8, out=out, seed=1,
                  policy=Policy(PolicyConfig(max_new_tokens=48, adapter=adapter)))
    return {"groups": groups, "file": str(out), "minutes": (time.perf_counter() - started) / 60}


def sft_stage(rows: list[dict], epochs: float, learning_rate: float, folder: Path) -> dict:
    from rubricgym.agents.policy import Policy
    from rubricgym.agents.sft import SFTConfig, sft

    started = time.perf_counter()
    history = sft(Policy(), rows, SFTConfig(epochs=epochs, learning_rate=learning_rate), output_dir=folder)
    return {"checkpoint": str(folder / f"checkpoint-{len(history)}"), "steps": len(history), "rows_seen": len(history) * 8,
            "loss_first": history[0]["loss"], "loss_last": history[-1]["loss"], "minutes": (time.perf_counter() - started) / 60}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from rubricgym.app.bench import BenchConfig, BenchRow, run_bench
    from rubricgym.app.rubric_data import group_references, rubricator_rows, verifier_rows
    from rubricgym.data import read_file
    from rubricgym.envs.judge import groups_path
    from rubricgym.registration import held_out, training_kwargs

    work = work_folder(args.work, fresh=args.smoke)
    RESULTS.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    train_kwargs = training_kwargs("Math-v0", {})
    groups = {split: read_file(groups_path("math", split)) for split in ("train", "test")}
    references = {"train": group_references(groups["train"], "Math-v0", train_kwargs),
                  "test": group_references(groups["test"], *held_out("Math-v0", train_kwargs))}
    per_call = args.verifier_items_per_call
    rubricator = {split: rubricator_rows(groups[split], references[split]) for split in ("train", "test")}
    probe = {"rubricator": rubricator["test"][: args.probe_rows]}

    def trained_and_probed(rows: list[dict], epochs: float, folder: Path, measure) -> dict:
        trained = sft_stage(rows, epochs, args.learning_rate, folder)
        return {**trained, "untrained_probe": measure(None), "probe": measure(trained["checkpoint"])}

    coldstart = stage(work / "coldstart", lambda: trained_and_probed(
        rubricator["train"], args.coldstart_epochs, work / "coldstart",
        lambda adapter: probe_rubricator(adapter, probe["rubricator"], references["test"])))
    # the verifier judges the cold-started policy's responses: rows of its own groups (train tasks) join the built-in ones
    policy_groups = work / "policy-groups.jsonl"
    if args.policy_groups:
        stage(work / "policy-groups", lambda: record_policy_groups(coldstart["checkpoint"], args.policy_groups, policy_groups))
    held_out_id, held_out_kwargs = held_out("Math-v0", train_kwargs)
    played_test = work / "policy-groups-test.jsonl"
    if args.policy_groups:  # held-out tasks, for the verifier's measurement only
        stage(work / "policy-groups-test", lambda: record_policy_groups(coldstart["checkpoint"], max(1, args.policy_groups // 4),
                                                                        played_test, held_out_kwargs))
    played = {split: read_file(path) if args.policy_groups else [] for split, path in (("train", policy_groups), ("test", played_test))}
    verifier_train = verifier_rows(groups["train"] + played["train"],
                                   {**references["train"], **group_references(played["train"], "Math-v0", train_kwargs)},
                                   items_per_row=per_call, balance=per_call == 1)
    probe["verifier"] = verifier_rows(groups["test"] + played["test"],
                                      {**references["test"], **group_references(played["test"], held_out_id, held_out_kwargs)},
                                      items_per_row=per_call, balance=per_call == 1)[: args.verifier_probe_rows]
    verifier_folder = work / f"verifier-items{per_call}-played{args.policy_groups}"
    verifier = stage(verifier_folder, lambda: trained_and_probed(
        verifier_train, args.verifier_steps * 8 / len(verifier_train), verifier_folder,
        lambda checkpoint: probe_verifier(f"local:{checkpoint}" if checkpoint else "local", probe["verifier"])))

    adapter = coldstart["checkpoint"]
    every = {"rlvr": BenchRow("rlvr", "Math-v0"),
             "random": BenchRow("random", "MathRandom-v0"),  # the control (benchmarks/claims.py runs it beside its rows)
             # the control: the cold start's rows hold the right answers to the train tasks, so the
             # cold start alone may teach the sums; RLVR from the same adapter separates the two
             "rlvr+coldstart": BenchRow("rlvr+coldstart", "Math-v0", adapter=adapter),
             "rlcer": BenchRow("rlcer", "MathRubric-v0"),
             # verdicts read from the in-process verifier's next-token distribution: the choices greedy
             # constrained decoding makes, at a fraction of its cost (a cold-started policy's rubrics
             # all parse, so every group is verified); "rlcer" keeps the default table's setting
             # called as the trained verifier is (the same items per call), so the two rows differ in the weights only
             "rlcer+coldstart": BenchRow("rlcer+coldstart", "MathRubric-v0",
                                         {"verifier_scoring": "probability", "verifier_items_per_call": per_call}, adapter=adapter),
             "rlcer+coldstart+trained_verifier": BenchRow(
                 "rlcer+coldstart+trained_verifier", "MathRubric-v0",
                 {"verifier": f"local:{verifier['checkpoint']}", "verifier_scoring": "probability",
                  "verifier_items_per_call": per_call}, adapter=adapter),
             "rlcer+oracle_verifier:0.9": BenchRow("rlcer+oracle_verifier:0.9", "MathRubric-v0", {"verifier": "oracle:0.9"},
                                                   adapter=adapter)}
    chosen = ["rlvr"] + [name for name in args.rows.split(",") if name != "rlvr"]
    budget = dict(steps=args.steps, eval_tasks=args.eval_tasks, seeds=tuple(int(s) for s in args.seeds.split(",")))
    if args.smoke:
        budget.update(group_size=2, groups_per_step=1, max_new_tokens=8, resamples=200, judge_max_fixes=0)
    # rows measured before with the same knobs, start and budget are reused (a bench row costs 4-20 minutes here)
    reuse = () if args.smoke else tuple(str(p) for p in sorted(RESULTS.glob(f"{args.results_name}*.json")))
    rows = {r["scheme"]: r for r in run_bench(BenchConfig(
        envs=("Math-v0",), env_kwargs={"levels": [args.level]} if args.level else {},
        rows=tuple(every[name] for name in chosen), judge="local", results_name=args.results_name,
        output_dir=str(RESULTS), command="python benchmarks/rlcer.py" + (" --smoke" if args.smoke else ""), reuse=reuse,
        **budget))}
    hints = stage(work / "hints", lambda: hint_probe(adapter, args.hint_tasks)) if args.hint_tasks else None
    write_results(args, coldstart, verifier, rows, hints, (time.perf_counter() - started) / 60)
    parts = [f"rlvr={Interval.of(rows['rlvr']['mean']).token()}"]
    short = {"rlcer": "untrained", "rlcer+coldstart": "coldstart", "rlcer+coldstart+trained_verifier": "full",
             "rlcer+oracle_verifier:0.9": "oracle", "rlvr+coldstart": "rlvr_coldstart"}
    for name, row in rows.items():
        if name in short:
            tag = short[name]
            parts += [f"{'rlcer_' if name.startswith('rlcer') else ''}{tag}={Interval.of(row['mean']).token()}",
                      f"valid_fraction_{tag}={fraction(row.get('rubric_valid_fraction'))}",
                      f"informative_valid_fraction_{tag}={fraction(row.get('rubric_informative_valid_fraction'))}",
                      f"diff_{tag}={Interval.of(row['difference']).token()}", f"tokens_{tag}={row['policy_completion_tokens']}"]
    parts += [f"tokens_rlvr={rows['rlvr']['policy_completion_tokens']}"]
    if hints:
        parts.append(f"hint_diff={Interval.of(hints['difference']).token()}")
    print("RESULT " + " ".join(parts))
    return 0


def write_results(args, coldstart: dict, verifier: dict, rows: dict, hints: dict, minutes: float) -> None:
    untrained, trained = coldstart["untrained_probe"], coldstart["probe"]
    lines = [f"# RLCER at small scale (`python benchmarks/rlcer.py{' --smoke' if args.smoke else ''}`)", "",
             f"{minutes:.0f} min in this invocation (finished stages in `{args.work}` and a bench table with the same "
             "rows and budget are reused; each stage's and row's own minutes are below).", "",
             f"## 1. Cold start of the rubric writer ({coldstart['steps']} SFT steps of 8 rows, "
             f"{coldstart['minutes']:.1f} min; loss {coldstart['loss_first']:.3f} -> {coldstart['loss_last']:.3f})", "",
             f"Held-out rubricator prompts ({args.probe_rows}, generator test tasks), greedy:", "",
             "| policy | format rate | items per rubric | checkable items | states the right answer |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, p in (("untrained", untrained), ("cold start", trained)):
        lines.append(f"| {name} | {p['format_rate']:.2f} | {p['items_per_rubric']:.1f} | {p['checkable_share']:.2f} | "
                     f"{p['right_answer_share']:.2f} |")
    lines += ["", f"Cold-started example: `{trained['example'][:300]}`", "",
              f"## 2. Verifier ({verifier['steps']} SFT steps, {verifier['minutes']:.1f} min; loss "
              f"{verifier['loss_first']:.3f} -> {verifier['loss_last']:.3f})", "",
              f"Held-out verifier rows ({args.verifier_probe_rows}, {args.verifier_items_per_call} item(s) each"
              f"{', as many yes as no' if args.verifier_items_per_call == 1 else ''}), called as the bench rows call it "
              "(verdicts by probability):", "",
              "| verifier | verdict accuracy | balanced accuracy | failed calls | seconds per call |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for name, p in (("untrained (local)", verifier["untrained_probe"]), ("trained", verifier["probe"])):
        lines.append(f"| {name} | {p['accuracy']:.3f} | {p['balanced_accuracy']:.3f} | {p['failed_calls']:.2f} | "
                     f"{p['seconds_per_call']:.1f} |")
    level = f"level {args.level}" if args.level else "the default level"
    lines += ["", f"## 3. Bench rows (Math-v0 at {level}, {args.steps} steps, seeds {args.seeds}, {args.eval_tasks} held-out tasks; "
              "paired 95 % intervals over seeds x tasks, * = excludes 0)", "",
              "| row | held-out after | gain over untrained | difference from rlvr | rubric valid fraction (all / informative groups) | "
              "verifier calls | policy completion tokens | minutes |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, row in rows.items():
        difference = "(reference)" if name == "rlvr" else Interval.of(row["difference"]).signed()
        valid = valid_fractions(row)
        lines.append(f"| {name} | {Interval.of(row['mean'])} | {Interval.of(row['gain']).signed()} | {difference} | {valid} | "
                     f"{row['judge_calls']} | {row['policy_completion_tokens']} | {row['minutes']:.1f} |")
    if hints:
        lines += ["", f"## 4. Rubric hints at inference ({hints['tasks']} held-out tasks, cold-started policy, greedy; "
                  "the hint is the policy's own rubric for its first answer, positive items)", "",
                  f"Without hints {Interval.of(hints['no_hint'])}; with hints {Interval.of(hints['hint'])}; paired "
                  f"difference {Interval.of(hints['difference']).signed()}; {hints['with_hint_share']:.2f} of the tasks "
                  "got a hint.", "", f"Example hint: `{(hints['example_hint'] or '').replace(chr(10), ' / ')}`"]
    lines += ["", "Rows with an in-process LLM verifier other than `rlcer` read its verdicts by probability "
              "(`verifier_scoring`): the choices constrained decoding makes, at a fraction of its cost."]
    lines += ["", "Per-step diagnostics (valid fraction, items per rubric, degenerate groups, the chain-of-thought "
              f"reward's correlation with correctness) are in `{args.results_name}.json` beside this table."]
    (RESULTS / f"{args.results_name}_stages.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())

"""The bench's report: its RESULT line, tables, plot and stored results (``rubricgym bench``
writes them with :func:`write_results`; :mod:`rubricgym.app.bench` runs the grid)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubricgym.app.bench import BenchConfig


def result_line(rows: list[dict[str, Any]]) -> str:
    """``RESULT schemes=<n> <suite>:<scheme>=<mean>[<low>,<high>] ...``: each row's held-out mean
    with its interval (over seeds, Student's t, from 2 seeds on; with one seed the bootstrap over
    tasks), its IQM and, against the reference, P(improvement) and a verdict (``better``,
    ``worse``, ``not_established``: a claim needs >= 3 seeds and an interval excluding 0); then
    ``seeds=<n>`` and ``mdd=<d>``, the largest of the rows' minimum detectable differences at
    80 % power (inf below 2 seeds)."""
    parts, mdds = [], []
    for r in rows:
        key, few = f"{r['suite']}:{r['scheme']}", r.get("few_seed") or {}
        interval = few["mean"] if few.get("seeds", 0) >= 2 else r["mean"]
        parts.append(f"{key}={interval['mean']:.3f}[{interval['low']:.2f},{interval['high']:.2f}]")
        if few:
            parts.append(f"{key}_iqm={few['iqm']:.3f}")
        if few.get("difference"):
            d = few["difference"]
            parts += [f"{key}_difference={d['mean']:+.3f}[{d['low']:+.2f},{d['high']:+.2f}]",
                      f"{key}_p_improvement={few['p_improvement']:.2f}", f"{key}_verdict={few['verdict'].replace(' ', '_')}"]
            mdds.append(few["mdd"])
    gains = [f"{r['suite']}:{r['scheme']}_gain_significant={int(r['gain']['significant'])}" for r in rows
             if r["scheme"] == r["reference"]]
    seeds = len(rows[0]["seeds"]) if rows else 0
    mdd = max(mdds) if mdds else float("inf")
    return f"RESULT schemes={len(rows)} " + " ".join(parts + gains + [f"seeds={seeds}", f"mdd={mdd:.3f}"])


def few_seed_table(rows: list[dict[str, Any]]) -> str:
    """Seeds as the unit: per row the mean over seeds with Student's t interval, IQM, and against
    the reference the paired difference, P(improvement), the minimum detectable difference at
    80 % power and the verdict."""
    lines = ["| suite | scheme | seeds | held-out mean [95 % t CI over seeds] | IQM | difference from reference [95 % t CI] "
             "| P(improvement) | MDD (80 % power) | verdict |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        few = r.get("few_seed")
        if not few:
            continue
        m, d = few["mean"], few["difference"]
        mean = f"{m['mean']:.3f} [{m['low']:.2f}, {m['high']:.2f}]" if few["seeds"] >= 2 else f"{m['mean']:.3f}"
        difference = "-" if d is None else (f"{d['mean']:+.3f} [{d['low']:+.2f}, {d['high']:+.2f}]" if few["seeds"] >= 2
                                            else f"{d['mean']:+.3f}")
        p = "-" if few["p_improvement"] is None else f"{few['p_improvement']:.2f}"
        mdd = "-" if few["mdd"] is None else f"{few['mdd']:.3f}"
        lines.append(f"| {r['suite']} | {r['scheme']} | {few['seeds']} | {mean} | {few['iqm']:.3f} | {difference} | {p} | "
                     f"{mdd} | {few['verdict']} |")
    return "\n".join(lines)


def _interval(value: dict[str, Any] | None, signed: bool = False) -> str:
    if value is None:
        return ""
    if not signed:
        return f"{value['mean']:.3f} [{value['low']:.2f}, {value['high']:.2f}]"
    return f"{value['mean']:+.3f} [{value['low']:+.2f}, {value['high']:+.2f}]{' *' if value['significant'] else ''}"


def valid_fractions(row: dict[str, Any]) -> str:
    """A row's rubric valid fraction over all groups and over the informative ones (some right, some
    wrong: the only groups where an item can track correctness); empty without rubrics."""
    if row.get("rubric_valid_fraction") is None:
        return ""
    informative = row.get("rubric_informative_valid_fraction")
    return f"{row['rubric_valid_fraction']:.2f} / " + ("-" if informative is None else f"{informative:.2f}")


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The bench table: held-out numbers with paired 95 % intervals (* = excludes 0), then costs."""
    lines = ["| suite | scheme | held-out before | held-out after [95 % CI] | gain over before | difference from reference "
             "| mean training reward | mean training success | judge calls (failed groups) "
             "| judge prompt / completion tokens | rubric valid fraction (all / informative groups) | policy completion tokens "
             "| minutes |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        valid = valid_fractions(r)
        difference = f"(reference: {r['scheme']})" if r.get("difference") is None else _interval(r["difference"], True)
        lines.append(f"| {r['suite']} | {r['scheme']} | {r['held_out_before']:.3f} | {_interval(r.get('mean'))} | "
                     f"{_interval(r.get('gain'), True)} | {difference} | "
                     f"{r['mean_train_reward']:+.3f} | {r['mean_train_accuracy']:.3f} | {r['judge_calls']} "
                     f"({r['judge_failed_groups']}) | {r['judge_prompt_tokens']} / {r['judge_completion_tokens']} | "
                     f"{valid} | {r['policy_completion_tokens']} | {r['minutes']:.1f} |")
    return "\n".join(lines)


def write_results(rows: list[dict[str, Any]], curves: dict[str, dict[str, list[float]]], config: BenchConfig) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = config.results_name or ("reward_schemes_quick" if config.steps <= 4 else "reward_schemes_full")
    suites = [suite for suite in config.envs if any(r["suite"] == suite for r in rows)]
    fig, axes = plt.subplots(3, len(suites), figsize=(6 * len(suites), 10), squeeze=False)
    for column, suite in enumerate(suites):
        for row, (metric, label) in enumerate([("reward", "training reward (each scheme on its own scale)"),
                                               ("accuracy", "training success (verified, same scale)")]):
            ax = axes[row][column]
            for key, values in curves.items():
                if key.startswith(suite + ":") and metric in values:  # a reused row may come without curves
                    ax.plot(range(1, len(values[metric]) + 1), values[metric], marker="o", label=key.split(":", 1)[1])
            ax.set_title(f"{suite}: {label}", fontsize=10)
            ax.set_xlabel("step")
            if ax.get_legend_handles_labels()[0]:  # every row reused without curves: nothing to name
                ax.legend(fontsize=8)
        ax = axes[2][column]
        suite_rows = [r for r in rows if r["suite"] == suite]
        if suite_rows:
            means = [r["held_out_after"] for r in suite_rows]
            errors = [[m - r["mean"]["low"] for m, r in zip(means, suite_rows)],
                      [r["mean"]["high"] - m for m, r in zip(means, suite_rows)]]
            colors = ["tab:green" if r["gain"]["significant"] and r["gain"]["mean"] > 0 else "tab:gray" for r in suite_rows]
            ax.bar(range(len(suite_rows)), means, yerr=errors, capsize=4, color=colors)
            ax.axhline(suite_rows[0]["held_out_before"], color="black", ls="--", lw=1, label="before training")
            ax.set_xticks(range(len(suite_rows)), [r["scheme"] for r in suite_rows], fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.set_title(f"{suite}: held-out after, 95 % CI (green: gain significant)", fontsize=10)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=110)
    plt.close(fig)
    (out / f"{stem}.md").write_text(
        f"Command: `{config.command}`\n\nJudge: `{getattr(config.judge, 'name', config.judge)}`"
        f"{' at ' + config.api_base if config.api_base else ''} (RULER explanations up to {config.judge_explanation_chars} "
        f"characters, {config.judge_max_tokens} tokens per call, {config.judge_scoring} scores); "
        f"seeds {', '.join(map(str, config.seeds))} (the same for every scheme); {config.steps} steps per scheme; "
        + "; ".join(f"{suite}: {b['groups_per_step']} groups x {b['group_size']}, {b['max_new_tokens']} tokens"
                    for suite, b in ((s, config.budget(s)) for s in config.envs))
        + f"; {config.eval_tasks} held-out tasks per family (the same for every run).\n\n"
        "Intervals: paired 95 % bootstrap over seeds x held-out tasks; the difference is from the family's "
        "env-reward row (math: rlvr, RAG: components); * marks an interval that excludes 0.\n\n"
        f"{markdown_table(rows)}\n\n"
        "Claims rest on seeds, not tasks: the table below treats each seed's held-out mean as one observation "
        "(Student's t over seeds, differences paired by seed). A difference is established only with >= 3 seeds and "
        "an interval that excludes 0; MDD is the smallest true difference this many seeds would detect at 80 % power, "
        "from the measured spread of the paired differences.\n\n"
        f"{few_seed_table(rows)}\n\n"
        f"Code: `{(rows[0].get('provenance') or {}).get('commit', 'unknown') if rows else 'unknown'}`; packages: "
        f"{', '.join(f'{k} {v}' for k, v in ((rows[0].get('provenance') or {}).get('packages') or {}).items()) if rows else ''}.\n")
    (out / f"{stem}.json").write_text(json.dumps({"config": config.__dict__, "rows": rows, "curves": curves},
                                                                indent=2, default=str))

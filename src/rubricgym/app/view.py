"""``rubricgym view``: one self-contained HTML report of a run (or of ``rubricgym judge --output``).

Reads ``metrics.jsonl`` and ``groups.jsonl`` of a run folder (or one JSONL file of group rows),
plots the curves with matplotlib (PNG inlined as base64) and renders the Jinja2 template
``templates/report.html``: no server, no CDN, it opens offline. Groups are browsed per step,
their trajectories side by side with reward components, the judge's scores and reasons, and
rubric items coloured by validity; failed judgements are marked and can be filtered.

    rubricgym view runs/latest            # writes runs/latest/report.html
    rubricgym view judged.jsonl -o judged.html
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

CURVES = (("reward", "training reward"), ("train_accuracy", "training success"), ("eval_accuracy", "held-out accuracy"),
          ("approx_kl", "approx. KL"), ("entropy", "entropy"), ("clip_fraction", "clip fraction"),
          # whether the reward can teach (agents/diagnostics.py): spread, silent groups, verifier agreement
          ("group_reward_std", "within-group reward std"), ("zero_variance_fraction", "zero-variance groups"),
          ("trained_fraction", "completions that trained"), ("reward_verifier_agreement", "reward-verifier agreement"),
          # RLCER's diagnostics (rubric runs only)
          ("rubric_valid_fraction", "rubric valid fraction"),
          ("rubric_informative_valid_fraction", "valid fraction, informative groups"),
          ("rubric_items_per_rubric", "items per rubric"),
          ("rubric_degenerate", "degenerate groups"), ("rubric_cot_correct_corr", "CoT reward vs correctness"))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file, each tagged with where it came from (``_where``: ``file:line``)."""
    from rubricgym.data import DatasetLoadError, read_file

    try:
        rows = read_file(path)
    except DatasetLoadError as err:
        raise SystemExit(str(err)) from None
    # numbered as read_file reads them: split at "\n" only (splitlines also splits at U+2028 in a message)
    lines = [n for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1) if line.strip()]
    tagged = []
    for row, line in zip(rows, lines):
        if not isinstance(row, dict):
            raise SystemExit(f"{path}:{line}: a row must be a JSON object, got {type(row).__name__}")
        tagged.append({**row, "_where": f"{path}:{line}"})
    return tagged


def load(source: str | Path) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """``(title, metric rows, group rows)`` of a run folder or a JSONL file of group rows."""
    source = Path(source)
    if source.is_dir():
        metrics = read_jsonl(source / "metrics.jsonl") if (source / "metrics.jsonl").is_file() else []
        groups = read_jsonl(source / "groups.jsonl") if (source / "groups.jsonl").is_file() else []
        if not metrics and not groups:
            raise SystemExit(f"{source}: no metrics.jsonl or groups.jsonl (is it a `rubricgym train` output folder?)")
        return f"run {source.resolve().name}", _checked_metrics(metrics), groups
    if not source.is_file():
        raise SystemExit(f"{source}: no such file or folder")
    rows = read_jsonl(source)
    groups = [r for r in rows if r.get("kind") == "group"]
    if not groups:
        raise SystemExit(f"{source}: no group rows (expected the output of `rubricgym judge --output` or groups.jsonl)")
    return source.name, [], groups


def _checked_metrics(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metric rows with a numeric step; a row without one is named, not plotted into a traceback."""
    for row in rows:
        if isinstance(row.get("step"), bool) or not isinstance(row.get("step"), (int, float)):
            raise SystemExit(f"{row['_where']}: a metrics row needs a numeric 'step', got {row.get('step')!r:.60}")
    return rows


def present_curves(metrics: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (metric, label) of each curve the run has."""
    return [(key, label) for key, label in CURVES if any(key in row for row in metrics)]


def curves_png(metrics: list[dict[str, Any]]) -> str | None:
    """The run's curves as one PNG, base64-encoded (None without metrics)."""
    present = present_curves(metrics)
    if not present:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(present), figsize=(3.2 * len(present), 2.6), squeeze=False)
    for ax, (key, label) in zip(axes[0], present):
        points = [(row["step"], row[key]) for row in metrics if key in row and row[key] is not None]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _failed(group: dict[str, Any]) -> bool:
    return any(t.get("judged", {}).get("ruler_failed") for t in group["trajectories"]) or bool(
        (group.get("group_info") or {}).get("rubric_stats", {}).get("verifier_failures"))


def render(source: str | Path, output: str | Path | None = None) -> Path:
    """Write the report of ``source`` and return its path."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    title, metrics, groups = load(source)
    template = Environment(loader=PackageLoader("rubricgym.app", "templates"),
                           autoescape=select_autoescape(["html"])).get_template("report.html")

    def page(shown: list[dict[str, Any]], curves: str | None) -> str:
        steps: dict[Any, list[dict[str, Any]]] = {}
        for group in shown:
            steps.setdefault(group.get("step"), []).append(group)
        return template.render(title=title, curves=curves, groups=shown, failed=sum(g["failed"] for g in shown),
                               steps=sorted(steps.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)),
                               metrics_rows=len(metrics), curve_labels=[label for _, label in present_curves(metrics)])

    for index, group in enumerate(groups):
        group["index"] = index
        try:  # a row the report cannot show is named, with what is wrong in it
            if isinstance(group.get("step"), bool) or not isinstance(group.get("step"), (int, float, type(None))):
                raise TypeError(f"'step' must be a number or null, got {group.get('step')!r:.60}")
            group["failed"] = _failed(group)
            page([group], None)
        except Exception as err:
            raise SystemExit(f"{group['_where']}: this group row cannot be shown ({type(err).__name__}: "
                             f"{str(err)[:200]})") from None
    html = page(groups, curves_png(metrics))
    path = Path(output) if output else (Path(source) / "report.html" if Path(source).is_dir() else Path(source).with_suffix(".html"))
    path.write_text(html, encoding="utf-8")
    return path

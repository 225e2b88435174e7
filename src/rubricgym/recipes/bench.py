"""The ``bench`` recipe: reward schemes side by side, with its named presets (``--quick``, ``--smoke``)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rubricgym.app.bench import BenchConfig

from . import EnvSettings, JudgeSettings, recipe

#: ``rubricgym bench --quick``: a small budget, 3 seeds (the fewest a claim can rest on)
QUICK_BENCH = {"seeds": (0, 1, 2), "steps": 2, "groups_per_step": 1, "group_size": 4, "eval_tasks": 16,
               "judge_max_tokens": 300, "judge_max_fixes": 1}
#: ``rubricgym bench --smoke``: seconds, a simulated judge, results in a scratch folder (CI runs it)
SMOKE_BENCH = {"schemes": ("ruler",), "steps": 1, "groups_per_step": 1, "group_size": 2,
               "max_new_tokens": 8, "eval_tasks": 4, "resamples": 200, "results_name": "reward_schemes_smoke"}


@dataclass
class BenchRecipe:
    """``rubricgym bench``: the bench's settings, the families' knobs and the judge."""

    bench: BenchConfig = field(default_factory=BenchConfig)
    env: EnvSettings = field(default_factory=EnvSettings)
    judge: JudgeSettings = field(default_factory=lambda: JudgeSettings(judge="local"))

    def bench_config(self) -> BenchConfig:
        """The :class:`BenchConfig` these settings describe."""
        return replace(self.bench, env_kwargs=dict(self.env.env_kwargs), judge=self.judge.judge,
                       api_base=self.judge.api_base)


def quick() -> dict[str, Any]:
    return {f"bench.{name}": value for name, value in QUICK_BENCH.items()}


def smoke() -> dict[str, Any]:
    from rubricgym.registration import default_env

    return {**{f"bench.{name}": value for name, value in SMOKE_BENCH.items()},
            "bench.envs": (default_env(),),  # one family: the default one
            "bench.output_dir": str(Path(tempfile.gettempdir()) / "rubricgym-smoke-results"), "judge.judge": "oracle:1.0"}


def _shown(preset: dict) -> str:
    return ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in preset.items())


@recipe(name="bench", config=BenchRecipe, skip=("bench.judge", "bench.api_base", "bench.env_kwargs", "bench.command",
                                                 "env.env"),
        command="bench.command",
        presets={"quick": ("a small budget over 3 seeds (add --workers 2 to fan out; its time on a 2-core CPU is in "
                           "docs/bench.md): " + _shown(QUICK_BENCH), quick),
                 "smoke": ("seconds, for CI: judge oracle:1.0, " + _shown(SMOKE_BENCH) + "; results in a scratch folder",
                           smoke)},
        help="compare reward schemes side by side (same env family, agent, seeds, budget)")
def run_bench(config: BenchRecipe) -> int:
    from rubricgym.app.bench import run_bench as bench
    from rubricgym.app.bench_report import markdown_table, result_line

    rows = bench(config.bench_config())
    print(markdown_table(rows))
    print(result_line(rows))
    return 0

"""The command line: each command a recipe (config dataclass + run), every flag generated from the
config once, presets as named configs, checkpoints read back with their own settings, bad settings
refused before any work."""

from __future__ import annotations

import ast
from pathlib import Path

import gymnasium as gym
import pytest

import rubricgym  # noqa: F401
from rubricgym import recipes

ROOT = Path(__file__).resolve().parents[1]


def parse(*argv: str):
    return recipes.parse(list(argv))


def test_train_flags_come_from_the_config_dataclasses():
    from rubricgym.agents.grpo import GRPOConfig
    from rubricgym.agents.train import TrainConfig

    config = parse("train").train_config()
    # no flag: every default is the dataclass's, the env the default family's (its knobs come from the family)
    assert config == TrainConfig(env="Math-v0")
    config = parse("train", "--env", "MathRuler-v0", "--judge", "openai/x", "--steps", "3", "--lora-r", "8",
                   "--grpo-beta", "0.05", "--grpo-loss-type", "dr_grpo", "--no-ppo-normalize-per-role",
                   "--lr", "1e-3", "--env-kwargs", '{"levels": [1, 2]}').train_config()
    assert (config.env, config.steps, config.policy.lora_r) == ("MathRuler-v0", 3, 8)
    assert config.env_kwargs == {"levels": [1, 2], "judge": "openai/x"}
    # the rubric scheme's judge knob is its verifier; a base id takes no judge; bad JSON is refused by argparse
    assert parse("train", "--env", "WordSortRubric-v0", "--judge", "oracle:1.0").train_config().env_kwargs == {
        "verifier": "oracle:1.0"}
    with pytest.raises(SystemExit, match="takes no judge"):
        parse("train", "--env", "Math-v0", "--judge", "openai/x").train_config()
    for bad in ("[1, 2]", "{levels: 1}"):
        with pytest.raises(SystemExit):
            parse("train", "--env-kwargs", bad)
    assert config.grpo == GRPOConfig(beta=0.05, loss_type="dr_grpo", learning_rate=1e-3)
    assert config.ppo.normalize_per_role is False and config.ppo.learning_rate == 1e-3
    with pytest.raises(SystemExit):
        parse("train", "--grpo-loss-type", "mean")  # Literal fields are choices


def test_help_shows_each_knobs_docstring_and_default(capsys):
    with pytest.raises(SystemExit):
        parse("train", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "--grpo-epsilon-high GRPO_EPSILON_HIGH Upper clip of the ratio" in text and "(default: 0.28)" in text
    assert "--ppo-epsilon-high" in text and "(default: 0.2)" in text  # PPO's own default of the shared knob
    assert "--judge JUDGE The judge, or the rubric verifier" in text and "--env ENV A registered id" in text


def test_bench_quick_preset_and_explicit_flags():
    from rubricgym.app.bench import BenchConfig

    quick = parse("bench", "--quick").bench_config()
    assert (quick.steps, quick.group_size, quick.groups_per_step, quick.eval_tasks, quick.seeds) == (2, 4, 1, 16, (0, 1, 2))
    assert parse("bench", "--seeds", "0,1,2").bench.seeds == (0, 1, 2)
    assert parse("bench", "--quick", "--steps", "5").bench.steps == 5  # an explicit flag wins over the preset
    assert parse("bench", "--quick", "--steps", "5").bench.seeds == (0, 1, 2)  # and the preset's other knobs stay
    assert parse("bench").bench.steps == BenchConfig().steps and parse("bench", "--envs", "WordSort-v0").bench.envs == (
        "WordSort-v0",)
    assert parse("bench", "--envs", "Math-v0", "--env-kwargs", '{"levels": [2]}').bench_config().env_kwargs == {"levels": [2]}
    assert BenchConfig().envs == ("Math-v0", "RagSupport-v0")  # the families that ask for the default bench
    smoke = parse("bench", "--smoke", "--steps", "2").bench_config()
    assert (smoke.judge, smoke.envs, smoke.steps) == ("oracle:1.0", ("Math-v0",), 2)
    # the recorded command gives the same config back
    assert smoke.command == "rubricgym bench --smoke --steps 2"
    assert parse(*smoke.command.split()[1:]).bench_config() == smoke
    with pytest.raises(SystemExit):
        parse("bench", "--quick", "--smoke")  # one preset at a time


def test_every_command_is_a_recipe_and_judge_is_declared_once(capsys):
    from rubricgym.recipes import RECIPES, JudgeSettings

    recipes.parser()
    assert {"train", "eval", "bench", "train-judge", "judge-eval", "serve", "rubric-data", "view"} <= set(RECIPES)
    # --judge: the field of JudgeSettings, in every command that takes a judge, with the same help
    helps = set()
    for name in ("train", "bench", "judge", "judge-eval", "serve", "judge-proxy"):
        with pytest.raises(SystemExit):
            parse(name, "--help")
        text = " ".join(capsys.readouterr().out.split())
        helps.add(text.split("--judge JUDGE ", 1)[1][:60])
    assert len(helps) == 1 and JudgeSettings.__doc__
    # no hand-written flag anywhere in the application: every add_argument call is the generator's
    calls = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in (ROOT / "src" / "rubricgym").rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
             and getattr(node.func, "attr", "") == "add_argument" and "flags.py" not in path.name
             and "recipes" not in path.parts]
    assert calls == []
    assert len((ROOT / "src" / "rubricgym" / "app" / "cli.py").read_text().splitlines()) <= 250
    with pytest.raises(TypeError, match="takes a TrainRecipe"):
        recipes.run("train", parse("eval"))


def test_eval_builds_the_checkpoint_s_adapter_shape(tmp_path):
    import json

    folder = tmp_path / "checkpoint-3"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"policy": {"model": None, "lora_r": 8, "lora_alpha": 16,
                                                               "max_new_tokens": 99}}))
    config = parse("eval", "--checkpoint", str(folder), "--max-new-tokens", "20").policy_config()
    assert (config.lora_r, config.lora_alpha, config.max_new_tokens) == (8, 16, 20)  # shape from the checkpoint
    assert parse("eval").policy_config().lora_r == 0  # the base model alone
    with pytest.raises(FileNotFoundError, match="not a checkpoint"):
        parse("eval", "--checkpoint", str(tmp_path)).policy_config()


@pytest.mark.parametrize("make,error", [
    (lambda: gym.make("MathRuler-v0", combine="avg"), "combine must be"),
    (lambda: gym.make("Math-v0", tools="calculator"), "did you mean"),
    (lambda: gym.make("Math-v0", split="val"), "split must be one of"),
    (lambda: gym.make("ToolUse-v0", split="val"), "split must be one of"),
    (lambda: gym.make("RagSupport-v0", mode="chat"), "mode must be one of"),
    (lambda: gym.make("Math-v0", level=1), "unknown keyword 'level'; MathEnvConfig has: .*levels"),
    (lambda: gym.make_vec("Math-v0", num_envs=2, group_size=2, vectorization_mode="sync"), "group vector env's knob"),
])
def test_bad_settings_fail_at_construction(make, error):
    with pytest.raises((ValueError, TypeError), match=error):
        make()


def test_unknown_env_fails_before_the_model_loads():
    from rubricgym.agents.train import TrainConfig, Trainer

    with pytest.raises(gym.error.UnregisteredEnv, match="rubricgym envs"):
        Trainer(TrainConfig(env="Math-v9"), policy=None)  # would load the model if it got that far


def _documented_commands() -> list[str]:
    """Every complete `rubricgym <command> ...` line in the shell blocks of README.md and
    docs/*.md (placeholders, elisions and continued lines left out), split at `&&`, cut at a comment."""
    import re

    found = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```(?:bash|sh|shell|console)?\n(.*?)```", page.read_text(), re.DOTALL):
            for line in block.splitlines():
                for part in line.split("&&"):
                    part = part.split(" #", 1)[0].strip().removeprefix("$ ")
                    if re.match(r"rubricgym [a-z]", part) and not re.search(r"[<\[]|\.\.\.|\\$|\|", part):
                        found.add(part)
    return sorted(found)


def test_every_documented_command_line_parses(capsys):
    import shlex

    commands = _documented_commands()
    assert len(commands) >= 15  # 20 when written
    bad = []
    for command in commands:
        words = shlex.split(command)[1:]
        try:
            recipes.parse(words)
        except SystemExit as stop:
            if stop.code:  # --help exits 0
                bad.append(f"{command}: {capsys.readouterr().err.strip().splitlines()[-1:]}")
    assert bad == []


def test_a_command_builds_only_its_own_config_once(monkeypatch):
    # the bench's config checks its families when made (building their envs): building the parser or
    # another command must not make it, and `bench --envs Math-v0` must make it once, with Math alone
    # (an install without the RAG extra runs `rubricgym train --help` and `bench --envs Math-v0`)
    from rubricgym.app.bench import BenchConfig

    made = []
    checked = BenchConfig.__post_init__
    monkeypatch.setattr(BenchConfig, "__post_init__", lambda self: (made.append(self.envs), checked(self)))
    recipes.parser()
    parse("train", "--steps", "2")
    assert made == []
    parse("bench", "--quick", "--envs", "Math-v0")
    assert made == [("Math-v0",)]

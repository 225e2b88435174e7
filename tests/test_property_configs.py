"""Property-based fuzzing of everything around the step (the step itself: test_property_hostile.py):
every knob of every registered id and scheme at construction, reset options, close / copy
lifecycles, the group vector env's own arguments, and ``OpenEnv-v0`` driving a misbehaving server.
Hypothesis draws the inputs (derandomized, so CI sees the same cases every run); the probes and
strategies are rubricgym.testing.configs and rubricgym.testing.misbehaving, which
``benchmarks/fuzz.py`` runs at a larger budget."""

import warnings

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rubricgym  # noqa: F401
from rubricgym.registration import ENVS
from rubricgym.testing.configs import (LIFECYCLE_OPS, base_kwargs, group_arguments, knob_values, knobs_of, option_values,
                                       probe_group, probe_knobs, probe_lifecycle, probe_options, reset_seeds)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]  # judge-failure warnings are the judged ids' tests'
IDS = sorted(ENVS)
DRAWN = dict(derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def served_url():
    """A real served env for the OpenEnv ids to play."""
    from rubricgym.openenv.server import make_app, serve_in_thread

    with serve_in_thread(make_app("WordSort-v0")) as url:
        yield url


def test_every_id_has_knobs_to_draw():
    assert len(IDS) >= 25
    assert {"max_turns", "num_tasks", "outcome_weight"} <= set(knobs_of("ToolUse-v0"))
    assert {"judge", "permutations", "history_size", "combine"} <= set(knobs_of("MathRuler-v0"))
    assert {"message_timeout_s", "reset_kwargs"} <= set(knobs_of("OpenEnv-v0"))


@pytest.mark.parametrize("env_id", IDS)
def test_any_knob_is_refused_by_name_at_construction_or_works(env_id, served_url):
    problems: list[str] = []

    @settings(max_examples=40, **DRAWN)
    @given(st.dictionaries(st.sampled_from(knobs_of(env_id)), knob_values(), min_size=1, max_size=3))
    def construct(knobs):
        problems.extend(probe_knobs(env_id, knobs, served_url))

    construct()
    assert problems == []


@pytest.mark.parametrize("env_id", IDS)
def test_any_reset_options_are_refused_by_name_or_play(env_id, served_url):
    problems: list[str] = []
    env = gym.make(env_id, disable_env_checker=True, **base_kwargs(env_id, served_url))

    @settings(max_examples=30, **DRAWN)
    @given(st.integers(0, 10**6), option_values())
    def reset(seed, options):
        problems.extend(probe_options(env, env_id, seed, options))

    reset()
    env.close()
    assert problems == []


@pytest.mark.parametrize("env_id", IDS)
def test_any_lifecycle_of_an_env_and_its_copy_never_raises(env_id, served_url):
    problems: list[str] = []

    @settings(max_examples=15, **DRAWN)
    @given(st.lists(st.sampled_from(LIFECYCLE_OPS), max_size=8), st.integers(0, 1000))
    def lifecycle(ops, seed):
        problems.extend(probe_lifecycle(env_id, ops, seed, served_url))

    lifecycle()
    assert problems == []


@pytest.mark.parametrize("env_id", [i for i in IDS if not i.startswith("OpenEnv")])
def test_the_group_env_refuses_any_shape_seed_or_options_by_name_or_plays(env_id):
    problems: list[str] = []

    @settings(max_examples=10, **DRAWN)
    @given(group_arguments(), reset_seeds(), st.none() | option_values(), st.integers(0, 1000))
    def group(arguments, seed, options, actions_seed):
        problems.extend(probe_group(env_id, arguments, seed, options, actions_seed))

    group()
    assert problems == []


def test_openenv_client_against_a_misbehaving_server_never_crashes():
    """Replies damaged every way :mod:`rubricgym.testing.misbehaving` knows (NaN / huge / wrong-typed
    values anywhere, dropped keys, text, bytes, error frames, closes, silence, doubled replies) and a
    damaged schema: the client refuses construction or reset clearly, and every step answers the
    agent with an observation in its space and a finite reward."""
    from rubricgym.openenv.server import make_app, serve_in_thread
    from rubricgym.testing.misbehaving import MisbehavingServer, faults, play_against

    problems: list[str] = []
    with serve_in_thread(make_app("WordSort-v0")) as upstream:
        server = MisbehavingServer(upstream)
        with serve_in_thread(server.app()) as url:

            @settings(max_examples=150, **DRAWN)
            @given(st.lists(faults(), max_size=6), st.none() | faults())
            def play(script, schema_fault):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    problems.extend(play_against(server, url, script, schema_fault)[0])

            play()
            assert server.replies > 150  # the script reached the client (the faults were consumed)
    assert problems == []

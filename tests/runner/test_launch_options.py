"""LaunchOptions: the one check of the options every engine step launches an app with."""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest

from torchx_core.runner.launch_options import (
    InvalidLaunchOptionsError,
    InvalidTaskArgumentError,
    LaunchOptions,
)
from torchx_core.specs import Workspace


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"scheduler": ""}, "scheduler must be a scheduler name such as 'local_cwd'"),
        ({"scheduler": "  "}, "(`torchx schedulers` lists them), got '  '"),
        ({"scheduler": 3}, "scheduler must be a scheduler name such as 'local_cwd'"),
        ({"scheduler": None}, "got None"),
        ({"cfg": ["a"]}, "cfg must be a mapping (dict) of the scheduler's run options, got ['a']"),
        ({"workspace": 3}, "workspace must be a path or URL string, a Workspace or None, got 3"),
        ({"poll_interval": 0}, "poll_interval must be a finite number of seconds > 0, got 0"),
        ({"poll_interval": -1.5}, "poll_interval must be a finite number of seconds > 0"),
        ({"poll_interval": "5s"}, "poll_interval must be a finite number of seconds > 0, got '5s'"),
        ({"poll_interval": True}, "poll_interval must be a finite number of seconds > 0, got True"),
        ({"poll_interval": math.nan}, "poll_interval must be a finite number of seconds > 0"),
        ({"unknown_timeout": -1}, "unknown_timeout must be a finite number of seconds >= 0"),
        ({"unknown_timeout": math.inf}, "unknown_timeout must be a finite number of seconds >= 0"),
        ({"tail_lines": -1}, "tail_lines must be an int >= 0, got -1"),
        ({"tail_lines": 2.0}, "tail_lines must be an int >= 0, got 2.0"),
        ({"max_log_replicas": False}, "max_log_replicas must be an int >= 0, got False"),
        ({"flags": {"wait": "maybe"}}, "wait must be True or False, got 'maybe'"),
        ({"flags": {"reattach": 1}}, "reattach must be True or False, got 1"),
    ],
)
def test_each_problem_says_what_was_given_and_what_is_valid(
    fields: dict[str, Any], problem: str
) -> None:
    opts = LaunchOptions(**{"scheduler": "local_cwd", **fields})
    problems = opts.problems()
    assert len(problems) == 1, problems
    assert problem in problems[0]


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"cfg": {"log_dir": "/tmp"}, "workspace": "file:///src"},
        {"workspace": Workspace.from_str("/src")},
        {"poll_interval": 0.01, "unknown_timeout": 0, "tail_lines": 0, "max_log_replicas": 0},
        {"flags": {"wait": True, "stream_logs": False}},
    ],
)
def test_valid_options_have_no_problem(fields: dict[str, Any]) -> None:
    opts = LaunchOptions(scheduler="local_cwd", **fields)
    assert opts.problems() == []
    opts.check()  # does not raise


def test_every_problem_is_listed_once_in_field_order_and_raised_together() -> None:
    opts = LaunchOptions(
        scheduler="",
        cfg="a=b",  # type: ignore[arg-type]
        poll_interval=0,
        tail_lines=-1,
        flags={"wait": None},  # type: ignore[dict-item]
    )
    problems = opts.problems()
    assert [p.split(" ")[0] for p in problems] == [
        "scheduler",
        "cfg",
        "poll_interval",
        "tail_lines",
        "wait",
    ]
    with pytest.raises(InvalidLaunchOptionsError) as e:
        opts.check("app lifecycle arguments", more=["owner must be a non-empty token"])
    assert e.value.problems == [*problems, "owner must be a non-empty token"]
    assert str(e.value) == "invalid app lifecycle arguments: " + "; ".join(e.value.problems)
    assert isinstance(e.value, InvalidTaskArgumentError)
    assert isinstance(e.value, ValueError)
    assert e.value.permanent


def test_names_rename_fields_to_the_parameters_the_caller_exposes() -> None:
    opts = LaunchOptions(scheduler="local_cwd", unknown_timeout=-1, tail_lines=-1)
    assert opts.problems({"unknown_timeout": "unknown_state_timeout"}) == [
        "unknown_state_timeout must be a finite number of seconds >= 0, got -1"
        " (set e.g. unknown_state_timeout=300)",
        "tail_lines must be an int >= 0, got -1 (set e.g. tail_lines=50)",
    ]


def test_parsed_reads_config_strings_as_the_table_does() -> None:
    opts = LaunchOptions(
        scheduler="local_cwd",
        poll_interval=" 2.5 ",  # type: ignore[arg-type]  # a config source gives strings
        unknown_timeout="0",  # type: ignore[arg-type]
        tail_lines=" 7",  # type: ignore[arg-type]
        flags={"wait": "Yes", "stream_logs": False},  # type: ignore[dict-item]
    ).parsed()
    assert (opts.poll_interval, opts.unknown_timeout, opts.tail_lines) == (2.5, 0.0, 7)
    assert opts.flags == {"wait": True, "stream_logs": False}
    with pytest.raises(InvalidLaunchOptionsError, match="poll_interval must be"):
        LaunchOptions(scheduler="local_cwd", poll_interval="nan").parsed()  # type: ignore[arg-type]


def test_the_error_pickles_with_its_problems() -> None:
    error = InvalidLaunchOptionsError("launch options", ["a", "b"])
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is InvalidLaunchOptionsError
    assert back.problems == ["a", "b"]
    assert str(back) == str(error)


def test_options_are_a_frozen_keyword_only_value() -> None:
    opts = LaunchOptions(scheduler="local_cwd")
    with pytest.raises(AttributeError):
        opts.scheduler = "slurm"  # type: ignore[misc]
    with pytest.raises(TypeError):
        LaunchOptions("local_cwd")  # type: ignore[misc]
    assert opts == LaunchOptions(scheduler="local_cwd")

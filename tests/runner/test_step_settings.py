"""The one table of step settings: each kind's verdict and wording, typed or from a string."""

from __future__ import annotations

import math
import pickle

import pytest

from torchx_core.runner.step_settings import (
    COUNT,
    FLAG,
    SECONDS,
    SETTINGS,
    TEXT,
    InvalidSettingError,
    InvalidTaskArgumentError,
    Setting,
    parse_settings,
    unknown_key_problem,
)

#: value -> what a setting of each kind makes of it (None: refused)
VERDICTS: list[tuple[object, dict[str, object]]] = [
    (math.nan, {"poll_interval": None, "unknown_timeout": None, "defer_after": None}),
    ("nan", {"poll_interval": None, "unknown_timeout": None, "defer_after": None}),
    (math.inf, {"poll_interval": None, "unknown_timeout": None, "defer_after": math.inf}),
    (" inf ", {"poll_interval": None, "defer_after": math.inf, "tail_lines": None}),
    (-math.inf, {"defer_after": None}),
    (-1, {"poll_interval": None, "unknown_timeout": None, "tail_lines": None}),
    ("-1", {"poll_interval": None, "unknown_timeout": None, "tail_lines": None}),
    (0, {"poll_interval": None, "unknown_timeout": 0.0, "tail_lines": 0, "timeout": None}),
    ("0", {"poll_interval": None, "unknown_timeout": 0.0, "tail_lines": 0}),
    ("5", {"poll_interval": 5.0, "unknown_timeout": 5.0, "tail_lines": 5, "timeout": 5.0}),
    (" 5 ", {"poll_interval": 5.0, "kill_grace": 5.0, "max_log_replicas": 5}),
    ("2.5", {"poll_interval": 2.5, "tail_lines": None}),
    (2.0, {"poll_interval": 2.0, "tail_lines": None}),
    (True, {"poll_interval": None, "unknown_timeout": None, "tail_lines": None}),
    (False, {"tail_lines": None, "flag": False}),
    ("five", {"poll_interval": None, "tail_lines": None, "flag": None}),
    ("", {"poll_interval": None, "tail_lines": None, "flag": None, "owner": None}),
    (None, {"poll_interval": None, "tail_lines": None, "timeout": None, "timeout_at": None}),
    (" Yes ", {"flag": True}),
    ("off", {"flag": False}),
    (1, {"flag": None, "tail_lines": 1}),
    (" me ", {"owner": "me"}),
    ("   ", {"owner": None}),
]


@pytest.mark.parametrize(("value", "verdicts"), VERDICTS)
def test_one_verdict_per_value_and_setting(value: object, verdicts: dict[str, object]) -> None:
    for name, expected in verdicts.items():
        setting = SETTINGS[name]
        if expected is None and not (value is None and setting.optional):
            problem = setting.problem(value)
            assert problem is not None, (name, value)
            assert problem.startswith(f"{name} must be {setting.valid()}, got ")
            with pytest.raises(InvalidSettingError):
                setting.parse(value)
        else:
            assert setting.problem(value) is None, (name, value)
            assert setting.parse(value) == expected, (name, value)


def test_optional_settings_take_none() -> None:
    assert SETTINGS["timeout"].parse(None) is None
    assert SETTINGS["timeout_at"].parse(None) is None
    assert "or None" in SETTINGS["timeout"].valid()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "poll_interval",
            0,
            "poll_interval must be a finite number of seconds > 0, got 0"
            " (set e.g. poll_interval=5)",
        ),
        (
            "unknown_timeout",
            "soon",
            "unknown_timeout must be a finite number of seconds >= 0, got 'soon' (str)"
            " (set e.g. unknown_timeout=300)",
        ),
        (
            "defer_after",
            math.nan,
            "defer_after must be a number of seconds >= 0, or inf (never), got nan"
            " (set e.g. defer_after=15)",
        ),
        ("tail_lines", True, "tail_lines must be an int >= 0, got True (bool) (set e.g."),
        ("tail_lines", "2.5", "tail_lines must be an int >= 0, got '2.5' (str)"),
        ("flag", 1, "flag must be True or False, got 1 (set e.g. flag=True)"),
        ("owner", "", "owner must be a non-empty string, got '' (str)"),
    ],
)
def test_messages_say_what_was_given_what_is_valid_and_how_to_fix_it(
    name: str, value: object, message: str
) -> None:
    problem = SETTINGS[name].problem(value)
    assert problem is not None
    assert problem.startswith(message)


def test_a_setting_is_renamed_to_the_parameter_an_entry_point_exposes() -> None:
    problem = SETTINGS["unknown_timeout"].problem(-1, "unknown_state_timeout")
    assert problem == (
        "unknown_state_timeout must be a finite number of seconds >= 0, got -1"
        " (set e.g. unknown_state_timeout=300)"
    )


def test_every_setting_has_a_kind_an_example_and_help() -> None:
    for name, setting in SETTINGS.items():
        assert setting.name == name
        assert setting.kind in (SECONDS, COUNT, FLAG, TEXT)
        assert setting.example and setting.help
        if setting.default is not None:
            assert setting.problem(setting.default) is None, name


def test_parse_settings_reads_known_keys_and_refuses_unknown_ones_with_a_close_match() -> None:
    problems: list[str] = []
    table = {"poll_interval": SETTINGS["poll_interval"], "tail_lines": SETTINGS["tail_lines"]}
    out = parse_settings(
        {"poll_interval": " 3 ", "tail_lines": "-1", "poll_intervall": 1}, table, "[x]", problems
    )
    assert out == {"poll_interval": 3.0}
    assert problems == [
        "tail_lines must be an int >= 0, got '-1' (str) (set e.g. tail_lines=50)",
        "unknown setting 'poll_intervall' in [x]. Did you mean: 'poll_interval'?"
        " Valid settings: poll_interval, tail_lines",
    ]
    assert unknown_key_problem("zzz", ["a"], "[x]") == (
        "unknown setting 'zzz' in [x]. Valid settings: a"
    )


def test_read_appends_the_problem_and_returns_the_default() -> None:
    problems: list[str] = []
    assert SETTINGS["tail_lines"].read("x", problems, "log_tail_lines") == 50
    assert problems == [
        "log_tail_lines must be an int >= 0, got 'x' (str) (set e.g. log_tail_lines=50)"
    ]


def test_the_error_is_a_permanent_task_argument_error_and_pickles() -> None:
    with pytest.raises(InvalidSettingError) as e:
        SETTINGS["poll_interval"].parse(-1)
    assert isinstance(e.value, InvalidTaskArgumentError)
    assert isinstance(e.value, ValueError)
    assert e.value.permanent
    back = pickle.loads(pickle.dumps(e.value))
    assert str(back) == str(e.value) and back.problems == e.value.problems


def test_an_ad_hoc_setting_uses_the_same_rules() -> None:
    cpu = Setting("cpu", COUNT, 1, minimum=1, example="1", help="CPUs")
    assert cpu.parse(" 4 ") == 4
    assert cpu.problem(0) == "cpu must be an int >= 1, got 0 (set e.g. cpu=1)"

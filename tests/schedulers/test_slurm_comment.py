"""The slurm job comment: the user's comment, the app name and the owner in one string."""

from __future__ import annotations

import pytest

from torchx_core.schedulers.slurm._comment import JobComment, parse_comment, submit_comment


@pytest.mark.parametrize(
    ("parts", "text"),
    [
        (JobComment(), ""),
        (JobComment(user="nightly run"), "nightly run"),
        (JobComment(app="train-1a2b"), "torchx:app=train-1a2b"),
        (
            JobComment("nightly", "train", "airflow:d/t/r/-1#try=2"),
            "nightly torchx:app=train;owner=airflow:d/t/r/-1#try=2",
        ),
        (JobComment("", "", "prefect:flow run 7"), "torchx:app=;owner=prefect:flow run 7"),
    ],
)
def test_comment_round_trip(parts: JobComment, text: str) -> None:
    assert str(parts) == text
    assert parse_comment(text) == parts


def test_a_comment_without_the_tag_is_all_the_users() -> None:
    assert parse_comment("a comment;owner=x") == JobComment(user="a comment;owner=x")
    assert parse_comment("xtorchx:app=y") == JobComment(user="xtorchx:app=y")


def test_only_plain_app_names_are_recorded() -> None:
    assert submit_comment(None, "train-1a") == "torchx:app=train-1a"
    assert submit_comment("mine", "train-1a") == "mine torchx:app=train-1a"
    assert submit_comment("mine", "my app;owner=x") == "mine"
    assert submit_comment(None, "my app") == ""


def test_the_last_tag_wins_over_one_in_the_users_comment() -> None:
    """A user comment that itself holds ``torchx:app=`` (e.g. pasted from another job): the tag
    torchx appended last names the app, so a reattach by name finds this job."""
    user = "rerun of torchx:app=old-run;owner=someone"
    text = str(JobComment(user, "train-1a2b", "airflow:d/t/r#try=2"))
    assert parse_comment(text) == JobComment(user, "train-1a2b", "airflow:d/t/r#try=2")
    assert parse_comment(submit_comment(user, "train-1a2b")).app == "train-1a2b"


@pytest.mark.parametrize("user", ["nightly\t", "run X", "keep trailing XX"])
def test_only_the_separating_space_is_cut_from_the_users_comment(user: str) -> None:
    assert parse_comment(str(JobComment(user, "train-1a2b"))).user == user

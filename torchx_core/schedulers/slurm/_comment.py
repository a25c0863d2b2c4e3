"""What the slurm scheduler keeps in a job's comment: the user's comment, the app name, the owner.

Slurm keeps no free-form metadata a user can update besides the comment, so it carries::

    [<the `comment` run option> ]torchx:app=<AppDef name>[;owner=<owner>]

The app name lets ``list`` answer with the AppDef's name (the lifecycle reattaches by it; the job
names are ``<role>-<replica>``); the owner is what ``set_owner`` records. An app name with other
characters than ``[A-Za-z0-9_.+@-]`` is not recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TAG = "torchx:app="
OWNER = ";owner="
_RECORDABLE_NAME = re.compile(r"[A-Za-z0-9_.+@-]+\Z")


@dataclass(frozen=True)
class JobComment:
    """A job comment split into its parts."""

    user: str = ""
    app: str = ""
    owner: str = ""

    def __str__(self) -> str:
        if not self.app and not self.owner:
            return self.user
        tag = TAG + self.app + (OWNER + self.owner if self.owner else "")
        return f"{self.user} {tag}" if self.user else tag


def submit_comment(user: str | None, app_name: str) -> str:
    """The comment a job is submitted with: the user's comment and the app name."""
    app = app_name if _RECORDABLE_NAME.match(app_name) else ""
    return str(JobComment(user or "", app))


def parse_comment(comment: str) -> JobComment:
    """Splits a job comment (any comment: one without the tag is all the user's).

    >>> parse_comment("nightly torchx:app=train-1a;owner=airflow:d/t/r#try=2")
    JobComment(user='nightly', app='train-1a', owner='airflow:d/t/r#try=2')
    """
    i = comment.rfind(TAG)
    if i < 0 or (i > 0 and comment[i - 1] != " "):
        return JobComment(user=comment)
    app, _, owner = comment[i + len(TAG) :].partition(OWNER)
    return JobComment(comment[:i].rstrip(" "), app, owner)

"""TorchX's behaviour of the scheduler API's line helpers and ``_validate``'s role stand-ins."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest
from support.null_scheduler import NullScheduler

from torchx_core import specs
from torchx_core.schedulers.api import (
    AppValidationError,
    lines_from_chunks,
    split_lines,
    split_lines_iterator,
)
from torchx_core.specs import AppDef


def test_split_lines_iterator_splits_each_chunk_on_its_own() -> None:
    # TorchX: a line split across two chunks comes out as two pieces
    assert list(split_lines_iterator(["foo\nbar", "foobar"])) == ["foo\n", "bar", "foobar"]
    assert list(split_lines_iterator(["1\n2\n", "3\n"])) == ["1\n", "2\n", "3\n"]


def test_lines_from_chunks_joins_a_line_split_across_chunks() -> None:
    assert list(lines_from_chunks(["foo\nbar", "foobar\n", "x"])) == ["foo\n", "barfoobar\n", "x"]


def test_split_lines_splits_at_newline_only() -> None:
    # TorchX: a carriage return (a progress bar's redraw) stays inside its line
    assert split_lines("50%\r100%\ndone") == ["50%\r100%\n", "done"]
    assert split_lines("") == [] and split_lines("\n") == ["\n"]


def test_a_role_stand_in_gets_the_resource_check_only() -> None:
    app = AppDef("test", roles=[MagicMock()])
    app.roles[0].resource = specs.NULL_RESOURCE
    with pytest.raises(AppValidationError, match="has no resource"):
        NullScheduler()._validate(app, "mock", {})
    stand_in = MagicMock(workspace=None)  # as in TorchX's tests: pre_proc is called on it
    NullScheduler().submit_dryrun(AppDef("test", roles=[stand_in]), {})
    stand_in.pre_proc.assert_called_once()


def test_a_real_role_still_gets_every_check() -> None:
    role = specs.Role("r", image="i", entrypoint="e", num_replicas=0)
    role.resource = specs.resource(cpu=1)
    with pytest.raises(AppValidationError, match="num_replicas=0"):
        NullScheduler().submit_dryrun(AppDef("test", roles=[role]), {})


def test_direct_submit_dryrun_of_a_foreign_scheduler_validates_nothing_more() -> None:
    # TorchX's contract: submit_dryrun does not call _validate (Runner.dryrun does)
    app = AppDef("test", roles=[specs.Role("r", image="", entrypoint="e")])
    info = NullScheduler().submit_dryrun(app, {})
    assert info._app is app and info._cfg == {}


def test_direct_submit_dryrun_of_a_builtin_backend_still_validates(tmp_path: object) -> None:
    from torchx_core.schedulers.local.scheduler import create_dir_scheduler

    sched = create_dir_scheduler("s", root=str(tmp_path))
    assert sched.checks_in_dryrun
    app = AppDef("test", roles=[specs.Role("r", image="/no/such/dir", entrypoint="e")])
    with pytest.raises(AppValidationError, match="/no/such/dir"):
        sched.submit_dryrun(app, {})

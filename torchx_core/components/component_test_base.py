"""``ComponentTestCase``: unit-test your components as the CLI will use them.

Subclass it and call :meth:`~ComponentTestCase.validate` on each component (what
``torchx run path/to/file.py:fn --help`` does) and :meth:`~ComponentTestCase.run_component` to
run one to its end on a scheduler::

    from torchx_core.components.component_test_base import ComponentTestCase
    from my_project import components

    class MyComponentsTest(ComponentTestCase):
        def test_train(self) -> None:
            self.validate(components, "train")
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import unittest
from collections.abc import Callable
from types import ModuleType
from typing import Any

from torchx_core.specs import AppDef, AppStatus

__all__ = ["ComponentTestCase"]


class ComponentTestCase(unittest.TestCase):
    """A ``unittest.TestCase`` with helpers for component functions.

    ``setUp`` creates ``self.test_dir`` (a temporary directory, removed in ``tearDown``).
    """

    def setUp(self) -> None:
        self.test_dir = tempfile.mkdtemp("torchx_component_test")
        self.old_cwd = os.getcwd()

    def tearDown(self) -> None:
        shutil.rmtree(self.test_dir, ignore_errors=True)
        os.chdir(self.old_cwd)

    def validate(self, module: ModuleType, function_name: str) -> None:
        """Checks that ``module.function_name`` is a component the CLI can run.

        The linter must find no error and ``--help`` must build from its signature and
        docstring, as for ``torchx run <file>.py:<function_name> --help``.
        """
        from torchx_core.specs.builders import component_help
        from torchx_core.specs.finder import get_component

        path = module.__file__
        if not path:
            self.fail(f"module {module.__name__} has no __file__; validate needs its source file")
        component = get_component(f"{os.path.abspath(path)}:{function_name}")
        help_text = component_help(component.fn)
        self.assertIn(function_name, help_text)

    def run_component(
        self,
        component: Callable[..., AppDef],
        args: dict[str, Any] | None = None,
        scheduler_params: dict[str, Any] | None = None,
        scheduler: str = "local_cwd",
        interval: float = 0.1,
        timeout: float = 1,
    ) -> AppStatus | None:
        """Runs ``component(**args)`` on ``scheduler`` and waits for it to end.

        Polls every ``interval`` seconds; returns the last status once the app is terminal
        (polling at least ``timeout`` seconds, as TorchX does).

        Args:
            component: the component function
            args: its keyword arguments
            scheduler_params: keyword arguments for the schedulers (``get_runner(**...)``)
            scheduler: where to run it
            interval: seconds between status reads
            timeout: poll at least this long
        """
        from torchx_core.runner import get_runner

        app = component(**(args or {}))
        with get_runner(**(scheduler_params or {})) as runner:
            handle = runner.run(app, scheduler)
            elapsed = 0.0
            status = runner.status(handle)
            while (status is not None and not status.is_terminal()) or elapsed < timeout:
                time.sleep(interval)
                elapsed += interval
                status = runner.status(handle)
            return status

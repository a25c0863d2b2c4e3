"""The exception tree of torchx-suite.

Every error the project raises on bad input derives from :class:`TorchXError`. The public
TorchX exception names are kept, and each one also derives from the builtin exception that
TorchX users (or Python conventions) catch, so ``except ValueError`` keeps working::

    TorchXError
    ├── AppStatusError
    ├── InvalidRunConfigException            (ValueError)
    ├── RunOptDefinitionError                (ValueError, TypeError)
    ├── MalformedAppHandleException          (ValueError)
    ├── UnknownSchedulerException            (ValueError)
    ├── UnknownAppException                  (LookupError)
    ├── UnknownNamedResourceError            (KeyError)
    ├── InvalidResourceError                 (ValueError)
    ├── InvalidMountError                    (ValueError, KeyError)
    ├── InvalidWorkspaceError                (ValueError)
    ├── InvalidOverlayError                  (ValueError)
    ├── OverlayTypeError                     (TypeError)
    ├── ComponentValidationException         (ValueError)
    ├── ComponentArgumentError               (ValueError)
    ├── ComponentNotFoundException           (LookupError)
    ├── AppDefSerializationError             (ValueError)
    └── MissingDependencyError               (ImportError)

Messages say what was given, what is valid and how to fix it.

Errors of bad configuration or input (a wrong run option, an unknown scheduler or component, an
invalid AppDef) are *permanent*: running the same thing again fails the same way. Their classes set
``permanent = True``, and :func:`is_permanent_error` is the one test the engines use to fail a task
at once instead of retrying it (a scheduler briefly unreachable, an app that failed: retried).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: it costs import time
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from torchx_core.specs._status import AppStatus

__all__ = [
    "AppDefSerializationError",
    "AppStatusError",
    "ComponentArgumentError",
    "ComponentNotFoundException",
    "ComponentValidationException",
    "InvalidMountError",
    "InvalidOverlayError",
    "InvalidResourceError",
    "InvalidRunConfigException",
    "InvalidWorkspaceError",
    "MalformedAppHandleException",
    "MissingDependencyError",
    "OverlayTypeError",
    "RunOptDefinitionError",
    "TorchXError",
    "UnknownAppException",
    "UnknownNamedResourceError",
    "UnknownSchedulerException",
    "check_dependency_version",
    "did_you_mean",
    "import_optional",
    "is_permanent_error",
    "missing_dependency",
]


def did_you_mean(given: str, valid: Iterable[str], *, n: int = 3) -> str:
    """Returns a ``" Did you mean: 'a', 'b'?"`` suffix (or ``""``) for an unknown name.

    Args:
        given: the unknown name the user passed
        valid: the valid names
        n: maximum number of suggestions
    """
    import difflib

    matches = difflib.get_close_matches(str(given), [str(v) for v in valid], n=n, cutoff=0.6)
    if not matches:
        return ""
    return " Did you mean: " + ", ".join(repr(m) for m in matches) + "?"


def _short(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class TorchXError(Exception):
    """Root of every error raised by torchx-suite."""

    #: True for errors of configuration or input that a retry of the same call cannot fix
    permanent: bool = False


def is_permanent_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is one a retry cannot fix.

    Follows the explicit ``raise ... from`` chain (``__cause__``), so an engine's own wrapper of a
    permanent error is permanent too.

    >>> is_permanent_error(UnknownSchedulerException("nope"))
    True
    >>> is_permanent_error(TimeoutError())
    False
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if getattr(type(cur), "permanent", False) is True:
            return True
        seen.add(id(cur))
        cur = cur.__cause__
    return False


class AppStatusError(TorchXError):
    """Raised by :py:meth:`AppStatus.raise_for_status` when the app did not succeed.

    Args:
        app_status: the status of the app that did not succeed (kept as ``.app_status``)
    """

    def __init__(self, app_status: AppStatus, *args: object) -> None:
        super().__init__(*args)
        self.app_status = app_status


class InvalidRunConfigException(TorchXError, ValueError):
    """A run config (``cfg``) is missing a required option or holds a wrongly typed value.

    Args:
        invalid_reason: what is wrong and how to fix it
        cfg_key: the offending option name
        cfg: the config as given (None: not shown in the message)
    """

    permanent = True

    def __init__(self, invalid_reason: str, cfg_key: str, cfg: Mapping[str, Any] | None) -> None:
        if cfg is None:  # no config to show (e.g. casting a single value)
            super().__init__(invalid_reason)
        else:
            given = str(dict(cfg)) if cfg else "<EMPTY>"
            super().__init__(f"{invalid_reason}. Given: {given}")
        self.cfg_key = cfg_key


class RunOptDefinitionError(TorchXError, ValueError, TypeError):
    """A run option was declared wrongly (a scheduler bug, e.g. required with a default)."""

    permanent = True


class MalformedAppHandleException(TorchXError, ValueError):
    """An app handle is not of the form ``{scheduler}://{session_name}/{app_id}``.

    Args:
        app_handle: the handle as given
        reason: optional detail on which part is wrong
    """

    permanent = True

    def __init__(self, app_handle: object, reason: str = "") -> None:
        detail = f" ({reason})" if reason else ""
        super().__init__(
            f"{_short(app_handle)} is not of the form: <scheduler_backend>://<session_name>/<app_id>"
            f"{detail}. Example: 'local_cwd://default/my_app-x1y2z3' (session_name may be empty:"
            " 'k8s:///my_app')"
        )
        self.app_handle = app_handle


class UnknownSchedulerException(TorchXError, ValueError):
    """No scheduler is registered under the given name.

    Args:
        scheduler_backend: the name as given
        known: the registered scheduler names (listed in the message with a suggestion)
    """

    permanent = True

    def __init__(self, scheduler_backend: str, known: Iterable[str] | None = None) -> None:
        known_list = sorted(known) if known is not None else []
        valid = f" Valid schedulers: {', '.join(known_list)}." if known_list else ""
        super().__init__(
            f"Scheduler backend: {scheduler_backend!r} does not exist.{valid}"
            f"{did_you_mean(scheduler_backend, known_list)}"
            " Run `torchx schedulers` to list them, or register one via the"
            " `torchx.schedulers` entry point group."
        )
        self.scheduler_backend = scheduler_backend


class UnknownAppException(TorchXError, LookupError):
    """The scheduler does not know the app (never existed, already deleted, or expired).

    Args:
        app_handle: the app handle as given
    """

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            f"Unknown app = {app_handle}. Did you move it? Or has it expired?"
            " Check the handle with `torchx list -s <scheduler>`."
        )
        self.app_handle = app_handle


class UnknownNamedResourceError(TorchXError, KeyError):
    """No named resource is registered under the given name.

    Args:
        name: the name as given
        known: the registered names
        broken: entry points that failed to load, ``{name: error}``
    """

    permanent = True

    def __init__(
        self, name: str, known: Iterable[str], broken: Mapping[str, str] | None = None
    ) -> None:
        import difflib

        known_list = sorted(known)
        # TorchX's opening ("No named resource found for `x`. Did you mean `y`?"), then every
        # known name and how to register one
        close = difflib.get_close_matches(str(name), known_list, n=1)
        msg = f"No named resource found for `{name}`."
        if close:
            msg += f" Did you mean `{close[0]}`?"
        msg += (
            f" Registered named resources: {', '.join(known_list)}."
            " Register your own through the `torchx.named_resources` entry point group or"
            " `torchx_core.specs.register.named_resource(...)`."
        )
        if broken:
            msg += " Entry points that failed to load: " + ", ".join(
                f"{k} ({v})" for k, v in sorted(broken.items())
            )
        super().__init__(msg)
        self.name = name
        self.message = msg

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message (adding quotes); keep it readable.
        return self.message


class InvalidResourceError(TorchXError, ValueError):
    """A resource specification is invalid (e.g. negative memory, bad fractional)."""

    permanent = True


class InvalidMountError(TorchXError, ValueError, KeyError):
    """A mount option string (``type=bind,src=...,dst=...``) is invalid.

    Also a ``KeyError``: TorchX raises one for an unknown or missing mount option.
    """

    permanent = True

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message (adding quotes); keep it readable.
        return str(self.args[0]) if self.args else ""


class InvalidWorkspaceError(TorchXError, ValueError):
    """A workspace string or mapping is invalid."""

    permanent = True


class InvalidOverlayError(TorchXError, ValueError):
    """An overlay holds keys that are not allowed (see ``validate_overlay``)."""

    permanent = True


class OverlayTypeError(TorchXError, TypeError):
    """An overlay operator cannot be applied to the base value (e.g. JOIN on non-dict items)."""

    permanent = True


class ComponentValidationException(TorchXError, ValueError):
    """A component function does not follow the component standard (see ``file_linter``)."""

    permanent = True


class ComponentArgumentError(TorchXError, ValueError):
    """The arguments given to a component (CLI argv or defaults) are invalid."""

    permanent = True


class ComponentNotFoundException(TorchXError, LookupError):
    """No component is known under the given name."""

    permanent = True


class AppDefSerializationError(TorchXError, ValueError):
    """A serialized AppDef (dict/JSON form) is malformed."""

    permanent = True


class MissingDependencyError(TorchXError, ModuleNotFoundError):
    """An optional dependency is not installed, or the installed version cannot be used.

    A ``ModuleNotFoundError`` (so an ``ImportError``), as TorchX raises when a backend's client
    package is absent: ``except ModuleNotFoundError`` written for TorchX catches it.

    Build it with :func:`missing_dependency` (from a failed import) or let
    :func:`import_optional` / :func:`check_dependency_version` raise it: they look up the
    installed version and the range torchx-suite declares, so the message tells a missing
    package from a version outside the supported range.

    Args:
        module: the module that could not be imported (e.g. ``"kubernetes"``)
        extra: the torchx-suite extra that installs it (e.g. ``"kubernetes"``)
        purpose: what needed it (e.g. ``"the kubernetes scheduler"``)
        pip_hint: how to install it, when no torchx-suite extra does (e.g. ``"pip install s3fs"``)
        distribution: the distribution that provides the module (default: ``module``)
        found: the installed version of ``distribution`` (None: not installed)
        required: the version range torchx-suite supports (e.g. ``">=3.0,<4"``)
        reason: why the import failed although the distribution is installed
    """

    permanent = True

    def __init__(
        self,
        module: str,
        extra: str,
        purpose: str = "",
        pip_hint: str | None = None,
        *,
        distribution: str | None = None,
        found: str | None = None,
        required: str | None = None,
        reason: str | None = None,
    ) -> None:
        dist = distribution or module
        needs = purpose or "torchx-suite"
        wanted = f"{dist}{required}" if required else dist
        if found is None:
            hint = pip_hint or extra_install_hint(extra)
            mod = f", module {module!r}" if dist != module else ""
            supported = f"; supported: {wanted}" if required else ""
            msg = (
                f"Optional dependency {dist!r} is not installed (needed by {needs}{mod}"
                f"{supported}). Install it with: {hint}"
            )
        elif reason is None:
            hint = pip_hint or f"pip install '{wanted}'"
            msg = (
                f"{dist} {found} is installed, but {needs} needs {wanted}."
                f" Install a supported version with: {hint}"
            )
        else:
            hint = pip_hint or f"pip install --force-reinstall '{wanted}'"
            supported = f" (torchx-suite supports {wanted})" if required else ""
            msg = (
                f"{dist} {found} is installed{supported}, but {needs} could not import"
                f" {module!r}: {reason}. This is a bug in torchx-suite (please report it) or a"
                f" broken install; reinstall with: {hint}"
            )
        super().__init__(msg, name=module)
        self.module = module
        self.extra = extra
        self.distribution = dist
        self.found = found
        self.required = required
        self.pip_hint = hint


def extra_install_hint(extra: str) -> str:
    """How to install what torchx-suite's ``extra`` adds, without a package index holding
    torchx-suite: the extra's own requirements (read from the installed metadata), then the
    extra itself from the wheel or checkout torchx-suite was installed from.

    >>> extra_install_hint("no-such-extra")
    "pip install '<torchx-suite wheel or checkout>[no-such-extra]'"
    """
    from importlib import metadata

    try:
        requires = metadata.requires("torchx-suite") or []
    except metadata.PackageNotFoundError:
        requires = []
    wanted = f"extra == '{extra}'"
    reqs = [r.split(";")[0].strip() for r in requires if wanted in r.replace('"', "'")]
    from_source = f"pip install '<torchx-suite wheel or checkout>[{extra}]'"
    if not reqs:
        return from_source
    return "pip install " + " ".join(f"'{r}'" for r in reqs) + f" (or {from_source})"


def missing_dependency(
    module: str,
    extra: str,
    purpose: str = "",
    *,
    distribution: str | None = None,
    cause: BaseException | None = None,
) -> MissingDependencyError:
    """The error for a failed import of ``module``, with the installed version and the range.

    Args:
        module: the module whose import failed (dotted is fine)
        extra: the torchx-suite extra that installs it
        purpose: what needed it (shown in the error)
        distribution: the distribution providing it, when its name is not the extra's only
            requirement or the module's top-level name (``"kfp-kubernetes"``)
        cause: the ImportError, quoted when the distribution is installed
    """
    from torchx_core.specs import _dependencies as deps

    top = module.split(".")[0]
    req = deps.declared(distribution, extra, top)
    dist = distribution or (req.name if req is not None else top)
    found = deps.installed_version(dist)
    required = req.specifier if req is not None and req.specifier else None
    if found is not None and required and deps.satisfies(found, required) is False:
        return MissingDependencyError(
            top, extra, purpose, distribution=dist, found=found, required=required
        )
    reason = (str(cause) or type(cause).__name__) if cause is not None else "import failed"
    return MissingDependencyError(
        top,
        extra,
        purpose,
        distribution=dist,
        found=found,
        required=required,
        reason=reason if found is not None else None,
    )


def check_dependency_version(
    distribution: str, extra: str, purpose: str = "", *, module: str | None = None
) -> None:
    """Raises :class:`MissingDependencyError` if ``distribution`` is installed outside the
    range torchx-suite declares for it (checked once per distribution and extra).

    A distribution that is not installed passes (its import reports that); so does any
    version when the range or ``packaging`` is unavailable.

    Args:
        distribution: e.g. ``"apache-airflow"``
        extra: the torchx-suite extra that installs it
        purpose: what needs it (shown in the error)
        module: its top-level module (shown in the error; default: ``distribution``)
    """
    key = (distribution, extra)
    if key in _VERSIONS_OK:
        return
    from torchx_core.specs import _dependencies as deps

    req = deps.declared(distribution, extra)
    found = deps.installed_version(distribution)
    required = req.specifier if req is not None else ""
    if found is not None and required and deps.satisfies(found, required) is False:
        raise MissingDependencyError(
            module or distribution,
            extra,
            purpose,
            distribution=distribution,
            found=found,
            required=required,
        )
    _VERSIONS_OK.add(key)


_VERSIONS_OK: set[tuple[str, str]] = set()


def import_optional(
    module: str, extra: str, purpose: str = "", *, distribution: str | None = None
) -> Any:
    """Imports an optional dependency, raising :class:`MissingDependencyError` if it is absent,
    installed in a version outside the supported range, or fails to import.

    Args:
        module: dotted module name, e.g. ``"kubernetes.client"``
        extra: torchx-suite extra that provides it, e.g. ``"kubernetes"``
        purpose: what needs it (shown in the error)
        distribution: the distribution providing it, when the extra has several and the
            module's top-level name is not one (``"kfp-kubernetes"`` for ``kfp.kubernetes``)

    Returns:
        The imported module.
    """
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise missing_dependency(module, extra, purpose, distribution=distribution, cause=e) from e
    top = module.split(".")[0]
    key = (top, extra, distribution or "")
    if key not in _IMPORTS_CHECKED:
        from torchx_core.specs import _dependencies as deps

        req = deps.declared(distribution, extra, top, imported=True)
        if req is not None:
            check_dependency_version(req.name, extra, purpose, module=top)
        _IMPORTS_CHECKED.add(key)
    return mod


_IMPORTS_CHECKED: set[tuple[str, str, str]] = set()

"""The ``kubernetes`` client plumbing shared by the Kubernetes-based schedulers.

The client package is imported only here and only when a scheduler first talks to a cluster, so
dry runs and run options work without the ``kubernetes`` extra.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from torchx_core.schedulers.api import SchedulerError
from torchx_core.specs.errors import import_optional

logger: logging.Logger = logging.getLogger(__name__)


class KubernetesApiError(SchedulerError, RuntimeError):
    """The Kubernetes API server rejected a request (status and reason are in the message)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KubernetesJobExistsError(KubernetesApiError, ValueError):
    """A job of that name already exists (HTTP 409 on create); a ``ValueError`` as in TorchX."""


class KubernetesSpecError(SchedulerError, ValueError):
    """The job fails the ``validate_spec`` checks (pod names, or the API server's dry run)."""

    permanent = True


def kubernetes_client() -> Any:
    """The ``kubernetes.client`` module, or a MissingDependencyError naming the extra."""
    return import_optional("kubernetes.client", "kubernetes", "the Kubernetes schedulers")


def make_api_client(context: str | None = None) -> Any:
    """An ``ApiClient`` from the in-cluster config or the kubeconfig (optionally ``context``).

    With neither, the client is unconfigured (as TorchX's): a warning names the missing
    configuration, and the first request that cannot reach a server raises a
    :class:`KubernetesApiError` saying how to configure one (see :func:`api_errors`). Code that
    patches the ``kubernetes.client`` API classes (TorchX users' tests) then runs without a
    kubeconfig.
    """
    import_optional("kubernetes", "kubernetes", "the Kubernetes schedulers")
    from kubernetes import config as k8s_config

    try:
        k8s_config.load_incluster_config()
        return kubernetes_client().ApiClient()
    except k8s_config.ConfigException:
        pass
    try:
        return k8s_config.new_client_from_config(context=context)
    except (k8s_config.ConfigException, FileNotFoundError, TypeError) as e:
        logger.warning(
            "no Kubernetes configuration found (context=%r): %s; using an unconfigured client. %s",
            context,
            e,
            CONFIG_HINT,
        )
        return kubernetes_client().ApiClient()


#: How to point the client at a cluster (in the messages of unreachable-server errors).
CONFIG_HINT = (
    "Set KUBECONFIG or ~/.kube/config, pick a context with the `context` run option, or run in"
    " a cluster."
)


class KubeClients:
    """The API clients of one scheduler: built on first use (or injected), closed with it."""

    def __init__(self, client: Any | None = None) -> None:
        self._client = client
        self.context: str | None = None

    def api(self) -> Any:
        """The ``ApiClient`` (from the in-cluster config or the kubeconfig ``context``)."""
        if self._client is None:
            self._client = make_api_client(self.context)
        return self._client

    def custom(self) -> Any:
        """A ``CustomObjectsApi`` on :meth:`api`."""
        return kubernetes_client().CustomObjectsApi(self.api())

    def core(self) -> Any:
        """A ``CoreV1Api`` on :meth:`api`."""
        return kubernetes_client().CoreV1Api(self.api())

    def app_pods(self, namespace: str, app_id_label: str, label_key: str) -> list[dict[str, Any]]:
        """The pods labelled ``label_key=app_id_label`` (filtered on our side as well: some
        servers and emulators ignore label selectors)."""
        with api_errors(f"listing pods of {namespace}/{app_id_label}"):
            items = to_dict(
                self.core().list_namespaced_pod(
                    namespace, label_selector=f"{label_key}={app_id_label}"
                )
            )
        return [
            p
            for p in (items or {}).get("items", [])
            if ((p.get("metadata") or {}).get("labels") or {}).get(label_key) == app_id_label
        ]

    def close(self) -> None:
        """Closes the ApiClient (a new one is built on next use)."""
        if self._client is not None and hasattr(self._client, "close"):
            self._client.close()
        self._client = None


def kubeconfig_context(context: str | None = None) -> dict[str, Any] | None:
    """The kubeconfig's entry for ``context`` (default: the current context), if any.

    Reads ``$KUBECONFIG`` (its first file) or ``~/.kube/config`` as plain YAML, so it needs no
    ``kubernetes`` package and works in dry runs. The entry is ``{"name": ..., "context":
    {"cluster": ..., "namespace": ...}}`` (what ``kubernetes.config.list_kube_config_contexts``
    gives).
    """
    import os

    paths = os.environ.get("KUBECONFIG", "").split(os.pathsep)
    path = next((p for p in paths if p), os.path.expanduser("~/.kube/config"))
    try:
        with open(path, encoding="utf-8") as f:
            import yaml

            config = yaml.safe_load(f) or {}
    except (OSError, ValueError) as e:
        logger.debug("no usable kubeconfig at %s: %s", path, e)
        return None
    if not isinstance(config, dict):
        return None
    name = context or config.get("current-context")
    for entry in config.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return None


def context_namespace(entry: Any) -> str | None:
    """The namespace of a kubeconfig context entry (None: the entry sets none)."""
    ns = ((entry or {}).get("context") or {}).get("namespace") if isinstance(entry, dict) else None
    return str(ns) if ns else None


def kubeconfig_namespace(context: str | None = None) -> str | None:
    """The namespace of ``context`` (default: the current context) in the kubeconfig, if set."""
    return context_namespace(kubeconfig_context(context))


def resolve_namespace(namespace: str | None, context: str | None) -> str:
    """The run option if given, else the kubeconfig context's namespace, else ``default``."""
    return namespace or kubeconfig_namespace(context) or "default"


@contextmanager
def api_errors(what: str) -> Iterator[None]:
    """Translates ``kubernetes.client.ApiException`` into :class:`KubernetesApiError`.

    The error raised is also an ``ApiException`` (status, reason and body kept), so code written
    against TorchX, which lets the client's exceptions through, still catches it. A server that
    cannot be reached raises a :class:`KubernetesApiError` naming how to configure the client.
    """
    client = kubernetes_client()
    try:
        yield
    except client.ApiException as e:
        raise api_exception(f"{what} failed", e) from e
    except _unreachable_errors() as e:
        raise KubernetesApiError(
            f"{what} failed: cannot reach the Kubernetes API server: {e}. {CONFIG_HINT}"
        ) from e


def api_exception(what: str, e: Any) -> KubernetesApiError:
    """``e`` (an ``ApiException``) as a :class:`KubernetesApiError` that is an ``ApiException``."""
    reason = e.reason or ""
    body = (e.body or "")[:500] if isinstance(e.body, str) else ""
    message = f"{what}: HTTP {e.status} {reason} {body}".strip()
    return _api_exception_class()(message, e.status, e.reason, e.body, e.headers)


@functools.cache
def _api_exception_class() -> Callable[[str, int | None, Any, Any, Any], KubernetesApiError]:
    client = kubernetes_client()

    class KubernetesApiException(KubernetesApiError, client.ApiException):  # type: ignore[misc,name-defined]
        """A :class:`KubernetesApiError` that is also the client's ``ApiException``."""

        def __init__(
            self, message: str, status: int | None, reason: Any, body: Any, headers: Any
        ) -> None:
            KubernetesApiError.__init__(self, message, status)
            self.reason = reason
            self.body = body
            self.headers = headers

        def __str__(self) -> str:
            return str(self.args[0])

        def __reduce__(self) -> tuple[Any, ...]:  # picklable, though defined in a function
            headers = dict(self.headers) if self.headers is not None else None
            return (_rebuild, (str(self.args[0]), self.status, self.reason, self.body, headers))

    KubernetesApiException.__module__ = __name__
    return KubernetesApiException


def _rebuild(message: str, status: int | None, reason: Any, body: Any, headers: Any) -> Any:
    """Unpickles an error of :func:`_api_exception_class`."""
    return _api_exception_class()(message, status, reason, body, headers)


def _unreachable_errors() -> tuple[type[BaseException], ...]:
    """The errors of a request that reached no server (urllib3's, and plain OS errors)."""
    try:
        from urllib3.exceptions import HTTPError
    except ImportError:  # urllib3 comes with the kubernetes package; kept for type checkers
        return (OSError,)
    return (HTTPError, OSError)


def is_not_found(
    call: Callable[[], Any], what: str = "reading a Kubernetes object"
) -> tuple[bool, Any]:
    """Runs ``call``; returns (True, None) on HTTP 404, else (False, result)."""
    client = kubernetes_client()
    try:
        with api_errors(what):
            return False, call()
    except client.ApiException as e:
        if e.status == 404:
            return True, None
        raise


def to_dict(obj: Any) -> Any:
    """API responses as plain dicts (custom objects already are; typed models get serialized)."""
    if obj is None or isinstance(obj, (dict, list, str, int, float, bool)):
        return obj
    return kubernetes_client().ApiClient().sanitize_for_serialization(obj)

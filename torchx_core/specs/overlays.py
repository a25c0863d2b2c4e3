"""Overlays patch the scheduler's submit-job request with fields not representable in AppDef/Role.

Users attach overlays with :py:func:`set_overlay`; schedulers read them with
:py:func:`get_overlay`, guard them with :py:func:`validate_overlay` and merge them into their
request with :py:func:`apply_overlay`.

Default merge rules: dicts merge recursively (upsert keys), lists append, primitives overwrite.
The operators :py:func:`PUT`, :py:func:`JOIN` and :py:func:`DEL`, used as dict keys, override
this per field. Operator keys are plain strings (``"__PUT__:containers"``,
``"__JOIN__(name):initContainers"``, ``"__DEL__:hostNetwork"``), so overlays stay JSON/YAML
serializable in ``metadata``.

>>> from torchx_core.specs import Role
>>> role = Role(name="trainer", image="my-image", entrypoint="train.py")
>>> set_overlay(role, "kubernetes", "V1Pod", {"spec": {"nodeSelector": {"gpu": "a100"}}})
>>> set_overlay(role, "kubernetes", "V1Pod", {"spec": {"tolerations": [{"key": "gpu"}]}})
>>> get_overlay(role, "kubernetes", "V1Pod")
{'spec': {'nodeSelector': {'gpu': 'a100'}, 'tolerations': [{'key': 'gpu'}]}}
"""

from __future__ import annotations

import copy
import json
import logging
import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchx_core.specs.errors import InvalidOverlayError, OverlayTypeError

if TYPE_CHECKING:
    from torchx_core.specs._app import AppDef, Role

logger: logging.Logger = logging.getLogger(__name__)

_Overlay = dict[str, Any]

__all__ = [
    "DEL",
    "JOIN",
    "PUT",
    "OverlaySpec",
    "apply_overlay",
    "get_overlay",
    "set_overlay",
    "validate_overlay",
]

_OP_RE = re.compile(
    r"^__(?P<op>PUT|DEL)__:(?P<key>.+)$|^__JOIN__\((?P<on>[^)]+)\):(?P<jkey>.+)$", re.DOTALL
)


def _check_key(key: object, op: str) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidOverlayError(f"{op}(key) needs a non-empty str field name, got {key!r}")
    return key


def PUT(key: str) -> str:
    """Replace a value entirely instead of merging/appending.

    Use as a dict key in overlays. For lists this replaces instead of appending; for dicts this
    replaces instead of recursive merge.

    >>> base = {"containers": [{"name": "old1"}, {"name": "old2"}]}
    >>> apply_overlay(base, {PUT("containers"): [{"name": "only"}]})
    >>> base
    {'containers': [{'name': 'only'}]}
    """
    return f"__PUT__:{_check_key(key, 'PUT')}"


def JOIN(key: str, *, on: str) -> str:
    """Strategic merge list items by key field.

    Matched items (same value for the ``on`` field) have their fields merged. Unmatched items
    are appended. Use as a dict key in overlays.

    >>> base = {"containers": [{"name": "main", "image": "v1"}]}
    >>> apply_overlay(base, {JOIN("containers", on="name"): [{"name": "main", "cpu": "1"}]})
    >>> base
    {'containers': [{'name': 'main', 'image': 'v1', 'cpu': '1'}]}

    Raises:
        OverlayTypeError: at apply time, if the base list (or the overlay list) holds non-dict
            items
    """
    _check_key(key, "JOIN")
    if not isinstance(on, str) or not on or ")" in on:
        raise InvalidOverlayError(f"JOIN({key!r}, on=...) needs a field name for on=, got {on!r}")
    return f"__JOIN__({on}):{key}"


def DEL(key: str) -> str:
    """Remove a key from the base dict.

    Use as a dict key in overlays; the value is ignored (convention: None). Unlike
    ``"field": None`` (field present but null), DEL removes the field entirely.

    >>> base = {"keep": 1, "remove_me": "old"}
    >>> apply_overlay(base, {DEL("remove_me"): None})
    >>> base
    {'keep': 1}
    """
    return f"__DEL__:{_check_key(key, 'DEL')}"


def _parse_key(key: str) -> tuple[str | None, str, str | None]:
    """Returns ``(operator or None, field name, join-on or None)``."""
    if isinstance(key, str) and key.startswith("__"):
        m = _OP_RE.match(key)
        if m:
            if m.group("op"):
                return m.group("op"), m.group("key"), None
            return "JOIN", m.group("jkey"), m.group("on")
    return None, key, None


def _resolved(value: Any) -> Any:
    """A deep copy of ``value`` with operator keys resolved against nothing."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        apply_overlay(out, value)
        return out
    if isinstance(value, list):
        return [_resolved(v) for v in value]
    return copy.deepcopy(value)


def _join(base: dict[str, Any], field: str, on: str, items: Any) -> None:
    if not isinstance(items, list):
        raise OverlayTypeError(f"JOIN({field!r}, on={on!r}) needs a list value, got {items!r}")
    current = base.get(field)
    if current is None:
        current = base[field] = []
    if not isinstance(current, list):
        raise OverlayTypeError(
            f"JOIN({field!r}, on={on!r}): the base value is {type(current).__name__}, not a list"
        )
    for item in [*current, *items]:
        if not isinstance(item, dict):
            raise OverlayTypeError(
                f"JOIN({field!r}, on={on!r}) merges lists of dicts; found the non-dict item {item!r}"
            )
    for item in items:
        key_val = item.get(on)
        match = next((b for b in current if on in item and b.get(on) == key_val), None)
        if match is None:
            current.append(_resolved(item))
        else:
            apply_overlay(match, item)


def _accumulate(base: dict[str, Any], key: str, value: Any) -> None:
    op, field, _ = _parse_key(key)
    same_field = [k for k in base if k != key and _parse_key(k)[1] == field]
    if op is not None:
        for k in same_field:
            del base[k]
        base[key] = copy.deepcopy(value)
        return
    op_keys = [k for k in same_field if _parse_key(k)[0] is not None]
    if op_keys:
        existing_op = op_keys[-1]
        ex_op = _parse_key(existing_op)[0]
        if ex_op == "DEL":
            del base[existing_op]
            base[PUT(field)] = copy.deepcopy(value)
            return
        key = existing_op  # merge into the PUT/JOIN value
    current = base.get(key)
    if isinstance(current, dict) and isinstance(value, dict):
        apply_overlay(current, value, _resolve=False)
    elif isinstance(current, list) and isinstance(value, list):
        current.extend(copy.deepcopy(value))
    else:
        base[key] = copy.deepcopy(value)


def apply_overlay(base: dict[str, Any], overlay: dict[str, Any], *, _resolve: bool = True) -> None:
    """Merge ``overlay`` into ``base`` in-place.

    Default rules: dict -> recursive merge (upsert keys); list -> append overlay items;
    primitive -> overwrite value. Operators (as dict keys): :py:func:`PUT` replaces the value
    entirely, :py:func:`JOIN` strategically merges list items by a key field, :py:func:`DEL`
    removes the key. During accumulation (multiple :py:func:`set_overlay` calls), operators for
    the same field replace earlier operations: last call wins.

    >>> base = {"spec": {"cpu": "500m"}, "tags": ["prod"], "replicas": 1}
    >>> apply_overlay(base, {"spec": {"memory": "1Gi"}, "tags": ["gpu"], "replicas": 3})
    >>> base
    {'spec': {'cpu': '500m', 'memory': '1Gi'}, 'tags': ['prod', 'gpu'], 'replicas': 3}

    Args:
        base: the request dict to modify
        overlay: the overlay to merge in
        _resolve: internal only, do not pass. When False, operator keys are stored as-is
            (used by :py:func:`set_overlay` for accumulation).

    Raises:
        OverlayTypeError: ``base``/``overlay`` are not dicts, or a JOIN meets non-dict items
    """
    if not isinstance(base, dict) or not isinstance(overlay, dict):
        raise OverlayTypeError(
            f"apply_overlay merges a dict overlay into a dict base; got base={type(base).__name__},"
            f" overlay={type(overlay).__name__}"
        )
    for key, value in overlay.items():
        if not _resolve:
            _accumulate(base, key, value)
            continue
        op, field, on = _parse_key(key)
        if op == "DEL":
            base.pop(field, None)
        elif op == "PUT":
            base[field] = _resolved(value)
        elif op == "JOIN":
            _join(base, field, on or "", value)
        else:
            current = base.get(field)
            if isinstance(current, dict) and isinstance(value, dict):
                apply_overlay(current, value)
            elif isinstance(current, list) and isinstance(value, list):
                current.extend(_resolved(value))
            else:
                base[field] = _resolved(value)


def _load_uri(uri: str) -> Any:
    try:
        import fsspec
    except ImportError as e:  # fsspec is a core dependency; keep the error typed anyway
        from torchx_core.specs.errors import MissingDependencyError

        raise MissingDependencyError("fsspec", "all", f"loading overlay file {uri}") from e
    try:
        with fsspec.open(uri, "r") as f:
            text = f.read()
    except ImportError as e:  # the URL's protocol needs a filesystem package (s3fs, gcsfs...)
        raise _missing_protocol(uri) from e
    except (OSError, ValueError) as e:
        raise InvalidOverlayError(f"cannot read overlay file {uri!r}: {e}") from e
    if not uri.endswith((".yaml", ".yml")):
        try:
            return json.loads(text)
        except ValueError:
            if uri.endswith(".json"):
                raise InvalidOverlayError(f"overlay file {uri!r} is not valid JSON") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidOverlayError(
            f"overlay file {uri!r} is neither valid JSON nor YAML: {e}"
        ) from e


def _missing_protocol(uri: str) -> Exception:
    from fsspec.registry import known_implementations

    from torchx_core.specs.errors import MissingDependencyError

    protocol = uri.split("://", 1)[0] if "://" in uri else "file"
    impl = known_implementations.get(protocol, {})
    package = str(impl.get("class", protocol)).split(".", 1)[0]
    return MissingDependencyError(
        package, "", f"reading the overlay file {uri} ({protocol}://)", pip_hint=f"pip install {package}"
    )


def _namespace(target: AppDef | Role, namespace: str) -> dict[str, Any] | None:
    ns = target.metadata.get(namespace)
    if ns is None:
        return None
    if isinstance(ns, str):
        ns = _load_uri(ns)
        if ns is None:
            return {}
    if not isinstance(ns, dict):
        raise InvalidOverlayError(
            f"metadata[{namespace!r}] must be a dict of overlays or a file URI, got {ns!r}"
        )
    return ns


def get_overlay(target: AppDef | Role, namespace: str, kind: str) -> _Overlay:
    """Retrieve the overlay stored in ``target.metadata[namespace][kind]``.

    Returns ``{}`` if not found. If ``metadata[namespace]`` is a string, it is loaded as a file
    URI via fsspec (JSON or YAML). For backwards compatibility, if ``kind`` is not a key in
    ``metadata[namespace]``, the entire namespace dict is returned as a flat overlay (with a
    deprecation warning).

    Raises:
        InvalidOverlayError: the namespace is neither a dict nor a readable JSON/YAML file
    """
    ns = _namespace(target, namespace)
    if not ns:
        return {}
    if kind in ns:
        overlay = ns[kind]
        if not isinstance(overlay, dict):
            raise InvalidOverlayError(
                f"metadata[{namespace!r}][{kind!r}] must be a dict overlay, got {overlay!r}"
            )
        return overlay
    warnings.warn(
        f"metadata[{namespace!r}] has no {kind!r} key; using the whole namespace as a flat"
        f" {kind} overlay. Store it with set_overlay(target, {namespace!r}, {kind!r}, ...)",
        DeprecationWarning,
        stacklevel=2,
    )
    return ns


def set_overlay(target: AppDef | Role, namespace: str, kind: str, overlay: _Overlay) -> None:
    """Store an overlay in ``target.metadata[namespace][kind]``.

    Multiple calls for the same (namespace, kind) accumulate (dicts merge, lists append). Use
    :py:func:`PUT`, :py:func:`JOIN` and :py:func:`DEL` keys to control per-field behavior.

    Args:
        target: the Role or AppDef to attach the overlay to
        namespace: scheduler namespace (e.g. ``"kubernetes"``)
        kind: scheduler struct type (e.g. ``"V1Pod"``)
        overlay: the overlay dict

    Raises:
        InvalidOverlayError: ``overlay`` is not a dict or the namespace holds a non-dict
    """
    if not isinstance(overlay, dict):
        raise InvalidOverlayError(f"an overlay must be a dict, got {overlay!r}")
    ns = _namespace(target, namespace)
    if ns is None:
        ns = {}
    target.metadata[namespace] = ns  # type: ignore[assignment]  # AppDef.metadata values are str in TorchX's annotation
    existing = ns.get(kind)
    if existing is None:
        existing = ns[kind] = {}
    elif not isinstance(existing, dict):
        raise InvalidOverlayError(
            f"metadata[{namespace!r}][{kind!r}] must be a dict overlay, got {existing!r}"
        )
    apply_overlay(existing, overlay, _resolve=False)


def validate_overlay(
    overlay: dict[str, Any],
    *,
    blocklist: list[str] | None = None,
    forbidden_keys: set[str] | None = None,
    overlay_name: str = "overlay",
    suggestion: str = "",
) -> None:
    """Validate that ``overlay`` doesn't contain disallowed (top-level) keys.

    Operator keys (e.g. ``PUT("env")``) are resolved to their field name before checking.

    >>> try:
    ...     validate_overlay({"env": {"FOO": "bar"}}, blocklist=["env"], overlay_name="PodSpec")
    ... except ValueError as e:
    ...     "env" in str(e)
    True

    Args:
        overlay: the overlay to check
        blocklist: keys that should be set via Role/AppDef attributes
        forbidden_keys: keys that belong to a different overlay type
        overlay_name: overlay type name for error messages
        suggestion: hint appended when forbidden_keys are found

    Raises:
        InvalidOverlayError: (a ValueError) listing every disallowed key
    """
    if not isinstance(overlay, dict):
        raise InvalidOverlayError(f"{overlay_name} overlay must be a dict, got {overlay!r}")
    fields = {_parse_key(k)[1]: k for k in overlay}
    problems: list[str] = []
    blocked = sorted(f for f in fields if blocklist and f in blocklist)
    if blocked:
        problems.append(
            f"{overlay_name} overlay sets {', '.join(repr(b) for b in blocked)}, which must be set"
            f" via the Role/AppDef attributes instead (not allowed in overlays:"
            f" {', '.join(sorted(blocklist or []))})"
        )
    forbidden = sorted(f for f in fields if forbidden_keys and f in forbidden_keys)
    if forbidden:
        msg = (
            f"{overlay_name} overlay contains {', '.join(repr(f) for f in forbidden)}, which"
            " belong to a different overlay type"
        )
        problems.append(f"{msg}. {suggestion}" if suggestion else msg)
    if problems:
        raise InvalidOverlayError("; ".join(problems))


@dataclass(frozen=True)
class OverlaySpec:
    """A scheduler's overlay surface declared once: namespace, kind, and blocked keys.

    >>> from torchx_core.specs import Role
    >>> V1POD = OverlaySpec("kubernetes", "V1Pod", blocklist=("command", "env"))
    >>> role = Role(name="trainer", image="img", entrypoint="train.py")
    >>> V1POD.set(role, {"spec": {"nodeSelector": {"gpu": "true"}}})
    >>> V1POD.get(role)
    {'spec': {'nodeSelector': {'gpu': 'true'}}}

    Args:
        namespace: the scheduler namespace (e.g. ``"kubernetes"``)
        kind: the scheduler struct type (e.g. ``"V1Pod"``)
        blocklist: keys that must be set through Role/AppDef attributes instead
    """

    namespace: str
    kind: str
    blocklist: tuple[str, ...] = ()

    def set(self, target: AppDef | Role, overlay: _Overlay) -> None:
        """Stores ``overlay`` with :func:`set_overlay` (accumulating), refusing blocked keys.

        Raises:
            InvalidOverlayError: ``overlay`` sets a blocked key
        """
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        set_overlay(target, self.namespace, self.kind, overlay)

    def get(self, target: AppDef | Role) -> _Overlay:
        """The overlay stored for this kind (``{}`` if none), checked against the blocklist.

        Only the nested ``metadata[namespace][kind]`` form is read: never a flat namespace
        dict written for another kind.

        Raises:
            InvalidOverlayError: the stored overlay sets a blocked key
        """
        ns = _namespace(target, self.namespace)
        overlay = ns.get(self.kind, {}) if ns else {}
        if not isinstance(overlay, dict):
            raise InvalidOverlayError(
                f"metadata[{self.namespace!r}][{self.kind!r}] must be a dict overlay, got"
                f" {overlay!r}"
            )
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        return overlay

"""Overlays patch the scheduler's submit-job request with fields not representable in AppDef/Role.

Users attach overlays with :py:func:`set_overlay`; schedulers read them with
:py:func:`get_overlay`, guard them with :py:func:`validate_overlay` and merge them into their
request with :py:func:`apply_overlay`.

Default merge rules: dicts merge recursively (upsert keys), lists append, primitives overwrite.
The operators :py:func:`PUT`, :py:func:`JOIN` and :py:func:`DEL`, used as dict keys, override
this per field. Operator keys are plain strings, spelled as TorchX does (``"__put__:containers"``,
``"__join__:initContainers:name"``, ``"__del__:hostNetwork"``), so overlays stay JSON/YAML
serializable in ``metadata`` and interchangeable with TorchX's. Unlike TorchX, operator keys
inside a value that is new to the base are resolved too: a request never carries them.

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

#: the key :py:func:`set_overlay` puts in a namespace dict: its kinds are nested-only
_FORMAT_KEY = "__torchx_overlays__"

_PUT_PREFIX = "__put__:"
_DEL_PREFIX = "__del__:"
_JOIN_PREFIX = "__join__:"


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
    return f"{_PUT_PREFIX}{_check_key(key, 'PUT')}"


def JOIN(key: str, *, on: str) -> str:
    """Strategic merge list items by key field.

    Matched items (same value for the ``on`` field) are merged with the overlay item like a dict
    overlay (nested dicts merge, lists append, operators act; TorchX replaces their top-level
    fields instead). Unmatched items are appended. Use as a dict key in overlays.

    >>> base = {"containers": [{"name": "main", "image": "v1"}]}
    >>> apply_overlay(base, {JOIN("containers", on="name"): [{"name": "main", "cpu": "1"}]})
    >>> base
    {'containers': [{'name': 'main', 'image': 'v1', 'cpu': '1'}]}

    Raises:
        OverlayTypeError: at apply time, if the base list (or the overlay list) holds non-dict
            items
    """
    _check_key(key, "JOIN")
    if not isinstance(on, str) or not on or ":" in key:
        raise InvalidOverlayError(
            f"JOIN({key!r}, on=...) needs a field name for on= (and a key without ':'), got {on!r}"
        )
    return f"{_JOIN_PREFIX}{key}:{on}"


def DEL(key: str) -> str:
    """Remove a key from the base dict.

    Use as a dict key in overlays; the value is ignored (convention: None). Unlike
    ``"field": None`` (field present but null), DEL removes the field entirely.

    >>> base = {"keep": 1, "remove_me": "old"}
    >>> apply_overlay(base, {DEL("remove_me"): None})
    >>> base
    {'keep': 1}
    """
    return f"{_DEL_PREFIX}{_check_key(key, 'DEL')}"


def _field_of(key: str) -> str:
    """The field an (operator) key is about: ``"__join__:containers:name"`` -> ``"containers"``."""
    if not isinstance(key, str):
        return key
    if key.startswith(_PUT_PREFIX):
        return key[len(_PUT_PREFIX) :]
    if key.startswith(_DEL_PREFIX):
        return key[len(_DEL_PREFIX) :]
    if key.startswith(_JOIN_PREFIX):
        return key[len(_JOIN_PREFIX) :].split(":", 1)[0]
    return key


def _drop_field(base: dict[str, Any], field: str, *, keep: str | None = None) -> None:
    """Removes every key of ``base`` about ``field`` (plain or operator) but ``keep``."""
    for k in [k for k in base if k != keep and _field_of(k) == field]:
        del base[k]


def _fresh(value: Any) -> Any:
    """A copy of ``value`` for a new key: operator keys inside resolved, tuples as lists."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        apply_overlay(out, value)
        return out
    if isinstance(value, (list, tuple)):
        return [_fresh(v) for v in value]
    return copy.deepcopy(value)


def _join(base: dict[str, Any], key: str, items: Any) -> None:
    field, _, on = key[len(_JOIN_PREFIX) :].partition(":")
    if not on:
        raise InvalidOverlayError(f"malformed JOIN key {key!r}; write JOIN(field, on=key)")
    if not isinstance(items, list):
        raise OverlayTypeError(f"JOIN({field!r}, on={on!r}) needs a list value, got {items!r}")
    _drop_field(base, field, keep=field)
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
                f"JOIN({field!r}, on={on!r}) merges lists of dicts;"
                f" found the non-dict item {item!r}"
            )
    for item in items:
        match = None
        if on in item:
            match = next((b for b in current if on in b and b[on] == item[on]), None)
        if match is None:
            current.append(_fresh(item))
        else:  # merged like a dict overlay (TorchX replaces the top-level fields)
            apply_overlay(match, item)


def _merge(base: dict[str, Any], key: str, value: Any, resolve: bool) -> None:
    if key not in base:
        base[key] = (
            _fresh(value)
            if resolve
            else (list(value) if isinstance(value, tuple) else copy.deepcopy(value))
        )
        return
    current = base[key]
    if isinstance(current, dict) and isinstance(value, dict):
        apply_overlay(current, value, _resolve=resolve)
    elif isinstance(current, list) and isinstance(value, tuple):
        base[key] = _fresh(value) if resolve else list(value)  # a tuple replaces (TorchX)
    elif isinstance(current, list) and isinstance(value, list):
        current.extend(_fresh(value) if resolve else copy.deepcopy(value))
    elif isinstance(current, (dict, list)) or isinstance(value, (dict, list)):
        raise OverlayTypeError(
            f"type mismatch for attr: `{key}`. {type(current).__qualname__} !="
            f" {type(value).__qualname__} (use PUT({key!r}) to replace the value)"
        )
    else:
        base[key] = value


def apply_overlay(base: dict[str, Any], overlay: dict[str, Any], *, _resolve: bool = True) -> None:
    """Merge ``overlay`` into ``base`` in-place.

    Default rules: dict -> recursive merge (upsert keys); list -> append overlay items (a tuple
    replaces the list); primitive -> overwrite value; a dict or list against a value of another
    type is an error. Operators (as dict keys): :py:func:`PUT` replaces the value entirely,
    :py:func:`JOIN` strategically merges list items by a key field, :py:func:`DEL` removes the
    key. A key replaces every other key of ``base`` about the same field (last call wins), so
    during accumulation (multiple :py:func:`set_overlay` calls) operators for the same field
    replace earlier operations while repeated ones accumulate.

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
        OverlayTypeError: ``base``/``overlay`` are not dicts, structural types differ, or a JOIN
            meets non-dict items
    """
    if not isinstance(base, dict) or not isinstance(overlay, dict):
        raise OverlayTypeError(
            f"apply_overlay merges a dict overlay into a dict base; got base={type(base).__name__},"
            f" overlay={type(overlay).__name__}"
        )
    for key, value in overlay.items():
        field = _field_of(key)
        if _resolve and isinstance(key, str):
            if key.startswith(_DEL_PREFIX):
                _drop_field(base, field)
                continue
            if key.startswith(_PUT_PREFIX):
                _drop_field(base, field)
                base[field] = _fresh(value)
                continue
            if key.startswith(_JOIN_PREFIX):
                _join(base, key, value)
                continue
        _drop_field(base, field, keep=key)
        _merge(base, key, value, _resolve)


def _load_overlay_file(uri: str) -> _Overlay:
    """The overlay dict in a JSON or YAML file (a path or an fsspec URI).

    YAML may use ``!!python/tuple`` (a list that replaces instead of appending).

    Raises:
        InvalidOverlayError: unreadable, not JSON/YAML, or not a dict
        MissingDependencyError: the URI's filesystem package is not installed
    """
    text = _read(uri)
    data: Any = None
    if not uri.endswith((".yaml", ".yml")):
        try:
            data = json.loads(text)
        except ValueError:
            if uri.endswith(".json"):
                raise InvalidOverlayError(f"overlay file {uri!r} is not valid JSON") from None
            data = _yaml(uri, text)
    else:
        data = _yaml(uri, text)
    if data is None:  # an empty file: no overlay
        return {}
    if not isinstance(data, dict):
        raise InvalidOverlayError(
            f"overlay file {uri!r} must contain a dict, got {type(data).__name__}"
        )
    return data


def _read(uri: str) -> str:
    try:
        import fsspec
    except ImportError as e:  # fsspec is a core dependency; keep the error typed anyway
        from torchx_core.specs.errors import MissingDependencyError

        raise MissingDependencyError("fsspec", "all", f"loading overlay file {uri}") from e
    try:
        with fsspec.open(uri, "r") as f:
            return str(f.read())
    except ImportError as e:  # the URL's protocol needs a filesystem package (s3fs, gcsfs...)
        raise _missing_protocol(uri) from e
    except (OSError, ValueError) as e:
        raise InvalidOverlayError(f"cannot read overlay file {uri!r}: {e}") from e


def _yaml(uri: str, text: str) -> Any:
    import yaml

    class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # no yaml stubs: SafeLoader is Any
        """SafeLoader that also reads ``!!python/tuple`` (as TorchX's overlay files may)."""

    _Loader.add_constructor(
        "tag:yaml.org,2002:python/tuple",
        lambda loader, node: tuple(loader.construct_sequence(node)),
    )
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
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
        package,
        "",
        f"reading the overlay file {uri} ({protocol}://)",
        pip_hint=f"pip install {package}",
    )


def _check_kind(kind: str) -> None:
    if kind == _FORMAT_KEY:
        raise InvalidOverlayError(f"overlay kind {kind!r} is reserved for the nested-format marker")


def get_overlay(
    target: AppDef | Role, namespace: str, kind: str, *, flat_fallback: bool = True
) -> _Overlay:
    """Retrieve the overlay stored in ``target.metadata[namespace][kind]``.

    Returns ``{}`` if not found (or if ``metadata[namespace]`` is neither a dict nor a string).
    If ``metadata[namespace]`` is a string, it is loaded as a file URI via fsspec (JSON or YAML).

    A namespace written by :py:func:`set_overlay` carries a format marker and is nested-only: a
    missing ``kind`` returns ``{}``. For backwards compatibility, an unmarked namespace dict
    (written directly into metadata) without ``kind`` is returned whole as a flat overlay, with
    a warning, unless it looks nested (several dict values) or ``flat_fallback`` is False.

    Raises:
        InvalidOverlayError: ``kind`` is reserved, the stored overlay is not a dict, or the file
            cannot be read as a JSON/YAML dict
    """
    _check_kind(kind)
    ns = target.metadata.get(namespace)
    if isinstance(ns, str):
        ns = _load_overlay_file(ns)
    if not isinstance(ns, dict):
        if ns is not None:
            logger.warning(
                "metadata[%r] is a %s, not a dict of overlays or a file URI; no %s overlay read",
                namespace,
                type(ns).__name__,
                kind,
            )
        return {}
    if kind in ns:
        overlay = ns[kind]
        if not isinstance(overlay, dict):
            raise InvalidOverlayError(
                f"metadata[{namespace!r}][{kind!r}] must be a dict overlay, got {overlay!r}"
            )
        return overlay
    kinds = [k for k in ns if k != _FORMAT_KEY]
    if ns.get(_FORMAT_KEY):
        if kinds:
            logger.debug(
                "overlay kind %r not found in namespace %r (available kinds: %s)",
                kind,
                namespace,
                kinds,
            )
        return {}
    if (
        not flat_fallback
        or not ns
        or (len(ns) > 1 and all(isinstance(v, dict) for v in ns.values()))
    ):
        return {}
    logger.warning(
        "overlay kind %r not found in namespace %r (available keys: %s); treating"
        " metadata[%r] as a flat overlay. Store it with set_overlay(target, %r, %r, overlay)"
        " for the nested format",
        kind,
        namespace,
        kinds,
        namespace,
        namespace,
        kind,
    )
    return ns


def set_overlay(target: AppDef | Role, namespace: str, kind: str, overlay: _Overlay) -> None:
    """Store an overlay in ``target.metadata[namespace][kind]``.

    Multiple calls for the same (namespace, kind) accumulate (dicts merge, lists append). Use
    :py:func:`PUT`, :py:func:`JOIN` and :py:func:`DEL` keys to control per-field behavior. The
    namespace gets the nested-format marker. A namespace holding a file URI is loaded and kept;
    any other non-dict value (or an unreadable file) is replaced, with a warning.

    Args:
        target: the Role or AppDef to attach the overlay to
        namespace: scheduler namespace (e.g. ``"kubernetes"``)
        kind: scheduler struct type (e.g. ``"V1Pod"``)
        overlay: the overlay dict

    Raises:
        InvalidOverlayError: ``overlay`` is not a dict, ``kind`` is reserved, or the stored
            ``kind`` holds a non-dict
    """
    if not isinstance(overlay, dict):
        raise InvalidOverlayError(f"an overlay must be a dict, got {overlay!r}")
    _check_kind(kind)
    ns = target.metadata.get(namespace)
    if isinstance(ns, str):
        try:
            ns = _load_overlay_file(ns)
        except InvalidOverlayError as e:
            logger.warning("replacing metadata[%r] (%s) with set_overlay's overlays", namespace, e)
            ns = {}
    elif ns is not None and not isinstance(ns, dict):
        logger.warning(
            "replacing the %s in metadata[%r] with set_overlay's overlays",
            type(ns).__name__,
            namespace,
        )
        ns = None
    if ns is None:
        ns = {}
    target.metadata[namespace] = ns  # type: ignore[assignment]  # AppDef.metadata values are str in TorchX's annotation
    ns[_FORMAT_KEY] = True
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
    fields = {_field_of(k): k for k in overlay}
    problems: list[str] = []
    blocked = sorted(f for f in fields if blocklist and f in blocklist)
    if blocked:
        problems.append(
            f"{overlay_name} overlay sets {', '.join(f'`{overlay_name}.{b}`' for b in blocked)},"
            " which must be set via the Role/AppDef attributes instead (not allowed in overlays:"
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
        overlay = get_overlay(target, self.namespace, self.kind, flat_fallback=False)
        validate_overlay(overlay, blocklist=list(self.blocklist), overlay_name=self.kind)
        return overlay

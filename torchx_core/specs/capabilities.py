"""Typed keys into ``Resource.capabilities`` (``torchx.specs.capabilities``).

``Resource.capabilities`` is a plain dict read by schedulers; a :class:`CapabilityKey` names
one key once (``"<namespace>.<name>"``) and type-checks what is read back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from torchx_core.specs._app import Resource

__all__ = ["CapabilityKey", "V"]

V = TypeVar("V")
_MISSING = object()


class CapabilityKey(Generic[V]):
    """A typed, namespaced key into ``Resource.capabilities`` (frozen; compared by value).

    >>> from torchx_core.specs import Resource
    >>> NETWORK = CapabilityKey("aws", "network_bandwidth_gbps", int)
    >>> NETWORK.key
    'aws.network_bandwidth_gbps'
    >>> res = Resource(cpu=4, gpu=0, memMB=1024)
    >>> NETWORK.set(res, 400)
    >>> res.capabilities
    {'aws.network_bandwidth_gbps': 400}
    >>> NETWORK.get(res)
    400
    >>> CapabilityKey("aws", "efa_enabled", bool).get(res, default=False)
    False

    Args:
        namespace: grouping prefix (a cloud provider or scheduler name)
        name: the capability's name within the namespace
        type: the value type :meth:`get` checks
    """

    __slots__ = ("name", "namespace", "type")
    namespace: str
    name: str
    type: type[V]

    def __init__(self, namespace: str, name: str, type: type[V]) -> None:
        object.__setattr__(self, "namespace", namespace)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type", type)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"CapabilityKey is frozen: cannot set {key!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CapabilityKey) and (
            self.namespace, self.name, self.type
        ) == (other.namespace, other.name, other.type)

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.type))

    def __repr__(self) -> str:
        return (
            f"CapabilityKey(namespace={self.namespace!r}, name={self.name!r},"
            f" type={self.type.__name__})"
        )

    @property
    def key(self) -> str:
        """The plain string key stored in ``Resource.capabilities``."""
        return f"{self.namespace}.{self.name}"

    def set(self, resource: Resource, value: V) -> None:
        """Stores ``value`` under :attr:`key` in ``resource.capabilities``."""
        resource.capabilities[self.key] = value

    def get(self, resource: Resource, default: V | None = None) -> V | None:
        """The value stored under :attr:`key`, or ``default``.

        Raises:
            TypeError: the stored value is not a ``type`` (a bool is not an int here)
        """
        value = resource.capabilities.get(self.key, _MISSING)
        if value is _MISSING:
            return default
        if (self.type is int and type(value) is bool) or not isinstance(value, self.type):
            raise TypeError(
                f"capability `{self.key}` expected `{self.type.__name__}`,"
                f" got `{type(value).__name__}`: {value!r}"
            )
        return value  # type: ignore[no-any-return]

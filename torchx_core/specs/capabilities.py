"""Typed keys into ``Resource.capabilities`` (``torchx.specs.capabilities``).

``Resource.capabilities`` is a plain dict read by schedulers; a :class:`CapabilityKey` names
one key once (``"<namespace>.<name>"``) and type-checks what is read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from torchx_core.specs._app import Resource

__all__ = ["CapabilityKey", "V"]

V = TypeVar("V")
_MISSING = object()


@dataclass(frozen=True)
class CapabilityKey(Generic[V]):
    """A typed, namespaced key into ``Resource.capabilities``.

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

    namespace: str
    name: str
    type: type[V]

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
        return value

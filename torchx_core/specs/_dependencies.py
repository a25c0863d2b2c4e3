"""What torchx-suite declares about its optional dependencies, and what is installed.

Read from the installed ``torchx-suite`` metadata (``Requires-Dist``), so the ranges in error
messages are the ones in ``pyproject.toml``. Used on error paths and once per distribution
(cached); nothing here runs at import.
"""

from __future__ import annotations

import functools
import operator
import re

__all__ = [
    "DIST_NAME",
    "Requirement",
    "declared",
    "installed_version",
    "satisfies",
    "simple_satisfies",
]

DIST_NAME = "torchx-suite"

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)(?:;(.*))?$")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def canonical(name: str) -> str:
    """The PEP 503 form of a distribution name (``Apache_Airflow`` -> ``apache-airflow``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


class Requirement:
    """One ``Requires-Dist`` line: distribution, version range, the extra that adds it."""

    def __init__(self, name: str, specifier: str, extra: str | None) -> None:
        self.name = canonical(name)
        # lower bounds first: ">=3.0,<4" reads better than the metadata's "<4,>=3.0"
        parts = [p.strip() for p in specifier.split(",") if p.strip()]
        self.specifier = ",".join(sorted(parts, key=lambda p: (not p.startswith(">"), p)))
        self.extra = extra

    def __repr__(self) -> str:
        return f"Requirement({self.name!r}, {self.specifier!r}, extra={self.extra!r})"


def parse_requirement(line: str) -> Requirement | None:
    """Parses a ``Requires-Dist`` value; None for one it cannot read."""
    m = _REQ.match(line)
    if m is None:
        return None
    extra = _EXTRA.search(m.group(3) or "")
    return Requirement(m.group(1), m.group(2).strip(), extra.group(1) if extra else None)


@functools.lru_cache(maxsize=1)
def _requirements() -> tuple[Requirement, ...]:
    from importlib import metadata

    try:
        lines = metadata.requires(DIST_NAME) or []
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return ()
    return tuple(r for r in map(parse_requirement, lines) if r is not None)


def declared(
    distribution: str | None, extra: str, module: str = "", *, imported: bool = False
) -> Requirement | None:
    """torchx-suite's requirement on the distribution that provides ``module``.

    Args:
        distribution: the distribution's name; None to find it: the extra's requirement named
            like ``module``, else (unless ``imported``) the installed requirement that provides
            ``module``, else the extra's only requirement when it is not installed
        extra: the torchx-suite extra that installs it
        module: the top-level module
        imported: ``module`` did import, so the extra's only requirement is taken as its
            provider without looking through the installed distributions
    """
    reqs = _requirements()
    by_extra = [r for r in reqs if r.extra == extra and r.name != DIST_NAME]
    if distribution is not None:
        name = canonical(distribution)
        return next((r for r in by_extra if r.name == name), None) or next(
            (r for r in reqs if r.name == name), None
        )
    name = canonical(module)
    named = next((r for r in by_extra if r.name == name), None)
    if named is not None:
        return named
    if imported:
        return by_extra[0] if len(by_extra) == 1 else None
    from importlib import metadata

    providers = {canonical(d) for d in metadata.packages_distributions().get(module, [])}
    provider = next((r for r in [*by_extra, *reqs] if r.name in providers), None)
    if provider is not None:
        return provider
    if len(by_extra) == 1 and installed_version(by_extra[0].name) is None:
        return by_extra[0]
    return None


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def satisfies(version: str, specifier: str) -> bool | None:
    """Whether ``version`` is in ``specifier``; None when it cannot tell.

    Uses ``packaging`` when installed; without it (a venv with only an engine and this package:
    kfp does not depend on it), :func:`simple_satisfies` reads the plain ranges we declare.
    """
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion
    except ImportError:
        return simple_satisfies(version, specifier)
    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


_VERSION = re.compile(
    r"^v?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|dev|post)\S*)?(?:\+\S*)?$"
)
_CLAUSE = re.compile(r"^(>=|<=|==|!=|>|<)\s*(\S+)$")
_COMPARE = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
}


def _version_key(text: str) -> tuple[int, ...] | None:
    """``2.16.0rc1`` -> (2, 16, 0, 0, 0, 0, 0): the release padded, then 1 for a final release
    (0 for a pre- or dev release, 2 for a post release); None for what it cannot read."""
    m = _VERSION.match(text.strip().lower())
    if m is None:
        return None
    release = [int(x) for x in m.group(1).split(".")][:6]
    tag = m.group(2)
    rank = 1 if tag is None else 2 if tag == "post" else 0
    return (*release, *([0] * (6 - len(release))), rank)


def simple_satisfies(version: str, specifier: str) -> bool | None:
    """:func:`satisfies` without ``packaging``, for comma-separated ``>=``, ``<``, ``<=``,
    ``>``, ``==`` and ``!=`` clauses of plain versions; None for anything else (``~=``, ``*``).

    >>> simple_satisfies("2.15.2", ">=2.16,<3"), simple_satisfies("2.16.0", ">=2.16,<3")
    (False, True)
    >>> simple_satisfies("2.16.0rc1", ">=2.16"), simple_satisfies("1.0", "~=1.0")
    (False, None)
    """
    have = _version_key(version)
    if have is None:
        return None
    for clause in (c.strip() for c in specifier.split(",") if c.strip()):
        m = _CLAUSE.match(clause)
        bound = _version_key(m.group(2)) if m else None
        if m is None or bound is None:
            return None
        if not _COMPARE[m.group(1)](have, bound):
            return False
    return True

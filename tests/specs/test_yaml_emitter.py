"""The fast YAML emitter round-trips any plain data through a real YAML loader."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from torchx_core.util.yaml_emitter import dump_yaml

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
    st.sampled_from(
        ["true", "No", "null", "1", "0x1F", "1e3", "-", "a: b", "#x", "", " x", "2024-01-01"]
    ),
)
data = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(st.dictionaries(st.text(max_size=8), data, max_size=5), st.lists(data, max_size=5))
)
def test_round_trip(obj: object) -> None:
    assert yaml.safe_load(dump_yaml(obj)) == obj


def test_block_style_and_quoting() -> None:
    text = dump_yaml(
        {"cpu": "2", "flag": "true", "name": "trainer", "args": ["-m", "x y"], "e": {}}
    )
    assert text == 'cpu: "2"\nflag: "true"\nname: trainer\nargs:\n  - "-m"\n  - "x y"\ne: {}\n'

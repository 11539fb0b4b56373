"""``connectors.formats.json_encoder`` writes exactly ``json.dumps``'s text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spadeopt.connectors.formats import json_encoder

TYPES = ("int", "float", "str", "bool", "bytes")
EXACT = {"int": st.integers(), "float": st.floats(), "str": st.text(), "bool": st.booleans(), "bytes": st.binary()}
ANY = st.one_of(st.integers(), st.floats(), st.text(), st.booleans(), st.none())


def _reference(names, types, t):
    return json.dumps({n: (v.hex() if ty == "bytes" and isinstance(v, bytes) else v)
                       for n, ty, v in zip(names, types, t, strict=True)})


@st.composite
def schemas_and_tuples(draw):
    types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=6))
    names = draw(st.lists(st.text(min_size=1, max_size=8), min_size=len(types), max_size=len(types), unique=True))
    # mostly the schema's types; sometimes any value (an int in a float attribute, None, NaN)
    values = tuple(draw(st.one_of(EXACT[t], ANY) if t != "bytes" else EXACT[t]) for t in types)
    return names, types, values


@given(schemas_and_tuples())
def test_the_text_is_json_dumps_text_for_any_names_and_values(case):
    names, types, t = case
    assert json_encoder(names, types)(t) == _reference(names, types, t)


def test_names_with_percent_signs_quotes_and_non_ascii_are_escaped_as_json_does():
    names, types = ['a%d', 'q"', "é", "%%"], ["int", "str", "float", "bool"]
    t = (7, 'x"y\n', 1e300, False)
    assert json_encoder(names, types)(t) == _reference(names, types, t)
    assert json.loads(json_encoder(names, types)(t)) == dict(zip(names, t, strict=True))


def test_a_tuple_of_the_wrong_length_is_an_error():
    with pytest.raises(ValueError):
        json_encoder(["a", "b"], ["int", "int"])((1,))


@given(st.lists(st.sampled_from(("int", "float", "str", "bool")), min_size=1, max_size=5),
       st.lists(st.one_of(st.integers(), st.floats(allow_nan=False), st.text(), st.booleans(), st.none()),
                min_size=5, max_size=5))
def test_a_picked_tuple_is_the_cast_tuple_and_anything_else_is_left_to_the_cast(types, raw):
    from spadeopt.connectors.formats import LIVE_CASTS, row_caster, typed_picker

    schema = [[f"a{i}", t] for i, t in enumerate(types)]
    obj = {f"a{i}": v for i, v in enumerate(raw[:len(types)])}
    picked = typed_picker(schema)(obj)
    if picked is not None:
        assert picked == row_caster(schema, LIVE_CASTS)(list(obj.values()), lambda: "")
        assert [type(v).__name__ for v in picked] == types
    else:
        assert any(type(v).__name__ != t for v, t in zip(obj.values(), types, strict=True))

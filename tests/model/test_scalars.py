"""The five attribute types have one home (``model.schema.SCALARS``): every layer's view of
them is derived from it or covers exactly its names."""

from __future__ import annotations

from spadeopt.connectors import formats
from spadeopt.kinds.join import ORDER_TYPES
from spadeopt.model.schema import SCALARS, TYPES
from spadeopt.wire import WIRE_TYPES


def test_every_layer_knows_exactly_the_scalars_of_the_one_table():
    names = set(SCALARS)
    assert names == {"int", "float", "str", "bool", "bytes"}
    assert set(TYPES) == set(WIRE_TYPES) == set(formats.CASTS) == set(formats.LIVE_CASTS) == set(formats._FAST) == names
    assert set(ORDER_TYPES) <= names and ORDER_TYPES == {"int": "int", "float": "float", "bool": "int"}


def test_the_views_say_what_the_table_says():
    none = type(None)
    assert WIRE_TYPES["float"] == {float, int, none} and WIRE_TYPES["str"] == {str, none}
    assert TYPES["bytes"] is bytes
    assert formats._FAST["int"] == ("int", "%d") and formats._FAST["bytes"] == ("bytes", '"%s"')
    enc = formats.json_encoder(["k", "x", "s", "ok", "b"], ["int", "float", "str", "bool", "bytes"])
    assert enc((1, 2.5, "a", True, b"\x01")) == '{"k": 1, "x": 2.5, "s": "a", "ok": true, "b": "01"}'

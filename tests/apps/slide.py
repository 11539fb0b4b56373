"""``ckslide`` (tests/apps/ckpt.py) as a file of its own, for ``spadeopt run``: keyed
sliding windows over out-of-order readings in regions ``swins`` and ``scnts``."""

from __future__ import annotations

from tests.apps.ckpt import ckslide, jittered  # noqa: F401 - the PEs find the generator here

app = ckslide

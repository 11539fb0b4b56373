"""Refinement: raw samples -> ``profile.json`` (Spark job), and the comm-cost mapping ``v``.

* :func:`refine` (``spadeopt refine``, :mod:`.job`): per port tuple rate, byte rate and
  size; per operator the CPU fraction ``u`` of Equation 1 and selectivities; per link
  rate and size. The arithmetic is in :mod:`.estimate`.
* :class:`Profile` (:mod:`.profile`): the refined profile file (``docs/profile-format.md``).
* :mod:`.calibrate` (``spadeopt calibrate``): measure ``v(rate, size)`` on this machine.
* :class:`CommCost` (:mod:`.comm`): load a calibration and look ``v`` up (a ``CommModel``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spadeopt.refine.comm import CommCost
from spadeopt.refine.profile import LinkStats, OperatorStats, PortStats, Profile

if TYPE_CHECKING:
    from spadeopt.refine.job import refine

__all__ = ["CommCost", "LinkStats", "OperatorStats", "PortStats", "Profile", "refine"]


def __getattr__(name: str) -> Any:
    if name == "refine":  # lazily: the Spark job pulls in pyspark
        from spadeopt.refine.job import refine

        return refine
    raise AttributeError(f"module 'spadeopt.refine' has no attribute {name!r}")

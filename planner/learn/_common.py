"""What the demos share: array types and the sensitivity of a count."""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from planner.planning.mechanisms.base import Sensitivity

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: A count: one person changes it by at most 1 (L1 and L2).
_COUNT: Final = Sensitivity(1.0, 1.0)

"""Look up mechanism implementations by their stable public name."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from planner.core.errors import QueryError
from planner.planning.mechanisms.base import AdditiveNoise, MechanismName
from planner.planning.mechanisms.gaussian import DISCRETE_GAUSSIAN, GAUSSIAN
from planner.planning.mechanisms.laplace import DISCRETE_LAPLACE, LAPLACE

#: The additive-noise mechanisms, by name.
ADDITIVE: Final[Mapping[MechanismName, AdditiveNoise]] = MappingProxyType(
    {
        MechanismName.LAPLACE: LAPLACE,
        MechanismName.GAUSSIAN: GAUSSIAN,
        MechanismName.DISCRETE_LAPLACE: DISCRETE_LAPLACE,
        MechanismName.DISCRETE_GAUSSIAN: DISCRETE_GAUSSIAN,
    }
)


def additive(name: MechanismName | str) -> AdditiveNoise:
    """The :class:`AdditiveNoise` implementation called ``name``.

    Examples
    --------
    >>> additive("laplace").name
    <MechanismName.LAPLACE: 'laplace'>
    """
    try:
        key = MechanismName(name)
    except ValueError:
        key = None
    if key is None or key not in ADDITIVE:
        raise QueryError(
            f"mechanism {str(name)!r} is not an additive-noise mechanism; expected one of "
            f"{', '.join(sorted(m.value for m in ADDITIVE))}."
        )
    return ADDITIVE[key]

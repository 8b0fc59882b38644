"""Bai & Lee (2020), "Beyond Linearization": six experiments (the paper itself has none; each
checks one of its theoretical results numerically).

Importing this package registers ``bailee-coupling`` (Sec. 3), ``bailee-expressivity``
(Theorem 7, Sec. 5.2), ``bailee-xor`` (Sec. 5.2), ``bailee-higher-order`` (Sec. 6.1),
``bailee-landscape`` (Sec. 4) and ``bailee-generalization`` (Sec. 5.1).
"""

from lazylab.experiments.bailee.coupling import Coupling, CouplingParams
from lazylab.experiments.bailee.expressivity import Expressivity, ExpressivityParams
from lazylab.experiments.bailee.generalization import Generalization, GeneralizationParams
from lazylab.experiments.bailee.higher_order import HigherOrder, HigherOrderParams
from lazylab.experiments.bailee.landscape import Landscape, LandscapeParams
from lazylab.experiments.bailee.xor import Xor, XorParams

__all__ = [
    "Coupling", "CouplingParams",  # bailee-coupling (Sec. 3)
    "Expressivity", "ExpressivityParams",  # bailee-expressivity (Theorem 7, Sec. 5.2)
    "Xor", "XorParams",  # bailee-xor (Sec. 5.2)
    "HigherOrder", "HigherOrderParams",  # bailee-higher-order (Sec. 6.1)
    "Landscape", "LandscapeParams",  # bailee-landscape (Sec. 4)
    "Generalization", "GeneralizationParams",  # bailee-generalization (Sec. 5.1)
]

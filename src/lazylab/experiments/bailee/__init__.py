"""Bai & Lee (2020), "Beyond Linearization": six experiments (the paper itself has none; each
checks one of its theoretical results numerically).

Importing this package registers ``bailee-coupling`` (Sec. 3), ``bailee-expressivity``
(Theorem 7, Sec. 5.2), ``bailee-xor`` (Sec. 5.2), ``bailee-higher-order`` (Sec. 6.1),
``bailee-landscape`` (Sec. 4) and ``bailee-generalization`` (Sec. 5.1).
"""

from lazylab.experiments.bailee.coupling import Coupling
from lazylab.experiments.bailee.expressivity import Expressivity
from lazylab.experiments.bailee.generalization import Generalization
from lazylab.experiments.bailee.higher_order import HigherOrder
from lazylab.experiments.bailee.landscape import Landscape
from lazylab.experiments.bailee.xor import Xor

__all__ = ["Coupling", "Expressivity", "Generalization", "HigherOrder", "Landscape", "Xor"]

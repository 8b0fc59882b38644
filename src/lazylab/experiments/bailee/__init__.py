"""Bai & Lee (2020), "Beyond Linearization": the six experiments of spec Sec. 5 / 7.3.

Importing this package registers ``bailee-coupling`` (C4), ``bailee-expressivity`` (C12),
``bailee-xor`` (C14), ``bailee-higher-order`` (C15), ``bailee-landscape`` (C7-C10) and
``bailee-generalization`` (C13).
"""

from lazylab.experiments.bailee.coupling import Coupling
from lazylab.experiments.bailee.expressivity import Expressivity
from lazylab.experiments.bailee.generalization import Generalization
from lazylab.experiments.bailee.higher_order import HigherOrder
from lazylab.experiments.bailee.landscape import Landscape
from lazylab.experiments.bailee.xor import Xor

__all__ = ["Coupling", "Expressivity", "Generalization", "HigherOrder", "Landscape", "Xor"]

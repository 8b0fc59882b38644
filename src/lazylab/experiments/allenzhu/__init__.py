"""Allen-Zhu & Li (2019), "What Can ResNet Learn Efficiently, Going Beyond Kernels?".

Importing this package registers

* ``allenzhu-kernel-bound`` (Thms 2-3 and App. D, exact Walsh-Hadamard computation),
* ``allenzhu-performance`` (Fig. 2, Sec. 8.1: 3resnet / 3layer / 2layer vs kernels on T1),
* ``allenzhu-alpha`` (Fig. 3, Sec. 8.1: sensitivity to the base-signal weight beta),
* ``allenzhu-norm`` (Fig. 4, Sec. 8.2: hand-built vs SGD solutions of the six-parity).
"""

from lazylab.experiments.allenzhu.alpha import Alpha
from lazylab.experiments.allenzhu.kernel_bound import KernelBound
from lazylab.experiments.allenzhu.norm import Norm
from lazylab.experiments.allenzhu.performance import Performance

__all__ = ["Alpha", "KernelBound", "Norm", "Performance"]

"""Allen-Zhu & Li (2019), "What Can ResNet Learn Efficiently, Going Beyond Kernels?".

Importing this package registers

* ``allenzhu-kernel-bound`` (Thms 2-3, exact Walsh-Hadamard computation; spec C1-C4),
* ``allenzhu-performance`` (Fig. 2: 3resnet / 3layer / 2layer vs kernels on T1; C6),
* ``allenzhu-alpha`` (Fig. 3: sensitivity to the base-signal weight beta; C7),
* ``allenzhu-norm`` (Fig. 4: hand-built vs SGD solutions of the six-parity; C8-C9).
"""

from lazylab.experiments.allenzhu.alpha import Alpha
from lazylab.experiments.allenzhu.kernel_bound import KernelBound
from lazylab.experiments.allenzhu.norm import Norm
from lazylab.experiments.allenzhu.performance import Performance

__all__ = ["Alpha", "KernelBound", "Norm", "Performance"]

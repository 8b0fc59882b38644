"""Allen-Zhu & Li (2019), "What Can ResNet Learn Efficiently, Going Beyond Kernels?".

Importing this package registers ``allenzhu-kernel-bound`` (Thms 2-3, exact; spec C1-C4).
"""

from lazylab.experiments.allenzhu.alpha import Alpha
from lazylab.experiments.allenzhu.kernel_bound import KernelBound
from lazylab.experiments.allenzhu.norm import Norm
from lazylab.experiments.allenzhu.performance import Performance

__all__ = ["Alpha", "KernelBound", "Norm", "Performance"]

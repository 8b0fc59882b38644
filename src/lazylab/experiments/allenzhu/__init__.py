"""Allen-Zhu & Li (2019), "What Can ResNet Learn Efficiently, Going Beyond Kernels?".

Importing this package registers

* ``allenzhu-kernel-bound`` (Thms 2-3 and App. D, exact Walsh-Hadamard computation),
* ``allenzhu-performance`` (Fig. 2, Sec. 8.1: 3resnet / 3layer / 2layer vs kernels on T1),
* ``allenzhu-alpha`` (Fig. 3, Sec. 8.1: sensitivity to the base-signal weight beta),
* ``allenzhu-norm`` (Fig. 4, Sec. 8.2: hand-built vs SGD solutions of the six-parity).
"""

from lazylab.experiments.allenzhu.alpha import Alpha, AlphaParams
from lazylab.experiments.allenzhu.common import make_learner
from lazylab.experiments.allenzhu.infinite import (
    INFINITE,
    infinite_ntk,
    mlp3_layers,
    mlp3_ntk,
    resnet3_kernels,
    resnet3_ntk,
)
from lazylab.experiments.allenzhu.kernel_bound import KernelBound, KernelBoundParams
from lazylab.experiments.allenzhu.norm import Norm, NormParams, hand_built
from lazylab.experiments.allenzhu.performance import Performance, T1Params

__all__ = [
    "KernelBound", "KernelBoundParams",  # allenzhu-kernel-bound (Thms 2-3, App. D)
    "Performance", "T1Params",  # allenzhu-performance (Fig. 2, Sec. 8.1)
    "Alpha", "AlphaParams",  # allenzhu-alpha (Fig. 3, Sec. 8.1)
    "Norm", "NormParams", "hand_built",  # allenzhu-norm (Fig. 4, Sec. 8.2)
    # the Sec. 8.1 learners (3resnet, 3layer, 2layer) and their infinite-width NTKs
    "make_learner", "INFINITE", "infinite_ntk", "mlp3_layers", "mlp3_ntk", "resnet3_kernels",
    "resnet3_ntk",
]

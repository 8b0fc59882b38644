"""lazylab: wide networks in the lazy (NTK) regime and beyond.

Layers (imports go downward only): ``data`` -> nn math (``activations``, ``kernels``,
``models``) -> ``train`` / ``solve`` -> ``theory`` -> ``experiments`` -> ``runner``, ``store``,
``report``, ``cli``.

Importing lazylab before torch sets ``OMP_WAIT_POLICY=PASSIVE`` unless it is set already:
torch's OpenMP threads then sleep between parallel regions instead of spinning. lazylab's
small GEMMs (100 x 30) hand work to OpenMP thousands of times a second, and on a loaded
machine spinning threads steal the cores the busy ones need (bench/bench_threads.py measures
it). Set the variable yourself, before importing torch, to choose otherwise.
"""

import os as _os

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.2.0"

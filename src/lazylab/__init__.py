"""lazylab: wide networks in the lazy (NTK) regime and beyond.

Layers (imports go downward only): ``data`` -> nn math (``activations``, ``kernels``,
``models``) -> ``train`` / ``solve`` -> ``theory`` -> ``experiments`` -> ``runner``, ``store``,
``report``, ``cli``.
"""

__version__ = "0.1.0"

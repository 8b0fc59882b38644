"""Each paper's closed-form predictions (risks, bounds, spectra), one module per paper.

- :mod:`lazylab.theory.arora`: the Gram matrix H^inf and the bounds of Arora et al. (2019);
  :mod:`lazylab.theory.arora_width`: its finite-width spread.
- :mod:`lazylab.theory.ghorbani`: asymptotic risks of RF / NT / NN (Ghorbani et al. 2019).
- :mod:`lazylab.theory.ghorbani_population`: exact finite-d population risks for quadratic
  activations, the reference the asymptotics are checked against.
- :mod:`lazylab.theory.bailee`, :mod:`lazylab.theory.bailee_landscape`: Bai & Lee's (2020)
  coupling, expressivity and landscape predictions.
- :mod:`lazylab.theory.nichani`: the NTK spectrum on the sphere and ridge risks (Nichani et
  al. 2022).
- :mod:`lazylab.theory.allenzhu`: Allen-Zhu & Li's (2019) bounds and reference levels.

The public face is the per-paper modules (their functions share names across papers, e.g. the
risk of each model), reached as ``lazylab.theory.PAPER.function``.
"""

from lazylab.theory import (
    allenzhu,
    arora,
    arora_width,
    bailee,
    bailee_landscape,
    ghorbani,
    ghorbani_population,
    nichani,
)

__all__ = ["allenzhu", "arora", "arora_width", "bailee", "bailee_landscape", "ghorbani",
           "ghorbani_population", "nichani"]

"""Each paper's closed-form predictions (risks, bounds, spectra), one module per paper.

- :mod:`lazylab.theory.ghorbani`: asymptotic risks of RF / NT / NN (Ghorbani et al. 2019).
- :mod:`lazylab.theory.ghorbani_population`: exact finite-d population risks for quadratic
  activations, the reference the asymptotics are checked against.
"""

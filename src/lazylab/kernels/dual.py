"""Closed-form duals of polynomial, erf and sine activations (defined in
:mod:`lazylab.duals.dual`)."""

from lazylab.duals.dual import erf_dual, gaussian_moment, poly_derivative, poly_dual, sin_dual

__all__ = ["gaussian_moment", "poly_dual", "erf_dual", "sin_dual", "poly_derivative"]

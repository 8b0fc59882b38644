"""Input checks and Gram statistics of the kernels (defined in :mod:`lazylab.duals._inputs`)."""

from lazylab.duals._inputs import GramStats, check_choice, check_pair, gram_stats, safe_reciprocal

__all__ = ["GramStats", "check_pair", "gram_stats", "check_choice", "safe_reciprocal"]

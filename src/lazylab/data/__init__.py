"""Data layer (the lowest layer: imports nothing else from lazylab but ``seeding``).

* :mod:`~lazylab.data.samplers`: inputs (Gaussian, sphere, hypercube, anisotropic sphere,
  projection law tau_d, Allen-Zhu & Li's hard-instance inputs).
* :mod:`~lazylab.data.targets`: target functions (ridge polynomials, Hermite and Gegenbauer
  terms, parities, quadratic forms, teacher networks, sums) and
  :mod:`~lazylab.data.paper_targets`: the papers' concrete targets.
* :mod:`~lazylab.data.harmonics`: Hermite and Gegenbauer polynomials, harmonic dimensions.
* :mod:`~lazylab.data.labels`: random labels, Arora et al.'s label corruption, label noise.
* :mod:`~lazylab.data.real`: digits, Fashion-MNIST, MNIST, CIFAR-10 from local files.
* :mod:`~lazylab.data.quadratic`, :mod:`~lazylab.data.mixture`: Ghorbani et al.'s data models.
"""

from lazylab.data.harmonics import dim_poly_leq, gegenbauer_q, hermite_e, num_harmonics
from lazylab.data.labels import corrupt_labels, flip_labels, random_labels, sign_labels
from lazylab.data.mixture import GaussianMixture, diag_delta, mmse_asymptotic
from lazylab.data.paper_targets import (
    DenseHarmonic,
    HardInstance,
    HierarchicalParity,
    allenzhu_parity6,
    arora_example,
    dense_quadratic,
    low_degree_plus_sparse,
    nichani_fig1_target,
    nichani_fig2_target,
    random_sparse,
    xor2,
)
from lazylab.data.quadratic import QuadraticTarget, exponential_B
from lazylab.data.real import DATASETS, DatasetNotFound, find_dataset, load_dataset
from lazylab.data.samplers import (
    anisotropic_sphere,
    gaussian,
    hard_instance_inputs,
    hypercube,
    projection_law,
    rademacher,
    sphere,
)
from lazylab.data.targets import (
    Gegenbauer,
    Hermite,
    Parity,
    Polynomial,
    QuadraticForm,
    Ridge,
    Scaled,
    Sum,
    Target,
    TeacherNet,
    random_teacher,
    random_unit_vector,
)

__all__ = [
    # inputs (samplers)
    "anisotropic_sphere", "gaussian", "hard_instance_inputs", "hypercube", "projection_law",
    "rademacher", "sphere",
    # target functions (targets)
    "Gegenbauer", "Hermite", "Parity", "Polynomial", "QuadraticForm", "Ridge", "Scaled", "Sum",
    "Target", "TeacherNet", "random_teacher", "random_unit_vector",
    # the papers' concrete targets (paper_targets)
    "DenseHarmonic", "HardInstance", "HierarchicalParity", "allenzhu_parity6", "arora_example",
    "dense_quadratic", "low_degree_plus_sparse", "nichani_fig1_target", "nichani_fig2_target",
    "random_sparse", "xor2",
    # Hermite and Gegenbauer polynomials, harmonic dimensions (harmonics)
    "dim_poly_leq", "gegenbauer_q", "hermite_e", "num_harmonics",
    # labels (labels)
    "corrupt_labels", "flip_labels", "random_labels", "sign_labels",
    # real data sets from local files (real)
    "DATASETS", "DatasetNotFound", "find_dataset", "load_dataset",
    # Ghorbani et al.'s data models (quadratic, mixture)
    "QuadraticTarget", "exponential_B", "GaussianMixture", "diag_delta", "mmse_asymptotic",
]

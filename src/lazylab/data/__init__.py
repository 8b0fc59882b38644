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
    "GaussianMixture",
    "QuadraticTarget",
    "diag_delta",
    "exponential_B",
    "mmse_asymptotic",
    "DATASETS",
    "DatasetNotFound",
    "DenseHarmonic",
    "Gegenbauer",
    "HardInstance",
    "Hermite",
    "HierarchicalParity",
    "Parity",
    "Polynomial",
    "QuadraticForm",
    "Ridge",
    "Scaled",
    "Sum",
    "Target",
    "TeacherNet",
    "allenzhu_parity6",
    "anisotropic_sphere",
    "arora_example",
    "corrupt_labels",
    "dense_quadratic",
    "dim_poly_leq",
    "find_dataset",
    "flip_labels",
    "gaussian",
    "gegenbauer_q",
    "hard_instance_inputs",
    "hermite_e",
    "hypercube",
    "load_dataset",
    "low_degree_plus_sparse",
    "nichani_fig1_target",
    "nichani_fig2_target",
    "num_harmonics",
    "projection_law",
    "rademacher",
    "random_labels",
    "random_sparse",
    "random_teacher",
    "random_unit_vector",
    "sign_labels",
    "sphere",
    "xor2",
]

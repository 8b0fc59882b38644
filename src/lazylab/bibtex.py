"""BibTeX of the five papers lazylab reproduces, by paper key (shown by ``lazylab show`` and
on the documentation's paper pages; CITATION.cff lists the same references)."""

from __future__ import annotations

__all__ = ["BIBTEX", "bibtex"]

BIBTEX: dict[str, str] = {
    "arora": """@inproceedings{arora2019finegrained,
  title     = {Fine-Grained Analysis of Optimization and Generalization for
               Overparameterized Two-Layer Neural Networks},
  author    = {Arora, Sanjeev and Du, Simon S. and Hu, Wei and Li, Zhiyuan and Wang, Ruosong},
  booktitle = {Proceedings of the 36th International Conference on Machine Learning (ICML)},
  series    = {Proceedings of Machine Learning Research},
  volume    = {97},
  pages     = {322--332},
  year      = {2019}
}""",
    "ghorbani": """@inproceedings{ghorbani2019limitations,
  title     = {Limitations of Lazy Training of Two-layers Neural Networks},
  author    = {Ghorbani, Behrooz and Mei, Song and Misiakiewicz, Theodor and
               Montanari, Andrea},
  booktitle = {Advances in Neural Information Processing Systems 32 (NeurIPS)},
  year      = {2019}
}""",
    "bailee": """@inproceedings{bai2020beyond,
  title     = {Beyond Linearization: On Quadratic and Higher-Order Approximation of Wide
               Neural Networks},
  author    = {Bai, Yu and Lee, Jason D.},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2020}
}""",
    "nichani": """@inproceedings{nichani2022identifying,
  title     = {Identifying Good Directions to Escape the {NTK} Regime and Efficiently Learn
               Low-Degree Plus Sparse Polynomials},
  author    = {Nichani, Eshaan and Bai, Yu and Lee, Jason D.},
  booktitle = {Advances in Neural Information Processing Systems 35 (NeurIPS)},
  year      = {2022}
}""",
    "allenzhu": """@inproceedings{allenzhu2019resnet,
  title     = {What Can {ResNet} Learn Efficiently, Going Beyond Kernels?},
  author    = {Allen-Zhu, Zeyuan and Li, Yuanzhi},
  booktitle = {Advances in Neural Information Processing Systems 32 (NeurIPS)},
  year      = {2019}
}""",
}


def bibtex(paper: str) -> str | None:
    """The BibTeX entry of a paper key (None for a paper lazylab does not ship, e.g. a
    plugin's)."""
    return BIBTEX.get(paper)

"""Bai & Lee (ICLR 2020) specific training objectives: the randomized risk L-tilde and its exact
sign moments (:mod:`lazylab.train.bailee.randomized_risk`), and the landscape quantities of
Lemma 1 / Theorem 2 / Corollary 3 / Theorem 4 (:mod:`lazylab.train.bailee.landscape`)."""

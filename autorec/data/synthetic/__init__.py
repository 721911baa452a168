"""A Criteo-like generator whose labels come from a hidden teacher of chosen interaction order.

Because the true click probability ``p`` of every sample is known, a model's AUC can be compared
with the Bayes-optimal AUC (that of ``p`` itself) on the same split.

Sparse features. Table ``t`` has ``rows[t]`` ids. A lookup draws a popularity rank ``r`` from a
bounded power law ``P(r) ∝ (r + 1)^-alpha`` on ``[0, rows)`` by inverse CDF, and the id is
``perm_t(r)``, a keyed Feistel permutation of ``[0, rows)`` (by cycle-walking) computed on the fly:
hot ids exist but are spread over the whole range, no two ranks share an id, and no per-row table
is ever built (10^8 rows cost nothing). A sample holds ``1 + Poisson(pooling[t] - 1)``
lookups of table ``t`` (multi-hot and jagged when ``pooling[t] > 1``). Dense features are N(0, 1).

Teacher. Every id owns a hidden vector ``v_t(id) ∈ R^D`` and a scalar ``w_t(id)``, read from
16-bit lanes of ``mix64(id ^ salt(seed, t, k))``, uniform on ``[-√3, √3]`` (unit variance): a pure
function of ``(seed, table, id)``. A multi-hot feature pools them by mean, giving ``e_t`` and
``w_t``. Dense features ``x`` join as one more field ``e_0 = x P`` (``P`` [n_dense, D], N(0, 1/n_dense)
entries); so there are ``F = num_tables + (num_dense > 0)`` fields. The terms are

    z1 = (Σ_t w_t + u·x) / √F                                            first order
    z2 = Σ_{i<j} c_ij <e_i, e_j> / √(n_pairs · D)                        pairwise (FM / DLRM)
    z3 = Σ_r c_r <e_{i_r}, e_{j_r}> <a_r, e_{k_r}> / √(R · D)             "modulated" (default)
    z3 = Σ_r c_r Σ_d e_{i_r}[d] e_{j_r}[d] e_{k_r}[d] / √(R · D)          "diagonal"

over R random field triples, with ``c ~ N(0, 1)``, ``u ~ N(0, 1/n_dense)`` and ``a_r ~ N(0, 1/D)``.
Both order-3 forms are trilinear in three distinct fields. "modulated" is an affinity of two
fields scaled by a direction of a third (say user x item, modulated by context): the shape of
interaction that stacked factorization machines and cross networks build from pairwise dot
products. "diagonal" is the ANOVA kernel of higher-order factorization machines; it needs
per-coordinate products, which cross networks form but dot-product stacks (Wukong) can only
approximate. The teacher of order ``k`` uses ``z1..zk``;
each term is standardised on the generated samples and mixed with variance shares (order 2:
``1 - s, s``; order 3: ``(1 - s)/2, (1 - s)/2, s`` with ``s = interaction_share``), so

    logit = b + Σ_k √share_k · (z_k - mean_k) / std_k / temperature,    p = sigmoid(logit),

where the bias ``b`` is found by bisection so that ``mean(p) = base_ctr``, and ``y ~ Bernoulli(p)``.
Order-3 terms are products of three distinct fields, which no sum of pairwise dot products
represents; stacked interaction layers (Wukong, DHEN, DCNv2) can.

Planted per-table importance: ``table_weight[t]`` scales ``v_t`` and ``w_t`` (0 makes table ``t``
pure noise, and its pairs and triples vanish with it), and ``table_rank[t] = r`` keeps only the
first ``r`` coordinates of ``v_t`` (times ``√(D / r)``), so the table needs an embedding of about
``r`` dims. The ``scale`` preset plants both on Criteo Kaggle's cardinalities.

The parts: :mod:`~autorec.data.synthetic.config` (the options and presets),
:mod:`~autorec.data.synthetic.sampling` (ids and hidden vectors as pure functions of the seed),
:mod:`~autorec.data.synthetic.teacher` (the score terms and their readout to logits) and
:mod:`~autorec.data.synthetic.dataset` (generation, splits, the Bayes-optimal AUC).
"""

from autorec.data.synthetic.config import ORDER3_FORMS, PRESETS, SyntheticConfig
from autorec.data.synthetic.dataset import SyntheticDataset, generate, load_synthetic
from autorec.data.synthetic.sampling import power_law_ranks, table_groups
from autorec.data.synthetic.teacher import Readout, Teacher

__all__ = ["ORDER3_FORMS", "PRESETS", "Readout", "SyntheticConfig", "SyntheticDataset", "Teacher",
           "generate", "load_synthetic", "power_law_ranks", "table_groups"]

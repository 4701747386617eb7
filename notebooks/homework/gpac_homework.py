# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (gpac)
#     language: python
#     name: python3
# ---

# %% [raw]
# # ASSIGNMENT CONFIG
# name: gpac_homework
# requirements: null
# solutions_pdf: false
# export_cell: false
# check_all_cell: false
# init_cell: true
# generate:
#   pdf: false
#   zips: false
# run_tests: true

# %% [markdown]
# # Homework — PAC, G-PAC and what the guarantees say
#
# The homework of the three sessions (docs/teaching.md) whose answer is a number, an array or a
# function: each question names the exercise of the lesson it grades, where its full text,
# the derivation and the worked solution are. Write your answers in the cells marked `...`,
# using numpy and scipy only; keep the names the cells define. Run every cell, then `grader.check("q1")`
# (and so on) checks the form of an answer; the value is graded by the autograder. Submit the
# notebook (`.ipynb`).
#
# | Question | Session | Lesson exercise | Points |
# |---|---|---|---|
# | 1 | 1 | `ex-quickstart-resampled-width` (notebook 00) | 2 |
# | 2 | 2 | `ex-partition-gap-counterexample` (notebook 11) | 3 |
# | 3 | 2 | `ex-audit-kappa-range` (notebook 13) | 2 |
# | 4 | 2 | `ex-gap-zero-violations` (notebook 21) | 2 |
# | 5 | 3 | `ex-realdata-small-subject` (notebook 31) | 1 |

# %%
import numpy as np
from scipy import stats

# %% [raw]
# # BEGIN QUESTION
# name: q1
# points: [0, 1, 1]

# %% [markdown]
# **Question 1 — the width of the paper's resampled bound** (`ex-quickstart-resampled-width`).
# One group has $n = 400$ calibration items with empirical risk $\hat R = 0.04$ at a candidate
# threshold. The paper's recipe draws $m = n/\pi$ items with replacement and labels each draw
# with probability $\pi = 0.5$; its CLT bound at level $\alpha = 0.05$ has the half-width
# $z_{1-\alpha}\sqrt{\mathrm{Var}(Z)/m}$, with the variance of one term $Z$ given the calibration set.
# Compute `half_width_resampled` (that half-width, from the variance you derive) and
# `half_width_full` (the half-width $z_{1-\alpha}\sqrt{\hat R(1-\hat R)/n}$ of a CLT bound on the
# $n$ labelled items themselves).

# %% [raw]
# # BEGIN SOLUTION

# %%
n_items, r_hat, label_prob, alpha = 400, 0.04, 0.5, 0.05
z = stats.norm.ppf(1 - alpha)
half_width_resampled = z * np.sqrt(r_hat * (1 - label_prob * r_hat) / n_items)  # SOLUTION
half_width_full = z * np.sqrt(r_hat * (1 - r_hat) / n_items)  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
assert np.ndim(half_width_resampled) == 0 and np.ndim(half_width_full) == 0 and 0 < half_width_full < 0.1

# %%
# HIDDEN
assert abs(half_width_resampled - 1.6448536 * np.sqrt(0.04 * 0.98 / 400)) < 1e-5

# %%
# HIDDEN
assert abs(half_width_full - 1.6448536 * np.sqrt(0.04 * 0.96 / 400)) < 1e-5

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q2
# points: [0, 1, 1, 1]

# %% [markdown]
# **Question 2 — a counterexample to the efficiency bound of Theorem 4.6**
# (`ex-partition-gap-counterexample`). Binary losses with $P(\ell = 1) = q = 1/2$, scores
# $U \sim \mathrm{Uniform}(0, 0.1)$ for the lossy inputs and $U \sim \mathrm{Uniform}(0.1, 1)$ for the
# others, $\varepsilon = 0.1$, $k = 2$ groups. Compute the lossy mass `a` that the oracle group $G_1^*$
# holds beside all loss-free inputs, the routed share `eff_oracle` of the oracle partition, and the
# routed share `eff_learned` of the partition that moves a lossy mass $\delta = 0.01$ from $G_2^*$ to
# $G_1^*$ (each group routes everything if its risk is at most ε, else only the share ε of its mass).

# %% [raw]
# # BEGIN SOLUTION

# %%
q, eps, delta = 0.5, 0.1, 0.01
a = eps * (1 - q) / (1 - eps)  # SOLUTION
eff_oracle = (1 - q) + eps  # SOLUTION
eff_learned = eps  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
assert all(np.ndim(x) == 0 and 0 <= x <= 1 for x in (a, eff_oracle, eff_learned))

# %%
# HIDDEN
assert abs(a - 0.05 / 0.9) < 1e-6

# %%
# HIDDEN
assert abs(eff_oracle - 0.6) < 1e-6

# %%
# HIDDEN
assert abs(eff_learned - 0.1) < 1e-6

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q3
# points: [0, 1, 1]

# %% [markdown]
# **Question 3 — how far the resampled CLT bound misses** (`ex-audit-kappa-range`). Write
# `kappa(risk, label_prob)`, the variance ratio $\kappa$ of notebook 13 (the miss rate to first order
# is $\Phi(-z_{1-\alpha}/\sqrt\kappa)$), for numpy arrays of risks $R \in (0, 1)$ and labelling
# probabilities $\pi \in (0, 1]$, and compute `miss_upper`, the largest first-order miss rate over
# all $(R, \pi)$ at $\alpha = 0.05$.

# %% [raw]
# # BEGIN SOLUTION


# %%
def kappa(risk, label_prob):
    """The variance ratio of the resampled CLT bound (notebook 13)."""
    risk, label_prob = np.asarray(risk, dtype=float), np.asarray(label_prob, dtype=float)
    return 1 + (1 - risk) / (1 - label_prob * risk)  # SOLUTION


miss_upper = stats.norm.cdf(-stats.norm.ppf(1 - 0.05) / np.sqrt(2))  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
assert np.shape(kappa(np.full((3, 2), 0.1), np.full((3, 2), 0.5))) == (3, 2)

# %%
# HIDDEN
grid_r, grid_p = np.meshgrid(np.linspace(0.01, 0.99, 25), np.linspace(0.01, 1.0, 25))
assert np.allclose(kappa(grid_r, grid_p), 1 + (1 - grid_r) / (1 - grid_p * grid_r))

# %%
# HIDDEN
assert abs(miss_upper - 0.1224) < 5e-4

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q4
# points: [0, 1, 1]

# %% [markdown]
# **Question 4 — $\mathrm{Error}_{\rm Gap} = 0$ is not a guarantee** (`ex-gap-zero-violations`).
# Construct `risks`, one group's risk in each of $T = 100$ trials, whose mean is at most
# $\varepsilon = 0.05$ (so $\mathrm{Error}_{\rm Gap} = 0$) while as many trials as possible have a
# risk above ε, and give that largest possible violation rate as `max_violation_rate`.

# %% [raw]
# # BEGIN SOLUTION

# %%
n_trials, eps_gap = 100, 0.05
risks = np.array([eps_gap + eps_gap / (2 * (n_trials - 1))] * (n_trials - 1) + [0.0])  # SOLUTION
max_violation_rate = (n_trials - 1) / n_trials  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
assert np.shape(risks) == (100,) and np.all(np.asarray(risks) >= 0)

# %%
# HIDDEN
assert np.mean(risks) <= 0.05 + 1e-12 and np.mean(np.asarray(risks) > 0.05) == 0.99

# %%
# HIDDEN
assert abs(max_violation_rate - 0.99) < 1e-9

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q5
# points: [0, 1]

# %% [markdown]
# **Question 5 — the smallest group that can certify** (`ex-realdata-small-subject`). Under the
# valid recipe of notebook 31 (Bernoulli labelling at $\pi = 0.5$, the Hoeffding–Bentkus bound,
# $\varepsilon = 0.1$, $\alpha = 0.05$), a group with no loss at all has the bound
# $(1/\pi)(1-\alpha^{1/n})$. Compute `n_min`, the smallest number of calibration items with which a
# group can certify any threshold (an integer).

# %% [raw]
# # BEGIN SOLUTION

# %%
n_min = int(np.ceil(np.log(0.05) / np.log(1 - 0.5 * 0.1)))  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
assert isinstance(n_min, int | np.integer) and n_min > 0

# %%
# HIDDEN
assert int(n_min) == n_min == 59

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

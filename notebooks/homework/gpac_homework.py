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
# tests:
#   ok_format: false

# %% [markdown]
# # Homework — PAC, G-PAC and what the guarantees say
#
# The homework of the course's three sessions whose answer is a number, an array or a
# function: each question names the exercise of the lesson it practises, with numbers of its own: the
# lesson's derivation carries over, its printed values do not. Write your answers in the cells marked `...`,
# using numpy and scipy only; keep the names the cells define. Run every cell, then `grader.check("q1")`
# (and so on): these public checks test the form and necessary conditions (a sign, a range) and say what to
# look at again; the autograder grades the values after you submit. So a passed check ("q1 passed!", in plain
# text "All test cases passed!") means *no typical mistake found*, not *the value is right*. Submit the
# notebook (`.ipynb`).
#
# | Question | Session | Lesson exercise | Points |
# |---|---|---|---|
# | 1 | 1 | Exercise 3 in notebook `00_quickstart` | 2 |
# | 2 | 2 | Exercise 2 in notebook `11_partition_gap` | 3 |
# | 3 | 2 | Exercise 2 in notebook `13_validity_audit` | 2 |
# | 4 | 2 | Exercise 1 in notebook `21_table_known_groups` | 2 |
# | 5 | 3 | Exercise 3 in notebook `31_realdata_case_study` | 1 |

# %%
import numpy as np
from scipy import stats

# %% [raw]
# # BEGIN QUESTION
# name: q1
# points: [0, 0, 1, 1]
# # exercise: ex-quickstart-resampled-width  (the lesson exercise's label, for maintainers: otter drops this cell)

# %% [markdown]
# **Question 1 — the width of the paper's resampled bound** (Exercise 3 in notebook `00_quickstart`).
# One group has $n = 500$ calibration items, with the 0-1 loss, and empirical risk $\hat R = 0.06$ at
# a candidate threshold. The paper's recipe draws $m = n/\pi$ items with replacement and labels each draw
# with probability $\pi = 0.4$; its CLT bound at level $\alpha = 0.05$ has the half-width
# $z_{1-\alpha}\sqrt{\mathrm{Var}(Z)/m}$, with the variance of one term $Z$ given the calibration set.
# Compute `half_width_resampled` (that half-width, from the variance you derive) and
# `half_width_full` (the half-width $z_{1-\alpha}\sqrt{\hat R(1-\hat R)/n}$ of a CLT bound on the
# $n$ labelled items themselves).

# %% [raw]
# # BEGIN SOLUTION

# %%
n_items, r_hat, label_prob, alpha = 500, 0.06, 0.4, 0.05
z = stats.norm.ppf(1 - alpha)
half_width_resampled = z * np.sqrt(r_hat * (1 - label_prob * r_hat) / n_items)  # SOLUTION
half_width_full = z * np.sqrt(r_hat * (1 - r_hat) / n_items)  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
failure_message: 'each half-width is one positive number below 0.1 (a float, not an array)'
"""  # END TEST CONFIG


def test_q1_form(half_width_resampled, half_width_full):
    import numpy as np

    assert all(np.ndim(x) == 0 and 0 < x < 0.1 for x in (half_width_resampled, half_width_full))


# %%
""" # BEGIN TEST CONFIG
failure_message: 'the resampled bound must be wider than the full-label one - labelling only a share pi of the draws adds variance; derive Var(Z) for Z = loss * xi / pi with xi ~ Bernoulli(pi)'
"""  # END TEST CONFIG


def test_q1_resampled_is_wider(half_width_resampled, half_width_full):
    import numpy as np

    try:  # gated on the form check: while it fails, this check fails too, saying it waits (never a green tick)
        formed = all(np.ndim(x) == 0 and 0 < x < 0.1 for x in (half_width_resampled, half_width_full))
    except Exception:
        formed = False
    assert formed, "waits for q1 - 1 (the form check): answer in the form it asks first"
    assert half_width_resampled > half_width_full * (1 + 1e-9)


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'half_width_resampled - Var(Z) given the calibration set is E[Z^2] minus the squared mean, with E[Z^2] = R/pi; then divide by m = n/pi draws, not by n'
"""  # END TEST CONFIG


def test_q1_resampled_value(half_width_resampled):
    import numpy as np
    from scipy import stats

    expected = stats.norm.ppf(0.95) * np.sqrt(0.06 * (1 - 0.4 * 0.06) / 500)
    assert abs(half_width_resampled - expected) < 1e-5


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'half_width_full - use the question''s formula with the one-sided normal quantile z at 1 - alpha'
"""  # END TEST CONFIG


def test_q1_full_value(half_width_full):
    import numpy as np
    from scipy import stats

    expected = stats.norm.ppf(0.95) * np.sqrt(0.06 * 0.94 / 500)
    assert abs(half_width_full - expected) < 1e-5


# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q2
# points: [0, 0, 1, 1, 1]
# # exercise: ex-partition-gap-counterexample  (the lesson exercise's label, for maintainers: otter drops this cell)

# %% [markdown]
# **Question 2 — a counterexample to the efficiency bound of Theorem 4.6**
# (Exercise 2 in notebook `11_partition_gap`). Binary losses with $P(\ell = 1) = q = 0.4$, scores
# $U \sim \mathrm{Uniform}(0, 0.1)$ for the lossy inputs and $U \sim \mathrm{Uniform}(0.1, 1)$ for the
# others, $\varepsilon = 0.2$, $k = 2$ groups. Compute the lossy mass `a` that the oracle group $G_1^*$
# holds beside all loss-free inputs, the routed share `eff_oracle` of the oracle partition, and the
# routed share `eff_learned` of the partition that moves a lossy mass $\delta = 0.02$ from $G_2^*$ to
# $G_1^*$ (each group routes everything if its risk is at most ε, else only the share ε of its mass).

# %% [raw]
# # BEGIN SOLUTION

# %%
q, eps, delta = 0.4, 0.2, 0.02
a = eps * (1 - q) / (1 - eps)  # SOLUTION
eff_oracle = (1 - q) + eps  # SOLUTION
eff_learned = eps  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
failure_message: 'a, eff_oracle and eff_learned are each one number between 0 and 1 (masses and shares)'
"""  # END TEST CONFIG


def test_q2_form(a, eff_oracle, eff_learned):
    import numpy as np

    assert all(np.ndim(x) == 0 and 0 <= x <= 1 for x in (a, eff_oracle, eff_learned))


# %%
""" # BEGIN TEST CONFIG
failure_message: 'no partition routes more than the oracle partition, and G1* cannot hold more lossy mass than there is (q)'
"""  # END TEST CONFIG


def test_q2_order(a, eff_oracle, eff_learned):
    import numpy as np

    try:  # gated on the form check: while it fails, this check fails too, saying it waits (never a green tick)
        formed = all(np.ndim(x) == 0 and 0 <= x <= 1 for x in (a, eff_oracle, eff_learned))
    except Exception:
        formed = False
    assert formed, "waits for q2 - 1 (the form check): answer in the form it asks first"
    assert eff_learned <= eff_oracle and 0 < a < 0.4


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'a - choose it so that the risk of G1* (its lossy mass over its whole mass) is exactly eps'
"""  # END TEST CONFIG


def test_q2_a(a):

    expected = 0.2 * 0.6 / 0.8
    assert abs(a - expected) < 1e-6


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'eff_oracle - G1* routes all of its mass; G2* is above eps, so it routes only the share eps of its mass'
"""  # END TEST CONFIG


def test_q2_oracle(eff_oracle):

    expected = 0.6 + 0.2
    assert abs(eff_oracle - expected) < 1e-6


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'eff_learned - after the move, is G1''s risk still at most eps? If not, it routes only the share eps of its mass'
"""  # END TEST CONFIG


def test_q2_learned(eff_learned):

    expected = 0.2
    assert abs(eff_learned - expected) < 1e-6


# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q3
# points: [0, 0, 1, 1]
# # exercise: ex-audit-kappa-range  (the lesson exercise's label, for maintainers: otter drops this cell)

# %% [markdown]
# **Question 3 — how far the resampled CLT bound misses** (Exercise 2 in notebook `13_validity_audit`). Write
# `kappa(risk, label_prob)`, the variance ratio $\kappa$ of notebook 13 (the miss rate to first order
# is $\Phi(-z_{1-\alpha}/\sqrt\kappa)$), for numpy arrays of risks $R \in (0, 1)$ and labelling
# probabilities $\pi \in (0, 1]$, and compute `miss_upper`, the largest first-order miss rate over
# all $(R, \pi)$ at $\alpha = 0.10$.

# %% [raw]
# # BEGIN SOLUTION


# %%
def kappa(risk, label_prob):
    """The variance ratio of the resampled CLT bound (notebook 13)."""
    risk, label_prob = np.asarray(risk, dtype=float), np.asarray(label_prob, dtype=float)
    return 1 + (1 - risk) / (1 - label_prob * risk)  # SOLUTION


miss_upper = stats.norm.cdf(-stats.norm.ppf(1 - 0.10) / np.sqrt(2))  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
failure_message: 'kappa takes arrays and returns an array of their shape (use numpy operations, not math or a loop over scalars)'
"""  # END TEST CONFIG


def test_q3_form(kappa):
    import numpy as np

    assert np.shape(kappa(np.full((3, 2), 0.1), np.full((3, 2), 0.5))) == (3, 2)


# %%
""" # BEGIN TEST CONFIG
failure_message: 'miss_upper is one rate, a fraction (not a percent), above alpha and below 0.5 - a miss rate of alpha (or below) is what a valid bound has; the resampled bound''s variance ratio exceeds 1, so it misses more often'
"""  # END TEST CONFIG


def test_q3_misses_more_than_alpha(miss_upper, kappa):
    import numpy as np

    try:  # gated on the form check: while it fails, this check fails too, saying it waits (never a green tick)
        formed = np.shape(kappa(np.full((3, 2), 0.1), np.full((3, 2), 0.5))) == (3, 2)
    except Exception:
        formed = False
    assert formed, "waits for q3 - 1 (the form check): answer in the form it asks first"
    assert np.ndim(miss_upper) == 0 and 0.10 + 1e-6 < miss_upper < 0.5


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'kappa - by the law of total variance, the resampled term''s variance is the sampling variance plus the labelling variance; kappa is their sum over the variance the CLT bound uses'
"""  # END TEST CONFIG


def test_q3_kappa(kappa):
    import numpy as np

    grid_r, grid_p = np.meshgrid(np.linspace(0.01, 0.99, 25), np.linspace(0.01, 1.0, 25))
    expected = 1 + (1 - grid_r) / (1 - grid_p * grid_r)
    assert np.allclose(kappa(grid_r, grid_p), expected)


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'miss_upper - find the maximum of kappa over R in (0, 1) and pi in (0, 1], reached at pi = 1, then put it into the first-order miss rate'
"""  # END TEST CONFIG


def test_q3_miss_upper(miss_upper):
    import numpy as np
    from scipy import stats

    expected = stats.norm.cdf(-stats.norm.ppf(0.90) / np.sqrt(2))
    assert abs(miss_upper - expected) < 5e-4


# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q4
# points: [0, 0, 0, 1, 1]
# # exercise: ex-gap-zero-violations  (the lesson exercise's label, for maintainers: otter drops this cell)

# %% [markdown]
# **Question 4 — $\mathrm{Error}_{\rm Gap} = 0$ is not a guarantee** (Exercise 1 in notebook `21_table_known_groups`).
# Construct `risks`, one group's risk in each of $T = 40$ trials, whose mean is at most
# $\varepsilon = 0.08$ (so $\mathrm{Error}_{\rm Gap} = 0$) while as many trials as possible have a
# risk above ε, and give that largest possible violation rate as `max_violation_rate`.

# %% [raw]
# # BEGIN SOLUTION

# %%
n_trials, eps_gap = 40, 0.08
risks = np.array([eps_gap + eps_gap / (2 * (n_trials - 1))] * (n_trials - 1) + [0.0])  # SOLUTION
max_violation_rate = (n_trials - 1) / n_trials  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
failure_message: 'risks holds one risk (at least 0) for each of the 40 trials'
"""  # END TEST CONFIG


def test_q4_form(risks):
    import numpy as np

    assert np.shape(risks) == (40,) and np.all(np.asarray(risks) >= 0)


# %%
""" # BEGIN TEST CONFIG
failure_message: 'the mean of your risks must be at most eps, so that Error_Gap = max(0, mean - eps) is 0'
"""  # END TEST CONFIG


def test_q4_gap_is_zero(risks):
    import numpy as np

    try:  # gated on the form check: while it fails, this check fails too, saying it waits (never a green tick)
        formed = np.shape(risks) == (40,) and bool(np.all(np.asarray(risks) >= 0))
    except Exception:
        formed = False
    assert formed, "waits for q4 - 1 (the form check): answer in the form it asks first"
    assert np.mean(risks) <= 0.08 + 1e-12


# %%
""" # BEGIN TEST CONFIG
failure_message: 'max_violation_rate must be the share of trials above eps in your risks'
"""  # END TEST CONFIG


def test_q4_rate_is_reached(risks, max_violation_rate):
    import numpy as np

    try:  # gated on the form check: while it fails, this check fails too, saying it waits (never a green tick)
        formed = np.shape(risks) == (40,) and bool(np.all(np.asarray(risks) >= 0))
    except Exception:
        formed = False
    assert formed, "waits for q4 - 1 (the form check): answer in the form it asks first"
    assert np.ndim(max_violation_rate) == 0 and abs(np.mean(np.asarray(risks) > 0.08) - max_violation_rate) < 1e-9


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'risks - need a mean of at most eps and the largest share of trials above eps that this allows: a violating trial needs only a little more than eps; how few trials at 0 can pay for the excess of all the others?'
"""  # END TEST CONFIG


def test_q4_risks(risks):
    import numpy as np

    rate = np.mean(np.asarray(risks) > 0.08)
    expected = 0.975
    assert np.mean(risks) <= 0.08 + 1e-12 and rate == expected


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'max_violation_rate - can every trial but one be above eps while the mean stays at most eps?'
"""  # END TEST CONFIG


def test_q4_max_violation_rate(max_violation_rate):

    expected = 0.975
    assert abs(max_violation_rate - expected) < 1e-9


# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q5
# points: [0, 0, 1]
# # exercise: ex-realdata-small-subject  (the lesson exercise's label, for maintainers: otter drops this cell)

# %% [markdown]
# **Question 5 — the smallest group that can certify** (Exercise 3 in notebook `31_realdata_case_study`). Take the
# Hoeffding–Bentkus Bernoulli recipe of notebook 31 (`VALID_BERNOULLI`'s kind), but with other numbers:
# a labelling probability $\pi = 0.25$, $\varepsilon = 0.1$ and $\alpha = 0.1$. Derive the bound of a
# group with no loss at all, then compute `n_min`, the smallest number of calibration items with
# which a group can certify any threshold (an integer).

# %% [raw]
# # BEGIN SOLUTION

# %%
n_min = int(np.ceil(np.log(0.1) / np.log(1 - 0.25 * 0.1)))  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
failure_message: 'n_min is one positive integer (int or a numpy integer), not a float'
"""  # END TEST CONFIG


def test_q5_form(n_min):
    import numpy as np

    assert isinstance(n_min, int | np.integer) and n_min > 0


# %%
""" # BEGIN TEST CONFIG
failure_message: 'n_min must be large enough for a loss-free group of n_min items to certify (while q5 - 1 fails, this check waits for it); if yours is too small, recheck the range of the terms when labels are sampled at pi'
"""  # END TEST CONFIG


def test_q5_certifies(n_min):
    import numpy as np

    try:  # gated on the form check: while it fails, this check fails too, saying it waits (never a green tick)
        formed = isinstance(n_min, int | np.integer) and n_min > 0
    except Exception:
        formed = False
    assert formed, "waits for q5 - 1 (the form check): answer in the form it asks first"
    # A necessary condition only, not the bound the question asks for: n loss-free terms of range 1/pi certify at
    # most when (1 - pi eps)^n <= alpha, and (1 - pi eps)^(1/(pi eps)) = 0.975^40 ~ 0.36 > alpha = 0.1, so n > 1/(pi eps) = 40;
    # counting upwards until this passes does not give the answer (the hidden check does).
    assert n_min > 1 / (0.25 * 0.1)


# %%
""" # BEGIN TEST CONFIG
hidden: true
failure_message: 'n_min - not the smallest n whose loss-free bound is at most eps (too small if the bound at n_min is still above eps, too large if a smaller n reaches it): solve the bound = eps for n exactly (the Kullback-Leibler form, not the sub-Gaussian one) and take the smallest integer'
"""  # END TEST CONFIG


def test_q5_smallest(n_min):
    import numpy as np

    expected = int(np.ceil(np.log(0.1) / np.log(1 - 0.25 * 0.1)))
    assert int(n_min) == n_min == expected


# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

"""Theory on populations with known risk functions (paper Section 4, Appendices B–D).

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
populations        :class:`~.populations.RiskGroup`, :class:`~.populations.Population`, oracle
                   thresholds, the named populations of the notebooks
oracle             notebook 10: PAC-optimal routed shares, Proposition 3.3
partition_gap      notebook 11: the partition gap δ of interval partitions, their thresholds
                   and routed shares (Theorem 3.4)
finite_sample      notebook 12: Theorem 3.2
audit              notebook 13: the validity audit of every bound, scheme and rule
=================  ==========================================================================
"""

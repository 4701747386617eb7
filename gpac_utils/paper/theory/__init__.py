"""Theory on populations with known risk functions (paper Section 4, Appendices B–D).

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
populations        :class:`~.populations.RiskGroup`, :class:`~.populations.Population`, oracle
                   thresholds, the oracle routed shares of Proposition 3.3 (notebook 10), the
                   populations of notebooks 11-13
partition_gap      notebook 11: the partition gap δ of interval partitions, their thresholds
                   and routed shares (Theorem 3.4)
=================  ==========================================================================

Notebooks 10-13 take their remaining steps (the Prop. 3.3 scan, the summaries of the partition gap,
Theorem 3.2's experiment, the validity audit) in their own cells.
"""

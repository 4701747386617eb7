"""Theory on populations with known risk functions (paper Section 4, Appendices B–E).

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
populations        :class:`~.populations.RiskGroup`, :class:`~.populations.Population`, oracle
                   thresholds, the oracle routed shares of Proposition 4.5 (notebook 10), the
                   populations of notebooks 11-13
partition_gap      notebook 11: the partition gap δ of interval partitions, their thresholds
                   and routed shares (Theorem 4.6)
validity_audit     notebook 13: the audit of Assumption 4.1 (every bound, scheme and rule) and
                   its committed paper-profile table (``make validity-audit``)
=================  ==========================================================================

Notebooks 10-13 take their remaining steps (the Proposition 4.5 scan, the summaries of the partition gap,
Theorem 4.3's experiment, the audit's figures and checks) in their own cells.
"""

"""gpac_utils — group-conditional PAC reasoning (PAC, G-PAC, C-PAC).

Route each query to a cheap non-thinking LLM or an expensive thinking LLM so that the
extra error, measured within each group of inputs, stays below ``eps`` with
probability ``1 - alpha``.

Modules
-------
paths       repository-rooted paths (never relative to the working directory)
data        the per-item table schema: validation, reading, writing, column mapping
bounds      upper confidence bounds on R(u) = E[loss * 1{U <= u}], vectorised over thresholds
sampling    expert-label sampling schemes (paper ``resample``, valid ``bernoulli``, ``full``)
selection   threshold selection rules (``first-crossing``, ``max``)
calibrate   the PAC, GPAC and CPAC calibrators
cluster     1-D partitions of the score (exact k-means via ckmeans, quantile bins)
metrics     Error, per-group error, Error_Gap, STP, efficiency, violation rate
experiment  repeated calibration/test splits over methods x scores x bounds
"""

__version__ = "0.1.0"

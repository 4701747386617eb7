"""gpac_utils — group-conditional PAC reasoning (PAC, G-PAC, C-PAC).

Route each query to a cheap non-thinking LLM or an expensive thinking LLM so that the
extra error, measured within each group of inputs, stays below ``eps`` with
probability ``1 - alpha``.

The core (this package's top-level modules) imports nothing from its three sub-packages:

==================  ==========================================================================
core module         what it owns
==================  ==========================================================================
registry            the registry mechanism: a name maps to an entry that carries its properties
data                the per-item table schema: validation, one reader and writer by suffix
scores              registries of the score columns (role, STP cost form) and the generation roles
recipe              the calibration recipe (bound, sampling, label_prob, rule, candidates); named recipes
settings            the calibrator settings, declared once; the alpha corrections across groups
bounds              upper confidence bounds on R(u) = E[loss 1{U <= u}]; the registry of bounds
bound_references    each bound computed directly at one threshold: what the tests compare against
wsr                 the WSR climb: betting capital, predictable bets, the Newton climb to the bound
wsr_fast            the fast path of the wsr bound (bit for bit the plain climb of ``wsr.wsr_upper``)
sampling            expert-label sampling schemes (``full``, ``bernoulli``, the paper's ``resample``)
selection           candidate thresholds and selection rules (``first-crossing``, ``max``)
partition           learned partitions of the score axis (exact 1-D k-means, quantile bins)
calibrate           the PAC, GPAC and CPAC calibrators; their registry
risks               what is certified per group: the joint risk or the risk among routed items
feasibility         before calibration: the fewest items with which a group can certify anything
certificate         the thresholds file as a certificate: provenance, per-group status, review table
online              online G-PAC: per-group thresholds certified by betting on a stream; labelling modes
online_streams      online G-PAC, B-PAC and offline G-PAC over many seeded streams (the comparisons)
metrics             Error, per-group error, Error_Gap, STP, routed share, violation rates, ECE
experiment          repeated calibration/test splits over methods x scores x recipes
prediction          label planning: each group's routed share per number of labels, from a pilot
allocation          label planning: the exact DP allocation of a label budget across groups
checks              the validation layer: argument checks with one-line errors (ParameterError)
thresholds_schema   the thresholds file's declared, versioned schema (checked on every read)
cli                 ``gpac calibrate`` / ``route`` / ``plan`` / ``inspect``
==================  ==========================================================================

Sub-packages: :mod:`gpac_utils.paper` (the paper's tables, simulated stand-ins, theory),
:mod:`gpac_utils.llm` (generation, grading, scoring, benchmarks) and
:mod:`gpac_utils.workflow` (paths, per-notebook configuration, the notebook runner).

Examples
--------
>>> import numpy as np
>>> from gpac_utils import GPAC
>>> rng = np.random.default_rng(1)
>>> groups = np.repeat(["algebra", "geometry"], 1500)
>>> u = rng.uniform(size=3000)
>>> loss = (rng.uniform(size=3000) < 0.3 * u).astype(float)
>>> router = GPAC(eps=0.05).fit(u, loss, groups)
>>> router.route([0.05], ["algebra"]).tolist()
[True]
"""

import importlib
import importlib.util

#: Where each public name lives. Imported on first use (PEP 562): ``python -m gpac_utils.workflow``, the
#: notebook runner, reads only the workflow modules and so does not load the calibrators and scipy.stats
#: before every notebook (its imports: 1.5 s of CPU -> 0.6 s).
_HOMES = {
    # Settings through calibrate: it registers the calibrators whose declared settings Settings reads
    "calibrate": ("ALL", "CPAC", "GPAC", "PAC", "Calibrator", "GroupWarning", "Settings"),
    "group_threshold": ("threshold", "batch_threshold"),
    "certificate": ("Certificate", "from_json"),
    "data": ("SchemaError", "read_table", "validate", "write_table"),
    "experiment": ("ExperimentConfig", "run_experiment", "summarize"),
    "partition": ("Partition", "ScorePartitioner"),
    "recipe": ("PAPER", "RECIPES", "VALID", "VALID_BERNOULLI", "Recipe"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__version__ = "0.2.0"

__all__ = list(_HOME)


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)  # ``gpac_utils.bounds`` after ``import gpac_utils``
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

r"""Repeated calibration/test splits: the engine behind every paper table.

:func:`run_experiment` draws ``n_trials`` seeded random splits of a table at a calibration ratio,
fits every method × score × recipe (:class:`~gpac_utils.recipe.Recipe`) on the calibration
part and evaluates it on the test part, returning one tidy DataFrame (one row per trial ×
method × score × recipe × group, plus ``group == "__all__"`` for the whole test set). All its
settings come in one :class:`ExperimentConfig`.

Besides the test-set error (what the paper reports) each row carries ``pop_risk``: the risk of
the chosen threshold over the *whole table* in that group, as the certified risk's entry
evaluates it (:attr:`gpac_utils.risks.Risk.evaluate`: the joint risk ``mean(loss * routed)``, the
routed risk ``mean(loss | routed)``). Treating the table as the population, ``pop_risk > eps``
is a violation of the guarantee; :func:`summarize` reports the share of trials with a violation
in the worst group.

Evaluation groups are explicit (``ExperimentConfig.eval_groups``): the known ``group`` column,
or (``"learned"``) the groups learned by C-PAC in that trial, used for PAC too so that both are
judged on the same partition.

Trial ``t`` splits the table with :func:`trial_split` and seeds each calibrator with
:func:`calibrator_seed`; a notebook that redoes one trial by hand calls the same two functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from . import data
from . import multigroup as _multigroup  # noqa: F401 (registers the calibrators of a collection of groups)
from . import scores as _scores
from .calibrate import ALL, CALIBRATORS, method
from .checks import ParameterError, check_choice, check_int, check_range
from .metrics import error_gap, mcse
from .recipe import Recipe, as_recipe
from .risks import get_risk
from .settings import EPS, Settings, _refuse_renamed

__all__ = [
    "KEYS",
    "RECIPE_KEYS",
    "ExperimentConfig",
    "trial_split",
    "calibrator_seed",
    "run_experiment",
    "summarize",
    "group_violations",
    "default_stp_form",
]

#: The recipe's own fields (:class:`gpac_utils.recipe.Recipe`), in their order: a field added there is a key here.
RECIPE_KEYS = [f.name for f in dataclasses.fields(Recipe)]
#: The columns that identify one calibrated configuration in the results: method, score, the risk certified
#: (:data:`gpac_utils.risks.RISKS`) and the recipe's fields.
KEYS = ["method", "score", "risk", *RECIPE_KEYS]


def trial_split(n: int, cal_ratio: float, seed: int, trial: int) -> tuple[np.ndarray, np.ndarray]:
    """The calibration and test positions of one trial of :func:`run_experiment`.

    Parameters
    ----------
    n : int
        Number of items (rows of the table).
    cal_ratio : float
        Share of the items that calibrate (``round(cal_ratio * n)`` of them).
    seed : int
        The experiment's seed (:attr:`ExperimentConfig.seed`).
    trial : int
        The trial number, from 0.

    Returns
    -------
    calibration, test : numpy.ndarray of int
        Row positions, in the order of the trial's seeded permutation.

    Examples
    --------
    >>> cal, test = trial_split(10, 0.6, seed=0, trial=0)
    >>> len(cal), len(test), sorted(cal.tolist() + test.tolist()) == list(range(10))
    (6, 4, True)
    """
    perm = np.random.default_rng([seed, trial]).permutation(n)
    n_cal = int(round(cal_ratio * n))
    return perm[:n_cal], perm[n_cal:]


def calibrator_seed(seed: int, trial: int, score_index: int = 0, recipe_index: int = 0, method_index: int = 0) -> int:
    """The seed :func:`run_experiment` gives one calibrator of one trial.

    Parameters
    ----------
    seed, trial : int
        The experiment's seed and the trial number.
    score_index, recipe_index, method_index : int, default 0
        Positions of the score, recipe and method in :class:`ExperimentConfig`'s
        ``scores``, ``recipes`` and ``methods``.

    Returns
    -------
    int

    Examples
    --------
    >>> calibrator_seed(0, 0) == calibrator_seed(0, 0, 0, 0, 0) != calibrator_seed(0, 0, method_index=1)
    True
    """
    return int(np.random.SeedSequence([seed, trial, score_index, recipe_index, method_index]).generate_state(1)[0])


def default_stp_form(score: str) -> str:
    """The STP cost form of a score column (App. F): its :data:`gpac_utils.scores.SCORES` entry's.

    Parameters
    ----------
    score : str
        A score column name (``score_router``, ``score_logits``, ...).

    Returns
    -------
    str
        ``"router"`` or ``"cascade"`` (the ``form`` of :func:`gpac_utils.metrics.stp`); an
        unregistered column is costed as a cascade.
    """
    return _scores.SCORES[score].cost_form if score in _scores.SCORES else "cascade"


@_refuse_renamed
@dataclass(frozen=True, kw_only=True)
class ExperimentConfig(Settings):
    """Everything one run of repeated calibration/test splits needs: the calibrator
    :class:`~gpac_utils.settings.Settings` (``eps``, ``alpha``, ``recipe``, ``loss_bound``,
    ``min_group_size``, ``seed``, ``correction``, ``partitioner``, ``mode``, ``cluster_fraction``:
    declared there once) and the experiment's own fields below.

    ``seed`` seeds the splits and every calibration (:func:`calibrator_seed`); ``partitioner`` also
    learns the groups of ``eval_groups="learned"`` when no method learns its own.

    Parameters
    ----------
    methods : sequence of str, default ("PAC", "G-PAC")
        Calibrators to fit on every split (names of :data:`~gpac_utils.calibrate.CALIBRATORS`).
    recipes : sequence of Recipe, optional
        Calibration recipes; every method is fitted with each of them (default: ``(recipe,)``).
    scores : sequence of str, optional
        Score columns (default: every ``score_*`` column).
    n_trials : int, default 100
        Number of random splits.
    cal_ratio : float, default 0.6
        Share of the table used for calibration in each split.
    eval_groups : {"known", "learned"}, default "known"
        Groups the per-group rows are measured on: the table's ``group`` column, or the groups
        a group-learning method (C-PAC) learned in that trial (a partition fitted on the
        calibration scores when no method learns groups).
    """

    methods: tuple = ("PAC", "G-PAC")
    recipes: tuple | None = None
    scores: tuple | None = None
    n_trials: int = 100
    cal_ratio: float = 0.6
    eval_groups: str = "known"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "methods", tuple(method(m).name for m in self.methods))
        recipes = (self.recipe,) if self.recipes is None else self.recipes
        object.__setattr__(self, "recipes", tuple(as_recipe(r) for r in recipes))
        if self.scores is not None:
            object.__setattr__(self, "scores", tuple(self.scores))
        if not self.recipes:
            raise ParameterError("recipes: give at least one calibration recipe")
        check_int("n_trials", self.n_trials, 1)
        check_range("cal_ratio", self.cal_ratio)
        check_choice("eval_groups", self.eval_groups, ("known", "learned"))
        # a setting no method of ``methods`` reads would be ignored: refused, naming it (the settings each method
        # reads are its ``OPTIONS``; ``partitioner`` also learns ``eval_groups="learned"``)
        reads = {key for m in self.methods for key in CALIBRATORS[m].cls.OPTIONS}
        if self.eval_groups == "learned":
            reads.add("partitioner")
        if self.recipes != (self.recipe,):
            reads.discard("recipe")  # each recipe of ``recipes`` is used instead
        for name in self.ignored(reads)[:1]:
            raise ParameterError(
                f"{name}: none of the methods {list(self.methods)} reads it"
                + (" (recipes= replaces it)" if name == "recipe" else "")
                + f", got {getattr(self, name)!r}; leave it at its default or add a method that reads it"
            )


def run_experiment(table: pd.DataFrame, cfg: ExperimentConfig, *, progress: bool = False) -> pd.DataFrame:
    """Run ``cfg.n_trials`` random splits; see the module docstring for the output layout.

    Parameters
    ----------
    table : pandas.DataFrame
        A table in the data schema (:mod:`gpac_utils.data`).
    cfg : ExperimentConfig
        Methods, recipes, splits and seeds.
    progress : bool, default False
        Show a progress bar over trials.

    Returns
    -------
    pandas.DataFrame
        One row per trial x method x score x recipe x group (``group == "__all__"``: the whole
        test set), with ``error``, ``routed_share``, ``pop_risk``, ``threshold`` and ``stp``.
    """
    if not isinstance(table, pd.DataFrame):
        raise ParameterError(f"table: must be a pandas DataFrame in the data schema, got {type(table).__name__}")
    if not isinstance(cfg, ExperimentConfig):
        raise ParameterError(
            f"cfg: must be an ExperimentConfig (Settings and the experiment's fields), got {type(cfg).__name__}"
        )
    scores = list(cfg.scores) if cfg.scores is not None else data.score_columns(table)
    table = data.validate(table, loss_bound=cfg.loss_bound, score_cols=scores)
    by_known = [m for m in cfg.methods if CALIBRATORS[m].needs_groups]
    if (cfg.eval_groups == "known" or by_known) and data.GROUP not in table.columns:
        why = "eval_groups='known'" if cfg.eval_groups == "known" else f"method {by_known[0]!r}"
        raise ValueError(f"{why} needs a 'group' column; the table has none (use C-PAC with eval_groups='learned')")
    losses = table[data.LOSS].to_numpy(float)
    known = table[data.GROUP].to_numpy(str) if data.GROUP in table.columns else None
    has_tokens = all(c in table.columns for c in data.TOKENS)
    tokens = [table[c].to_numpy(float) for c in (data.THINK_TOKENS, data.NOTHINK_TOKENS)] if has_tokens else None

    evaluate = get_risk(cfg.risk).evaluate  # what pop_risk measures: the certified risk
    rows, measured = [], (losses, tokens, evaluate)
    known_parts = _parts(known, losses) if cfg.eval_groups == "known" else None  # the same for every trial
    for trial in tqdm(range(cfg.n_trials), desc="trials", leave=False, disable=not progress):
        cal, test = trial_split(len(table), cfg.cal_ratio, cfg.seed, trial)
        known_cells = None if known_parts is None else _cells(known_parts, test)
        for si, score in enumerate(scores):
            u = table[score].to_numpy(float)
            for vi, recipe in enumerate(cfg.recipes):
                fitted = {}
                for mi, m in enumerate(cfg.methods):
                    settings = cfg.as_settings(recipe=recipe, seed=calibrator_seed(cfg.seed, trial, si, vi, mi))
                    obj = CALIBRATORS[m].cls.from_settings(settings)
                    obj.fit(u[cal], losses[cal], known[cal] if CALIBRATORS[m].needs_groups else None)
                    fitted[m] = obj
                learners = [obj for m, obj in fitted.items() if CALIBRATORS[m].groups == "learned"]
                cells = known_cells
                if cells is None:  # the groups learned in this trial: by a method, else by the partitioner
                    labels = learners[0].assign(u) if learners else cfg.partitioner.fit(u[cal]).labels(u)
                    cells = _cells(_parts(labels, losses), test)
                for m, obj in fitted.items():
                    thr = obj.thresholds_for(u, known if CALIBRATORS[m].needs_groups else None)
                    routed = u <= thr
                    setting = (obj.name, score, obj.risk, *(getattr(recipe, name) for name in RECIPE_KEYS))
                    rows.extend(_rows(trial, setting, cells, routed, thr, (*measured, score)))
    return pd.DataFrame(rows)


def _parts(labels, losses):
    """The evaluation groups of one labelling, :data:`ALL` first then sorted: ``(group, members, their losses)``
    (``members``: a boolean mask over the table's items)."""
    out = []
    for g in [ALL] + sorted(set(labels.tolist())):
        in_g = np.ones(len(losses), bool) if g == ALL else labels == g
        out.append((g, in_g, losses[in_g]))
    return out


def _cells(parts, test):
    """:func:`_parts` with each group's test items (positions in the table, in the order of ``test``)."""
    return [(g, in_g, group_losses, test[in_g[test]]) for g, in_g, group_losses in parts]


def _rows(trial, setting, cells, routed, thr, measured):
    """One row per group (and :data:`ALL`) of one fitted calibrator; ``setting``: its values of :data:`KEYS`;
    ``cells``: the groups and their test items (:func:`_cells`); ``measured``: the table's losses, its token
    counts (or None), the risk's evaluation and the score column (its STP: :func:`gpac_utils.scores.score_stp`)."""
    losses, tokens, evaluate, score = measured
    out = []
    for g, in_g, group_losses, t in cells:
        r = routed[t]
        row = {
            "trial": trial,
            **dict(zip(KEYS, setting)),
            "group": g,
            "n_test": len(t),
            "error": float(np.mean(losses[t] * r)) if len(t) else np.nan,
            "routed_share": float(np.mean(r)) if len(t) else np.nan,
            "pop_risk": evaluate(group_losses, routed[in_g]),
            "threshold": float(thr[t[0]]) if (g != ALL and len(t)) else np.nan,
            "stp": _scores.score_stp(r, tokens[0][t], tokens[1][t], score) if tokens is not None and len(t) else np.nan,
        }
        out.append(row)
    return out


def group_violations(
    results: pd.DataFrame, eps: float | None = None, keys: Sequence[str] = tuple(KEYS)
) -> pd.DataFrame:
    """Per configuration and group: the share of trials whose whole-table risk exceeds ``eps``.

    Treating the table as the population, a valid group-conditional method keeps each group's
    ``violation_rate`` at most ``alpha`` up to Monte Carlo error (``violation_mcse``).

    Parameters
    ----------
    results : pandas.DataFrame
        Rows of :func:`run_experiment` (optionally with more key columns).
    eps : float, optional
        Target risk; ``None`` reads a per-row ``eps`` column.
    keys : sequence of str
        Columns that identify a configuration (default :data:`KEYS`).

    Returns
    -------
    pandas.DataFrame
        One row per configuration and group: ``violation_rate``, ``violation_mcse``, ``trials``,
        ``mean_error``, ``sd_error``, ``mean_pop_risk``, ``n_test``.
    """
    per = results[results.group != ALL]
    limit = per["eps"] if eps is None else eps
    g = per.assign(violated=(per["pop_risk"] > limit).astype(float)).groupby(list(keys) + ["group"], sort=False)
    out = g.agg(
        violation_rate=("violated", "mean"),
        trials=("trial", "nunique"),
        mean_error=("error", "mean"),
        sd_error=("error", "std"),
        mean_pop_risk=("pop_risk", "mean"),
        n_test=("n_test", "mean"),
    ).reset_index()
    out.insert(out.columns.get_loc("violation_rate") + 1, "violation_mcse", mcse(out["violation_rate"], out["trials"]))
    return out


def summarize(results: pd.DataFrame, eps: float) -> pd.DataFrame:
    """Paper metrics per method x score x recipe: Error, Error_Gap, STP, routed share (fractions).

    Two violation rates, each with its Monte Carlo standard error, clearly apart:

    * ``violation_max_group``: the largest per-group violation rate (:func:`group_violations`),
      in ``most_violated_group`` — what a group-conditional guarantee bounds by ``alpha``;
    * ``violation_any_group``: the share of trials in which *some* group's whole-table risk
      exceeds ``eps`` — up to about ``k * alpha`` for ``k`` groups even when every group is valid.

    ``worst_group`` names the group with the largest mean test error.

    Parameters
    ----------
    results : pandas.DataFrame
        Rows of :func:`run_experiment`.
    eps : float
        Target risk.

    Returns
    -------
    pandas.DataFrame
    """
    if not isinstance(results, pd.DataFrame) or results.empty:
        raise ParameterError(f"results: must be the non-empty rows of run_experiment, got {type(results).__name__}")
    missing = [c for c in (*KEYS, "group", "trial", "error", "pop_risk") if c not in results.columns]
    if missing:
        raise ParameterError(f"results: missing column(s) {missing}; pass the rows of run_experiment")
    EPS.check(eps, {"loss_bound": float(results["loss_bound"].iloc[0]) if "loss_bound" in results else 1.0})
    out = []
    per_group = group_violations(results, eps)
    for key, df in results.groupby(KEYS, sort=False):
        overall = df[df.group == ALL]
        per = df[df.group != ALL]
        mean_e = per.groupby("group")["error"].mean()
        worst_pop = per.groupby("trial")["pop_risk"].max()
        trials = overall["trial"].nunique()
        any_rate = float((worst_pop > eps).mean())
        gv = per_group[(per_group[KEYS] == pd.Series(dict(zip(KEYS, key)))).all(axis=1)]
        top = gv.loc[gv["violation_rate"].idxmax()] if len(gv) else None
        out.append(
            {
                **dict(zip(KEYS, key)),
                "Error": overall["error"].mean(),
                "Error_Gap": error_gap(mean_e.to_dict(), eps),
                "STP": overall["stp"].mean(),
                "routed_share": overall["routed_share"].mean(),
                "violation_any_group": any_rate,
                "violation_any_group_mcse": float(mcse(any_rate, trials)),
                "violation_max_group": float(top["violation_rate"]) if top is not None else np.nan,
                "violation_max_group_mcse": float(top["violation_mcse"]) if top is not None else np.nan,
                "most_violated_group": top["group"] if top is not None else None,
                "worst_group": mean_e.idxmax() if len(mean_e) else None,
                "worst_group_error": mean_e.max() if len(mean_e) else np.nan,
                "trials": trials,
            }
        )
    return pd.DataFrame(out)

"""fig:clustered-pac drawn from a table: PAC, G-PAC and conditional control.

:func:`group_risk_curves` gives the population risk curves ``R(u | G_j)`` of a table's groups,
:func:`population_thresholds` the exact largest thresholds with risk at most eps (one for all,
one per group) and an item-wise oracle's routing share, :func:`plot_concept` the figure.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .. import data as D
from .errorbars import short_label


def group_risk_curves(table: pd.DataFrame, score: str, grid: np.ndarray | None = None) -> pd.DataFrame:
    """Population risk curves ``R(u | G_j) = E[loss 1{U <= u} | G_j]`` over the whole table.

    Parameters
    ----------
    table : pandas.DataFrame
        A table in the data schema (with or without a ``group`` column).
    score : str
        Score column.
    grid : numpy.ndarray, optional
        Thresholds ``u`` (default: 201 points on [0, 1]).

    Returns
    -------
    pandas.DataFrame
        Columns ``group, u, risk, routed, n``; the whole table is the group ``"Overall"``.
    """
    grid = np.linspace(0, 1, 201) if grid is None else np.asarray(grid, float)
    u = table[score].to_numpy(float)
    loss = table[D.LOSS].to_numpy(float)
    rows = []
    groups = [("Overall", np.ones(len(u), bool))]
    if D.GROUP in table.columns:
        g = table[D.GROUP].to_numpy(str)
        groups += [(name, g == name) for name in sorted(set(g.tolist()))]
    for name, m in groups:
        uu, ll = u[m], loss[m]
        order = np.argsort(uu, kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(ll[order])]) / m.sum()
        idx = np.searchsorted(uu[order], grid, side="right")
        rows.append(
            pd.DataFrame({"group": name, "u": grid, "risk": cum[idx], "routed": idx / m.sum(), "n": int(m.sum())})
        )
    return pd.concat(rows, ignore_index=True)


def population_thresholds(table: pd.DataFrame, score: str, eps: float) -> pd.DataFrame:
    """The largest thresholds with population risk <= eps: one for all (PAC), one per group (G-PAC).

    Exact over the distinct scores, treating the table as the population.

    Parameters
    ----------
    table : pandas.DataFrame
        A table in the data schema.
    score : str
        Score column.
    eps : float
        Target risk.

    Returns
    -------
    pandas.DataFrame
        Per group: ``n``, the PAC and G-PAC thresholds with the resulting group risk and share
        routed to the non-thinking model, and ``oracle_routed``, the share an item-wise oracle
        could route (loss <= eps item by item: "conditional" PAC).
    """
    u = table[score].to_numpy(float)
    loss = table[D.LOSS].to_numpy(float)
    g = table[D.GROUP].to_numpy(str) if D.GROUP in table.columns else np.full(len(u), "all")

    def best(uu, ll):
        cand = np.unique(uu)
        risk = np.array([np.mean(ll * (uu <= c)) for c in cand])
        ok = risk <= eps
        return float(cand[ok].max()) if ok.any() else -math.inf

    t_all = best(u, loss)
    rows = []
    for name in sorted(set(g.tolist())):
        m = g == name
        t_g = best(u[m], loss[m])
        rows.append(
            {
                "group": name,
                "n": int(m.sum()),
                "pac_threshold": t_all,
                "pac_risk": float(np.mean(loss[m] * (u[m] <= t_all))),
                "pac_routed": float(np.mean(u[m] <= t_all)),
                "gpac_threshold": t_g,
                "gpac_risk": float(np.mean(loss[m] * (u[m] <= t_g))),
                "gpac_routed": float(np.mean(u[m] <= t_g)),
                "oracle_routed": float(np.mean(loss[m] <= eps)),
            }
        )
    return pd.DataFrame(rows)


def plot_concept(curves: pd.DataFrame, thresholds: pd.DataFrame, eps: float, title: str = ""):
    """fig:clustered-pac drawn from data, three panels.

    (a) PAC: the per-group risk curves with the single marginal threshold; groups whose curve is
    above eps there are violated; (b) G-PAC: each curve cut at its own threshold ``u_j``; (c) the
    share of each group routed to the non-thinking model by PAC, G-PAC and an item-wise oracle
    (conditional control: most efficient, impossible in practice).

    Parameters
    ----------
    curves : pandas.DataFrame
        Output of :func:`group_risk_curves`.
    thresholds : pandas.DataFrame
        Output of :func:`population_thresholds`.
    eps : float
        Target risk.
    title : str
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    groups = [g for g in dict.fromkeys(curves["group"]) if g != "Overall"]
    cmap = plt.get_cmap("tab10")
    color = {g: cmap(i % 10) for i, g in enumerate(groups)}
    th = thresholds.set_index("group")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, which in zip(axes[:2], ("pac", "gpac")):
        for g in groups:
            c = curves[curves.group == g]
            ax.plot(c["u"], 100 * c["risk"], color=color[g], lw=1.4, label=g)
            t = th.loc[g, f"{which}_threshold"]
            r = th.loc[g, f"{which}_risk"]
            if np.isfinite(t):
                bad = r > eps
                ax.plot(
                    [t],
                    [100 * r],
                    marker="X" if bad else "o",
                    ms=9 if bad else 6,
                    color=color[g],
                    mec="black" if bad else color[g],
                    zorder=5,
                )
        ov = curves[curves.group == "Overall"]
        ax.plot(ov["u"], 100 * ov["risk"], color="black", lw=2.2, ls="-", label="Overall")
        ax.axhline(100 * eps, color="red", ls="--", lw=1.2, label=r"$\varepsilon$")
        ax.set_xlabel("threshold u on the uncertainty score")
        ax.set_ylabel(r"risk $R(u\mid G_j)$ (%)")
    pac_t = float(th["pac_threshold"].iloc[0])
    if np.isfinite(pac_t):
        axes[0].axvline(pac_t, color="#1f3b73", lw=1.5, ls=":")
    n_bad = int((th["pac_risk"] > eps).sum())
    axes[0].set_title(f"(a) PAC: one threshold u = {pac_t:.2f}; {n_bad} group(s) above eps", fontsize=9)
    axes[1].set_title("(b) G-PAC: a threshold per group, every group <= eps", fontsize=9)
    axes[0].legend(fontsize=6.5, loc="upper left")
    x = np.arange(len(groups))
    w = 0.27
    for i, (col, lab, colr) in enumerate(
        (
            ("pac_routed", "PAC", "#1f3b73"),
            ("gpac_routed", "G-PAC", "#2a9d8f"),
            ("oracle_routed", "conditional (oracle)", "#e76f51"),
        )
    ):
        axes[2].bar(x + (i - 1) * w, 100 * th.loc[groups, col], w, label=lab, color=colr)
    for xi, g in zip(x, groups):
        if th.loc[g, "pac_risk"] > eps:
            axes[2].annotate(
                "PAC risk\n> eps",
                (xi - w, 100 * th.loc[g, "pac_routed"]),
                ha="center",
                va="bottom",
                fontsize=6.5,
                color="#1f3b73",
            )
    axes[2].set_xticks(x, [short_label(g) for g in groups], rotation=35, ha="right", fontsize=7)
    axes[2].set_ylim(0, 118)
    axes[2].set_ylabel("routed to the non-thinking model (%)")
    axes[2].set_title("(c) efficiency: feasible (PAC, G-PAC) vs impossible (conditional)", fontsize=9)
    axes[2].legend(fontsize=7, loc="lower left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig

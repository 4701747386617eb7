"""One figure style, and byte-stable saving of figures and tables.

Call :func:`apply_style` once at the top of a notebook (never inside helpers).
:func:`savefig` writes PNG and PDF into ``figures/`` with metadata stripped and a fixed dpi,
so that rerunning a notebook gives identical bytes. :func:`save_table` writes CSV + Markdown
into ``figures/tables/``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import pandas as pd
import seaborn as sns

from ..workflow.paths import ensure, figures_dir, tables_dir

DPI = 150
PNG_METADATA = {"Software": None}
PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
#: Colours used throughout: PAC (marginal) vs group-conditional methods.
METHOD_COLORS = {"PAC": "#1f3b73", "G-PAC": "#2a9d8f", "C-PAC": "#e9c46a", "oracle": "#e76f51"}


def apply_style() -> None:
    """Set the compendium's matplotlib style (deterministic fonts, no timestamps)."""
    # No backend switch here: inline figures in notebooks; tests and CI set MPLBACKEND=Agg.
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    mpl.rcParams.update(
        {
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
            "savefig.bbox": "tight",
            "pdf.fonttype": 42,
            "svg.hashsalt": "gpac",
            "path.simplify": True,
        }
    )


def savefig(fig, name: str, folder: Path | None = None) -> list[Path]:
    """Save ``fig`` as ``<name>.png`` and ``<name>.pdf`` (metadata stripped, fixed dpi).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    name : str
        File stem.
    folder : Path, optional
        Default ``figures/`` (or ``$GPAC_FIGURES``).

    Returns
    -------
    list of Path
    """
    folder = ensure(folder or figures_dir())
    png, pdf = folder / f"{name}.png", folder / f"{name}.pdf"
    fig.savefig(png, dpi=DPI, metadata=PNG_METADATA)
    fig.savefig(pdf, dpi=DPI, metadata=PDF_METADATA)
    return [png, pdf]


#: Significant digits of the numbers in committed CSV tables. A CPU's last floating-point bits
#: (e.g. AVX-512 vs AVX2 SIMD code paths in numpy) never reach a committed file: a value would have
#: to lie within about 1e-16 (relative) of a rounding boundary of the 8th digit to change it.
CSV_DIGITS = 8


def save_table(df: pd.DataFrame, name: str, folder: Path | None = None, floatfmt: str = ".2f") -> list[Path]:
    """Save ``df`` as ``<name>.csv`` (floats to :data:`CSV_DIGITS` significant digits) and
    ``<name>.md`` (rounded for reading).

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    name : str
        File stem.
    folder : Path, optional
        Default ``figures/tables/``.
    floatfmt : str, default ".2f"
        Number format of the Markdown file.

    Returns
    -------
    list of Path
    """
    folder = ensure(folder or tables_dir())
    csv, md = folder / f"{name}.csv", folder / f"{name}.md"
    df.to_csv(csv, index=False, lineterminator="\n", float_format=f"%.{CSV_DIGITS}g")
    md.write_text(to_markdown(df, floatfmt) + "\n")
    return [csv, md]


def to_markdown(df: pd.DataFrame, floatfmt: str = ".2f") -> str:
    """A GitHub-flavoured Markdown table (no ``tabulate`` dependency)."""

    def fmt(v):
        if isinstance(v, float):
            return "" if pd.isna(v) else format(v, floatfmt)
        return str(v)

    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines)

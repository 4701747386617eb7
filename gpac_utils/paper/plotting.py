"""One figure style, and byte-stable saving of figures and tables.

Call :func:`apply_style` once at the top of a notebook (never inside helpers).
:func:`savefig` writes PNG and PDF into ``figures/`` with metadata stripped and a fixed dpi,
so that rerunning a notebook gives identical bytes. The PNG carries the measurements of the text
drawn in it (:func:`figure_text`: each text's size and box in the PNG's pixels), which the lecture
slides check (workflow/scripts/slides.py). :func:`save_table` writes CSV + Markdown into
``figures/tables/``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import matplotlib as mpl
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.text import Annotation, Text
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from ..checks import DataError
from ..workflow.paths import ensure, figures_dir, tables_dir

DPI = 150
PNG_METADATA = {"Software": None}
PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
#: Colours used throughout: PAC (marginal) vs group-conditional methods.
METHOD_COLORS = {"PAC": "#1f3b73", "G-PAC": "#2a9d8f", "C-PAC": "#e9c46a", "oracle": "#e76f51"}
#: The bounds' names in figure labels (the registry's names, :data:`gpac_utils.bounds.BOUNDS`, are code).
BOUND_LABELS = {
    "clt": "CLT (paper)",
    "hoeffding": "Hoeffding",
    "hoeffding_bentkus": "Hoeffding–Bentkus",
    "empirical_bernstein": "empirical Bernstein",
    "wsr": "WSR (betting)",
    "clopper_pearson": "Clopper–Pearson",
}
#: The labelling schemes' names in figure labels (:mod:`gpac_utils.sampling`).
SCHEME_LABELS = {"full": "every label", "resample": "resampled labels", "bernoulli": "Bernoulli labels"}


def bound_label(bound: str, scheme: str | None = None) -> str:
    """A bound's name for a figure label, with its labelling scheme if given.

    Examples
    --------
    >>> bound_label("clopper_pearson", "full")
    'Clopper–Pearson, every label'
    >>> bound_label("my_bound")
    'my_bound'
    """
    name = BOUND_LABELS.get(bound, bound)
    return name if scheme is None else f"{name}, {SCHEME_LABELS.get(scheme, scheme)}"


def apply_style(projected: bool = False) -> None:
    """Set the compendium's matplotlib style (deterministic fonts, no timestamps).

    Parameters
    ----------
    projected : bool, default False
        Text for a projector: seaborn's ``notebook`` context instead of ``paper`` (tick labels and
        legends 12.1 pt, 25 px at :data:`DPI`), for the notebooks whose figures the lecture slides
        show (workflow/scripts/slides.py refuses figure text under 20 px on a slide).
    """
    # No backend switch here: inline figures in notebooks; tests and CI set MPLBACKEND=Agg.
    sns.set_theme(context="notebook" if projected else "paper", style="whitegrid", font_scale=1.1)
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


def text_color(color) -> str:
    """Black or white, whichever contrasts more with the background ``color`` (WCAG relative
    luminance: white below 0.179), e.g. for the numbers written on heat-map cells."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in mpl.colors.to_rgb(color)]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return "white" if luminance < 0.179 else "black"


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
    first = io.BytesIO()
    with _drawn_text() as measured:  # a first rendering measures the text ...
        fig.savefig(first, format="png", dpi=DPI, metadata=PNG_METADATA)
    text = _text_record(fig, measured)
    if fig.get_layout_engine() is None:  # ... and, with no layout engine to move it, is the PNG: its pixels
        first.seek(0)  # encoded again with the text chunk, as matplotlib encodes its RGBA buffer (imsave: Pillow)
        Image.open(first).save(png, format="png", dpi=(DPI, DPI), pnginfo=_png_info(text))
    else:
        for _ in range(3):  # ... or the next, the same pixels, writes it into the PNG (a constrained layout
            with _drawn_text() as again:  # may move once more on a second drawing: then measured again)
                fig.savefig(png, dpi=DPI, pil_kwargs={"pnginfo": _png_info(text)})
            if (drawn := _text_record(fig, again)) == text:
                break
            text = drawn
        else:
            raise DataError(f"figure {name}: its text moves each time it is drawn; not saved with its measurements")
    fig.savefig(pdf, dpi=DPI, metadata=PDF_METADATA)
    return [png, pdf]


def _png_info(text) -> PngInfo:
    """The PNG text chunk that records ``text`` (:data:`TEXT_KEY`), the only chunk of text in the file."""
    info = PngInfo()
    info.add_text(TEXT_KEY, json.dumps(text, ensure_ascii=True, separators=(",", ":")), zip=True)
    return info


#: The PNG text chunk (zTXt) in which :func:`savefig` records a figure's text (see :func:`figure_text`).
TEXT_KEY = "gpac:text"


def _disabled(renderer) -> bool:
    """Whether ``renderer`` draws nothing (matplotlib's ``_draw_disabled``: the pass that lays a figure out before
    ``bbox_inches="tight"`` measures it). Its texts are not the PNG's, and an axes' box costs much to measure."""
    return getattr(vars(renderer).get("draw_path"), "__wrapped__", None) is RendererBase.draw_path


@contextlib.contextmanager
def _drawn_text():
    """Every text matplotlib draws inside the block, with its renderer and its box in the renderer's
    pixels: ``[(renderer, text artist, bbox), ...]`` (the artists a figure holds but does not draw,
    such as the labels of ticks outside the axes' limits, are not there)."""
    drawn, draw, draw_axes = [], Text.draw, Axes.draw

    def recording(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text() and not _disabled(renderer):
            drawn.append((renderer, self, self.get_window_extent(renderer)))

    def recording_axes(self, renderer):
        draw_axes(self, renderer)
        if self.get_visible() and not _disabled(renderer):
            drawn.append((renderer, self, self.get_tightbbox(renderer)))

    Text.draw, Axes.draw = recording, recording_axes
    try:
        yield drawn
    finally:
        Text.draw, Axes.draw = draw, draw_axes


def _roles(fig) -> dict[int, str]:
    """What each text artist of ``fig`` is: tick label, axis label, legend, title, annotation."""
    roles = {}
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            roles |= {id(t): "tick label" for t in [*axis.get_ticklabels(which="both"), axis.get_offset_text()]}
            roles[id(axis.label)] = "axis label"
        for title in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            roles[id(title)] = "title"
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None:
            roles |= {id(t): "legend" for t in [*legend.get_texts(), legend.get_title()]}
    return roles


def _text_record(fig, drawn) -> dict:
    """The text of the last rendering in ``drawn``: size and box of each text in the PNG's pixels."""
    if not drawn:
        return {"dpi": DPI, "size": None, "axes": [], "texts": []}
    last = drawn[-1][0]  # savefig's bbox="tight" renders twice: to find the box, then the PNG
    width, height = int(last.width), int(last.height)  # Agg's canvas: the figure's size, truncated
    roles, texts, axes = _roles(fig), [], {}
    for renderer, artist, box in drawn:
        left, right = round(box.x0), round(box.x1)
        top, bottom = round(height - box.y1), round(height - box.y0)  # the PNG's rows run downwards
        if renderer is not last or right <= 0 or bottom <= 0 or left >= width or top >= height:
            continue
        if isinstance(artist, Axes):
            axes[fig.axes.index(artist)] = [max(left, 0), max(top, 0), min(right, width), min(bottom, height)]
            continue
        role = "annotation" if isinstance(artist, Annotation) else roles.get(id(artist), "text")
        size = round(artist.get_fontsize() * DPI / 72, 2)
        texts.append({"text": artist.get_text(), "role": role, "px": size, "box": [left, top, right, bottom]})
    return {"dpi": DPI, "size": [width, height], "axes": [axes.get(i) for i in range(len(fig.axes))], "texts": texts}


def figure_text(png: Path) -> dict | None:
    """The text :func:`savefig` measured in a figure, read from its PNG (``None``: a PNG without).

    Parameters
    ----------
    png : Path
        A PNG written by :func:`savefig`.

    Returns
    -------
    dict or None
        ``{"dpi": DPI, "size": [width, height], "axes": [...], "texts": [...]}``: per axes of the
        figure (``fig.axes`` order), the box ``[left, top, right, bottom]`` of it with its labels
        (``None`` where not drawn); per text drawn, in drawing order,
        its ``text``, ``role`` (``tick label``, ``axis label``, ``legend``, ``title``, ``annotation``
        or ``text``), its font size ``px`` in the PNG's pixels (points × dpi / 72) and its ``box``
        ``[left, top, right, bottom]`` in the PNG's pixels.

    Raises
    ------
    DataError
        The PNG's size differs from the one measured (the PNG was changed after saving).
    """
    with Image.open(png) as image:  # savefig writes the chunk before the pixels: read without decoding them
        raw, size = image.info.get(TEXT_KEY), list(image.size)
        raw = image.text.get(TEXT_KEY) if raw is None else raw  # a chunk after the pixels (another writer)
    if raw is None:
        return None
    text = json.loads(raw)
    if text["size"] != size:
        raise DataError(f"{png}: {size[0]} x {size[1]} px, but its text was measured on {text['size']}")
    return text


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
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)

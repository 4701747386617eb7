"""The paper's own code. Nothing in the core (:mod:`gpac_utils`) imports from here.

==================  ==========================================================================
module              what it owns
==================  ==========================================================================
reference           the paper's transcribed numbers and table specifications, read from
                    ``paper/data/`` (``paper_tables.csv``, ``llm_accuracy.csv``,
                    ``table_specs.yaml``), each row with its source label
results_tables      Tables 1–5 and the real-data case study: one run / summarize / pick the
                    valid bound / save / plot path (notebooks 21, 22, 23, 31), its settings one
                    :class:`~.results_tables.TableSettings`
table_layout        our numbers beside the paper's: the long table and the paper's layout
errorbars           fig:errorbar_category (per-group test error)
realdata            the real table's path, mapping and token-cost model (notebook 31)
simulate            the simulated stand-ins for the paper's per-item outputs (``data/simulated``)
theory              populations with known risk; notebooks 10–13 (see its package docstring)
toy                 the toy population of the quickstart (notebook 00 fits, routes and measures on it)
plotting            one figure style; byte-stable saving of figures and tables
==================  ==========================================================================

Each notebook's settings live in ``notebooks/config/<notebook>.yaml``; the notebook reads them
and passes the ones that matter to the functions here as explicit arguments (or one typed
settings object). A step only one notebook takes lives in that notebook.
"""

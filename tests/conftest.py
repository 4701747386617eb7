"""Suite-wide environment: headless matplotlib, and no model/dataset hub access.

Set at import, before any test module imports matplotlib or transformers; notebook kernels
started by the tests inherit these variables.
"""

import os

os.environ["MPLBACKEND"] = "Agg"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

# Figures and tables written during the tests (notebooks on the fast profile) go to a scratch
# folder, never over the committed paper-profile outputs in figures/.
if "GPAC_FIGURES" not in os.environ:
    import tempfile

    os.environ["GPAC_FIGURES"] = tempfile.mkdtemp(prefix="gpac-figures-")

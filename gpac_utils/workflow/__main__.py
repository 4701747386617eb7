"""``python -m gpac_utils.workflow``: run notebooks with papermill (see :mod:`.runner`)."""

import sys

from .runner import main

sys.exit(main())

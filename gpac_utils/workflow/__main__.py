"""``python -m gpac_utils.workflow``: the notebook runner (see :mod:`.runner`)."""

import sys

from .runner import main

sys.exit(main())

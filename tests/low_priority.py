"""Run a command at low priority in a scheduling group of its own: ``python tests/low_priority.py N command ...``.

``make test`` runs the vLLM, SLURM and lesson tiers beside the main suite this way (Makefile: ``BESIDE``,
``VLLM_NICE``). Where the scheduler's autogroups are on (``/proc/sys/kernel/sched_autogroup_enabled``, the
default of most distributions), CPU time is shared between sessions first and by nice value only within a
session: a tier at ``nice -n 10`` in make's session took as large a share as the main suite's notebook
kernels, each of which runs in a session of its own. So the command gets a session of its own (``setsid``)
whose group has niceness ``N`` (``/proc/self/autogroup``), and the process itself niceness ``N``; its
kernels keep it (tests/kernel_nice.py). Where there are no autogroups, this is ``nice -n N``. The command
replaces this process (same pid: ``timeout`` and make see it as their child).
"""

import os
import sys

if len(sys.argv) < 3 or not sys.argv[1].isdigit():
    sys.exit("usage: python tests/low_priority.py N command [argument ...]  (N: a niceness, 0-19)")
nice = int(sys.argv[1])
os.setsid()
try:
    with open("/proc/self/autogroup", "w") as group:
        group.write(str(nice))
except OSError:  # no autogroups here: the nice value alone
    pass
os.nice(max(0, nice - os.nice(0)))
os.execvp(sys.argv[2], sys.argv[2:])

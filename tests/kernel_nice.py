"""The ``PYTHONSTARTUP`` of the notebook kernels that ``make test`` runs at low priority (Makefile: ``BESIDE``).

jupyter_client starts each kernel in a session of its own (``setsid``). Where the scheduler's autogroups
are on (``/proc/sys/kernel/sched_autogroup_enabled``, the default of most distributions, and of the
machines ``make test`` was measured on), a new session is a scheduling group of its own with the default
weight, whatever the process's nice value: each kernel of the lesson tier (``nice -n 10``) took as large a
share of the CPU as the whole main suite. This gives the kernel's group the niceness the kernel inherited.
Where there are no autogroups (no ``/proc/self/autogroup``), it does nothing. Binds no name.
"""


def _keep_niceness():
    import os

    nice = os.nice(0)
    if nice > 0:
        try:
            with open("/proc/self/autogroup", "w") as group:
                group.write(str(nice))
        except OSError:
            pass


_keep_niceness()
del _keep_niceness

"""``PYTHONSTARTUP`` of the notebook kernels of ``make test``'s tiers that run beside the main suite (the
Makefile's ``BESIDE``): the kernel's scheduling group takes the niceness ``$GPAC_KERNEL_NICE``.

A Jupyter kernel starts in a session of its own (jupyter_client launches it with ``start_new_session``), and
with the scheduler's autogroups (``/proc/sys/kernel/sched_autogroup_enabled``) a session is a group that
competes at niceness 0 with everything else, whatever the niceness its processes inherited: the lessons'
kernels, under ``nice -n 10``, took the CPU from the main suite as if they were not niced. Writing the
niceness into ``/proc/self/autogroup`` gives the group the tier's place. Nothing happens where the file does
not exist or refuses (no autogroups, or the writes' rate limit for a process without CAP_SYS_ADMIN), and
nothing is bound in the kernel's namespace.
"""


def _nice_autogroup() -> None:
    import os
    import time

    nice = os.environ.get("GPAC_KERNEL_NICE")
    if not nice:
        return
    for _ in range(20):  # the kernel allows one write per 100 ms machine-wide without CAP_SYS_ADMIN
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write(nice)
            return
        except BlockingIOError:
            time.sleep(0.1)
        except OSError:
            return


_nice_autogroup()
del _nice_autogroup

"""The kernel's ``PYTHONSTARTUP`` file when reads are recorded (:mod:`gpac_utils.workflow.reads`); binds no name."""

__import__("gpac_utils.workflow.reads", fromlist=["install"]).install()

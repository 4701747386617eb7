"""The lab settings in an editable install (``pip install -e ".[lesson]"``, ``make venv-lesson``).

pyproject.toml ships ``jupyter/lab-overrides.json`` and ``jupyter/lab-page-config.json`` as data files
(``[tool.setuptools.data-files]``): a wheel installs them under the environment's prefix, where
JupyterLab reads them. setuptools' editable wheel skips data files: ``editable_wheel._run_install``
looks for ``Distribution.has_data``, which does not exist (the method is ``has_data_files``), so
``-e`` installed no lab settings. This command installs them as the wheel does (a copy: rerun the
install after editing them; ``make venv-lesson`` does, its stamp depends on them). pyproject.toml
names it in ``[tool.setuptools.cmdclass]``; ``tests/test_jupyterlab.py`` builds an editable wheel and
checks that it carries both files. MANIFEST.in puts this file in the sdist, whose wheel needs it too.
"""

from __future__ import annotations

from setuptools.command.editable_wheel import editable_wheel


class EditableWheel(editable_wheel):
    """``editable_wheel`` that installs ``data_files`` too (into the wheel's ``.data/data``)."""

    def _run_install(self, category: str) -> None:
        if category == "data" and not hasattr(self.distribution, "has_data"):
            if self.distribution.has_data_files():
                self.run_command("install_data")
            return
        super()._run_install(category)

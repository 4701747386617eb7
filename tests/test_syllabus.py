"""docs/syllabus.md: in the book and the README, its minutes are the teaching page's, its commands exist.

The timing of each session (and of each lesson within it) is the sum of the parts of docs/teaching.md's
session tables, so that a retimed part fails here until the syllabus says the same.
"""

from __future__ import annotations

import re
from collections import defaultdict

from gpac_utils.workflow.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def _teaching_minutes() -> dict[int, dict[str, int]]:
    """{session: {notebook or 'wrap-up': minutes}} from the tables of docs/teaching.md."""
    page = (DOCS / "teaching.md").read_text()
    sessions = re.split(r"^### Session (\d) ", page, flags=re.M)[1:]
    found = {}
    for number, body in zip(sessions[::2], sessions[1::2]):
        minutes = defaultdict(int)
        for part, time, notebook in re.findall(r"^\| ([^|]+) \| (\d+) min \| ([^|]+) \|", body.split("\n## ")[0], re.M):
            m = re.search(r"notebooks/(\d\d_\w+)|selection-lesson", notebook)
            key = (
                "wrap-up"
                if part.startswith("Wrap-up")
                else ("13_validity_audit" if m and not m.group(1) else m.group(1))
            )
            minutes[key] += int(time)
        found[int(number)] = dict(minutes)
    return found


def test_the_syllabus_is_in_the_book_and_the_readme():
    index = (DOCS / "index.md").read_text()
    assert re.search(r":caption: Teaching\n:maxdepth: 1\n\nsyllabus\n", index)
    assert "[Syllabus](docs/syllabus.md)" in (REPO_ROOT / "README.md").read_text()


def test_the_sessions_minutes_are_the_teaching_pages():
    syllabus = (DOCS / "syllabus.md").read_text()
    for number, minutes in _teaching_minutes().items():
        section = syllabus.split(f"### Session {number} ", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        total = int(re.match(r"[^(]*\((\d+) min\)", section).group(1))
        assert total == sum(minutes.values()), (number, total, minutes)
        lessons = re.sub(r"\s+", " ", section.split("**Lessons.**", 1)[1].split("**Before.**", 1)[0])
        for notebook, time in minutes.items():
            if notebook == "wrap-up":
                assert (
                    f"wrap-up{'' if number != 2 else ' with {doc}`notebooks/21_table_known_groups`'} ({time} min)"
                    in lessons
                )
            elif notebook != "21_table_known_groups":
                assert re.search(rf"notebooks/{notebook}` \({time} min", lessons), (number, notebook, time)
        assert "**You will be able to**" in section and "**Before.**" in section


def test_the_selection_sections_minutes_are_the_teaching_pages():
    teaching = (DOCS / "teaching.md").read_text()
    minutes = re.search(r"^\| [^|]+ \| (\d+) min \| \{ref\}`selection-lesson`", teaching, re.M).group(1)
    syllabus = re.sub(r"\s+", " ", (DOCS / "syllabus.md").read_text())
    assert f"its selection section {minutes} of them)" in syllabus


def test_the_syllabus_commands_are_make_targets():
    makefile = (REPO_ROOT / "Makefile").read_text()
    syllabus = (DOCS / "syllabus.md").read_text()
    for target in re.findall(r"^make ([\w-]+)", syllabus, re.M):
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert 'pip install -e ".[lesson]"' in syllabus


def test_the_student_command_says_what_to_add_as_root():
    """JupyterLab refuses to start as root without --allow-root: the syllabus quotes its message and the flag."""
    import importlib.util
    from pathlib import Path

    install = (DOCS / "syllabus.md").read_text().split("## What students install", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^GPAC_PROFILE=fast (\S*jupyter lab.*)$", install, re.M)
    assert any("--allow-root" in c for c in commands) and any("--allow-root" not in c for c in commands), commands
    message = re.search(r'"(Running as root[^"]+)"', re.sub(r"\s+", " ", install)).group(1)
    spec = importlib.util.find_spec("jupyter_server.serverapp")
    if spec is not None:  # the message as the installed jupyter_server words it
        assert f'"{message}"' in Path(spec.origin).read_text()

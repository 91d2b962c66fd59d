"""The README, the front page: its code is the code the tests run, and its links lead somewhere.

Each Python or JSON block in it is marked with the file it shows
(``<!-- file: docs_src/start/notes.py -->`` on the line before), and must be
that file as it is — less the lines that mark regions for the docs site — so a
change to an example that the tests run shows in the README too, or fails here.
The file itself is run by ``tests/project/test_docs_examples.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)
REGION_MARK = re.compile(r"^# --8<-- \[(?:start|end):\w+\]\n", re.M)


def shown(path: Path) -> str:
    """A file as a page shows it whole: without its region marks, nor the blank lines they left."""
    text = REGION_MARK.sub("", path.read_text(encoding="utf-8"))
    return re.sub(r"\n{3,}", "\n\n\n", text).rstrip("\n") + "\n"


def test_every_python_and_json_block_is_a_file_the_tests_run() -> None:
    blocks = list(BLOCK.finditer(README))
    code = [block for block in blocks if block["lang"] in ("python", "json")]
    assert code, "the README shows code"
    for block in code:
        assert block["file"] is not None, f"a {block['lang']} block names no file:\n{block['body']}"
        assert block["body"] == shown(ROOT / block["file"]), f"{block['file']} differs"


def test_the_readme_starts_with_the_two_commands() -> None:
    """The main job and the tests, each installing first; CI runs the second as written."""
    first = next(BLOCK.finditer(README))
    assert first["body"] == (
        "# run the main job (a demo of interleaved sessions, each seeing only its own state)\n"
        "python -m pip install -e . && python -m actors demo\n"
        "# run the tests\n"
        "python -m pip install -e '.[test]' && pytest\n"
    )


def test_every_relative_link_leads_to_a_file() -> None:
    links = re.findall(r"\]\((?!https?://|#)([^)#]+)(?:#[^)]*)?\)", README)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def test_it_stays_a_front_page() -> None:
    assert len(README.splitlines()) < 250

"""What users read says what the software does, not how it came to be: `cachecolor --help`,
every subcommand's (and sub-subcommand's) help and `cachecolor machine NAME` for every preset
carry no issue, session or item numbers and no path into the development repository's papers
directory (papers are cited by title, authors and venue). The history is in CHANGELOG.md."""
from __future__ import annotations

import argparse
import re

import pytest

from cachecolor import presets
from cachecolor.cli import build_parser, main

HISTORY = re.compile(r"\b(?:issue|session)s?\s*#?\d+|\bitem \d+\b|papers/\d{3}|\bdefect \d+\b", re.I)


def _helps(parser: argparse.ArgumentParser, name: str = "cachecolor"):
    yield name, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _helps(p, f"{name} {sub}")


def test_the_pattern_catches_history():
    for text in ("(issue 21 item 4)", "session 16", "papers/002", "Issue #7", "defect 3"):
        assert HISTORY.search(text), text
    assert not HISTORY.search("an LLC of 16 ways; ROCS section 3.2")


def test_help_of_every_command_has_no_development_history():
    found = [(name, m.group(0)) for name, text in _helps(build_parser()) for m in HISTORY.finditer(text)]
    assert found == [], found
    assert len(list(_helps(build_parser()))) > 20  # every subcommand was looked at


@pytest.mark.parametrize("name", presets.machine_names())
def test_machine_preset_text_has_no_development_history(name, capsys):
    if name == "detect":
        pytest.skip("detect reads this host")
    assert main(["machine", name]) == 0
    text = capsys.readouterr().out
    assert "[machine]" in text
    assert [m.group(0) for m in HISTORY.finditer(text)] == []

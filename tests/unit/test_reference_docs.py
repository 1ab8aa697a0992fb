"""The generated reference pages of the docs are the ones the code makes now: the configuration
reference from the config classes, the command-line reference from the argument parsers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from broker.config import BrokerConfig
from nameserver.config import NameServerConfig
from rocketspark.reference import cli, config
from tests.helpers import docs_text

REGENERATE = "regenerate it with `python -m rocketspark.reference` from the repository root"


@pytest.mark.parametrize(("page", "make"), [(config.PAGE, config.page), (cli.PAGE, cli.page)], ids=["config", "cli"])
def test_the_committed_reference_page_is_what_the_code_makes(page: str, make: Callable[[], str]) -> None:
    assert docs_text(page.removeprefix("docs/")) == make(), f"{page} differs from the code; {REGENERATE}"


def test_every_config_key_is_declared_with_a_comment() -> None:
    for _heading, cls in config.TABLES:
        config.table(_heading, cls)  # raises for a key without one


def test_the_configuration_reference_names_every_key_once_with_its_default() -> None:
    text = docs_text(config.PAGE.removeprefix("docs/"))
    for cls in (BrokerConfig, NameServerConfig):
        for field in dataclasses.fields(cls):
            rows = [line for line in text.splitlines() if line.startswith(f"| `{field.name}` |")]
            assert rows, f"{field.name} is not in {config.PAGE}"
    assert "| `segment_bytes` | `134217728` (`128 * MiB`) |" in text


def test_the_cli_reference_has_every_command() -> None:
    text = docs_text(cli.PAGE.removeprefix("docs/"))
    for program, build in cli.PROGRAMS:
        for words, _parser, _summary in cli.commands(build(), program.split(), ""):
            assert f"`{' '.join(words)}`" in text
    assert "rocketspark admin reset-offset GROUP TOPIC (--timestamp TIMESTAMP | --earliest | --latest)" in text

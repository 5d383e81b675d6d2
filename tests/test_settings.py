"""Settings: one definition gives every flag, environment variable and the generated docs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from toolsearch import settings as S

ROOT = Path(__file__).resolve().parents[1]


def test_configuration_doc_is_generated_from_the_settings():
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == S.render_markdown() + "\n", "docs/configuration.md is stale: run `toolsearch docs`"


def test_every_setting_has_a_flag_an_env_var_and_a_doc_line():
    doc = S.render_markdown()
    parser = argparse.ArgumentParser()
    S.add_arguments(parser)
    flags = {option for action in parser._actions for option in action.option_strings}
    for field in S.fields():
        assert S.flag_name(field.name) in flags
        assert f"`{S.env_name(field.name)}`" in doc
        assert field.metadata["help"]


def test_flag_beats_env_beats_default():
    parser = argparse.ArgumentParser()
    S.add_arguments(parser)
    env = {"TOOLSEARCH_MAX_INSTRUCTIONS": "500", "TOOLSEARCH_WRITE_TOOLS": "a, b,,c"}
    settings = S.from_args(parser.parse_args(["--port", "7000"]), env)
    assert settings.port == 7000
    assert settings.max_instructions == 500
    assert settings.write_tools == ["a", "b", "c"]
    assert S.from_env({}).max_instructions == 10_000


def test_bad_values_are_refused_with_the_setting_named():
    with pytest.raises(ValueError, match="embedder"):
        S.from_env({"TOOLSEARCH_EMBEDDER": "gpt"})
    with pytest.raises(ValueError):
        S.from_env({"TOOLSEARCH_PORT": "eighty"})

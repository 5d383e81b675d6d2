"""Settings: one definition gives every flag, environment variable and the generated docs."""

from __future__ import annotations

import argparse
import dataclasses
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


def test_a_setting_is_one_field_of_its_group_and_reaches_its_component_as_it_is():
    """No mapper between settings and components: each part holds its group, the very object."""
    from toolsearch.app import build_proxy

    settings = S.Settings(embedder="none", upstream_timeout=7.0, caller_rate=5.0, catalog_ttl=90.0)
    proxy = build_proxy(settings)
    assert proxy.upstream._config is settings.upstream
    assert proxy.catalogs._config is settings.catalog
    assert proxy.service.config is settings.tools
    assert proxy.service._calls._fair.config is settings.fair_use
    assert proxy.service._calls._limits is settings.upstream
    assert proxy.endpoint.config is settings.endpoint
    assert proxy.oauth.config is settings.oauth
    assert (settings.upstream.timeout, settings.fair_use.rate, settings.catalog.ttl) == (7.0, 5.0, 90.0)


def test_every_field_of_every_group_is_a_setting_with_a_flag_an_env_var_and_a_row():
    doc = S.render_markdown()
    parser = argparse.ArgumentParser()
    S.add_arguments(parser)
    dests = {action.dest for action in parser._actions}
    listed = [(s.group, s.attr) for s in S.fields()]
    for group, cls in S.GROUPS.items():
        assert f"## {cls.TITLE}\n" in doc
        for field in dataclasses.fields(cls):
            assert (group, field.name) in listed, f"{cls.__name__}.{field.name} is not a setting"
    for setting in S.fields():
        assert setting.name in dests
        default = getattr(getattr(S.Settings(), setting.group), setting.attr)
        assert default == setting.default
        # Set by its variable, the value lands in its group, and reads by its flat name too.
        raw = {"list[str]": "x,y", "int": "7", "float": "7.5"}.get(str(setting.field.type), "x")
        if setting.metadata.get("choices"):
            raw = setting.metadata["choices"][-1]
        value = getattr(getattr(S.from_env({S.env_name(setting.name): raw}), setting.group), setting.attr)
        assert value == S._parse(setting, raw) and value != default
        assert (
            getattr(S.from_env({S.env_name(setting.name): raw}), setting.name) == value
            or setting.name == "upstream"
        )


def test_flat_names_build_and_replace_and_unknown_ones_are_refused():
    settings = S.Settings(upstream="http://u.example/mcp", caller_burst=3)
    assert settings.upstream.url == "http://u.example/mcp" and settings.fair_use.burst == 3
    changed = settings.replace(oauth_timeout=2.0)
    assert (changed.auth.timeout, changed.fair_use.burst, settings.auth.timeout) == (2.0, 3, 5.0)
    with pytest.raises(TypeError, match="caller_bursts"):
        S.Settings(caller_bursts=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.upstream = settings.upstream  # type: ignore[misc]

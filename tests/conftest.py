"""The one place shared pytest fixtures are registered; helpers are imported as fixtures.* everywhere.

tests/ is on the path (pyproject's pythonpath), so each module of tests/fixtures has one name,
fixtures.<module>, for pytest and for bench/ alike. A test module defines its own fixtures or
uses these; it never registers plugins or imports a fixture function to make pytest see it.
"""

pytest_plugins = [
    "fixtures.sdk_upstream",  # sdk_upstream, sdk_upstream_url, legacy_upstream
    "fixtures.everything",  # everything_server, everything_url
    "fixtures.dynalite",  # dummy_aws_env, dynalite, dynamo_table
    "fixtures.contextforge",  # contextforge
    "fixtures.result_schemas",  # every result of the five tools checked against its outputSchema
]

pytest_plugins = [
    "fixtures.sdk_upstream",  # sdk_upstream, sdk_upstream_url, legacy_upstream
    "fixtures.everything",  # everything_server, everything_url
    "fixtures.result_schemas",  # every result of the five tools checked against its outputSchema
]

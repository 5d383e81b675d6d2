pytest_plugins = [
    "fixtures.sdk_upstream",  # sdk_upstream, sdk_upstream_url, legacy_upstream
    "fixtures.everything",  # everything_server, everything_url
]

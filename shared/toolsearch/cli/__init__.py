"""The `toolsearch` command (`main`), `catalog`, `explain`, `eval`. Build time only."""

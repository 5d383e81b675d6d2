# The two commands of the README. Each installs what it needs first (scripts/bootstrap.sh).
.PHONY: serve test lint docs bench template-tools sam

serve:  ## run the proxy on 127.0.0.1:8080 in front of the built-in demo upstream
	@scripts/bootstrap.sh
	.venv/bin/toolsearch serve $(ARGS)

test:  ## lint, type-check, then every test (what CI runs)
	@scripts/bootstrap.sh --test
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/toolsearch docs --check
	.venv/bin/mypy
	PYTHONPATH=shared .venv/bin/lint-imports --no-cache
	TOOLSEARCH_TEST_REQUIRE_ALL=1 .venv/bin/python -m pytest -q $(ARGS)

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && PYTHONPATH=shared .venv/bin/lint-imports --no-cache

docs:  ## regenerate docs/configuration.md from the settings
	.venv/bin/toolsearch docs

template-tools:  ## the SAM transform and cfn-lint that tests/test_template.py runs (make test installs them)
	scripts/install-template-tools.sh

sam:  ## the SAM CLI in .cache/sam-venv, for sam build / sam deploy (docs/deploy.md)
	@scripts/bootstrap.sh
	scripts/install-template-tools.sh --sam

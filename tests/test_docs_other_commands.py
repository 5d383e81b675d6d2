"""The docs' other commands: `make`, `scripts/…`, `sam` and `aws` lines name things that exist.

`tests/test_docs_commands.py` parses every `toolsearch …` line; this checks the rest of what a
deployer types from the guides, without an AWS account: a `make` target is in the Makefile, a
script is in scripts/ and executable, a `sam` subcommand is one the SAM CLI has and each
`--parameter-overrides Name=…` is a parameter of template.yaml (a renamed parameter must not leave a
guide that CloudFormation refuses), `--stack-name` is samconfig.toml's, and an `aws` command is an
operation of that service with options it takes (botocore's service models, which the AWS CLI is
generated from).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import botocore.session
import pytest
import yaml
from botocore import xform_name

from fixtures.doc_commands import markdown_snippets, simple_commands

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "layers").rglob("*.md")),
    *sorted((ROOT / "tools").rglob("*.md")),
]
SAM_COMMANDS = {"build", "deploy", "delete", "list", "local", "validate", "sync", "logs", "package", "init"}
AWS_GLOBAL = {"region", "profile", "output", "query", "no-cli-pager", "endpoint-url", "debug"}
AWS_CUSTOM = {("configure", None)}  # the CLI's own commands, not in any service model


def commands() -> list[tuple[str, list[str]]]:
    """(file, argv) of every simple command in the Markdown files' code."""
    return [
        (path.name, argv)
        for path in MARKDOWN
        for snippet in markdown_snippets(path.read_text(encoding="utf-8"))
        for argv in simple_commands(snippet)
    ]


COMMANDS = commands()


def of(program: str) -> list[tuple[str, list[str]]]:
    return [(doc, argv) for doc, argv in COMMANDS if Path(argv[0]).name == program or argv[0] == program]


def template_parameters() -> set[str]:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return set(yaml.load((ROOT / "template.yaml").read_text(encoding="utf-8"), Loader=Loader)["Parameters"])


def test_the_docs_have_such_commands_at_all():
    assert len(of("make")) >= 5 and len(of("sam")) >= 10 and len(of("aws")) >= 5


def test_make_targets_exist():
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    for doc, argv in of("make"):
        assert set(argv[1:]) <= targets, (doc, argv)


def test_scripts_exist_and_run():
    named = [(doc, argv) for doc, argv in COMMANDS if argv[0].lstrip("./").startswith("scripts/")]
    assert named
    for doc, argv in named:
        script = ROOT / argv[0].lstrip("./")
        assert script.is_file(), (doc, argv)
        if script.suffix in (".sh", ""):
            assert script.stat().st_mode & 0o111, (doc, f"{script} is not executable")


def test_sam_commands_and_their_parameters_exist():
    parameters = template_parameters()
    stack = tomllib.loads((ROOT / "samconfig.toml").read_text())["default"]["global"]["parameters"][
        "stack_name"
    ]
    for doc, argv in of("sam"):
        if argv[1:] == ["--version"]:
            continue
        assert argv[1] in SAM_COMMANDS, (doc, argv)
        if "--parameter-overrides" in argv:
            pairs = [arg for arg in argv[argv.index("--parameter-overrides") + 1 :] if "=" in arg]
            assert pairs, (doc, argv)
            names = {pair.split("=", 1)[0] for pair in pairs} - {"Name"}  # `Name=Value …` is the syntax
            assert names <= parameters, (doc, names - parameters)
        if "--stack-name" in argv:
            assert argv[argv.index("--stack-name") + 1] == stack, (doc, argv)


@pytest.mark.parametrize(
    ("doc", "argv"), of("aws"), ids=lambda value: " ".join(value[:3]) if isinstance(value, list) else value
)
def test_aws_commands_are_operations_with_their_options(doc, argv):
    service = argv[1]
    operation = argv[2] if len(argv) > 2 and not argv[2].startswith("-") else None
    if (service, operation) in AWS_CUSTOM:
        return
    session = botocore.session.get_session()
    assert service in session.get_available_services(), (doc, argv)
    model = session.get_service_model(service)
    operations = {xform_name(name, "-"): name for name in model.operation_names}
    assert operation in operations, (doc, argv)
    shape = model.operation_model(operations[operation]).input_shape
    accepted = {xform_name(member, "-") for member in (shape.members if shape else {})} | AWS_GLOBAL
    options = {arg[2:].split("=", 1)[0] for arg in argv[3:] if arg.startswith("--")}
    assert options <= accepted, (doc, argv, options - accepted)

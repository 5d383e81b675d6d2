"""template.yaml and the Lambda build inputs: the properties the deployment relies on.

The template is read with PyYAML and a loader that accepts CloudFormation's
short tags (!Ref, !Sub, !GetAtt, ...). `sam validate --lint` runs too when the
SAM CLI venv exists (.cache/sam-venv; CI does not install it by default).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolsearch import settings as settings_module

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
SAM = ROOT / ".cache" / "sam-venv" / "bin" / "sam"


class CfnLoader(yaml.SafeLoader):
    """SafeLoader that turns `!Name value` into {"Name": value} (GetAtt "A.B" into ["A", "B"])."""


def _tag(loader: CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    return {name: value}


CfnLoader.add_multi_constructor("!", _tag)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(encoding="utf-8"), Loader=CfnLoader)


@pytest.fixture(scope="module")
def function(template) -> dict[str, Any]:
    return template["Resources"]["ProxyFunction"]


def test_the_function_is_python_313_built_by_the_makefile(template, function):
    assert template["Transform"] == "AWS::Serverless-2016-10-31"
    props = function["Properties"]
    assert props["Runtime"] == "python3.13"
    assert props["Handler"] == "app.handler"
    assert (ROOT / props["CodeUri"] / "app.py").is_file()
    assert function["Metadata"]["BuildMethod"] == "makefile"
    assert "build-ProxyFunction:" in (ROOT / props["CodeUri"] / "Makefile").read_text()
    assert props["Architectures"] == [{"Ref": "Architecture"}]
    assert template["Parameters"]["Architecture"]["Default"] == "arm64"
    assert props["MemorySize"] == {"Ref": "MemorySize"} and props["Timeout"] >= 30


def test_the_catalog_table_is_on_demand_with_ttl_and_encryption(template):
    table = template["Resources"]["CatalogTable"]
    assert table["Type"] == "AWS::DynamoDB::Table"
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}


def test_iam_allows_exactly_the_calls_the_store_makes_on_this_table_only(function):
    # The DynamoDB calls in the store's source, as IAM actions: get_item -> dynamodb:GetItem.
    source = (ROOT / "shared" / "toolsearch" / "cache" / "dynamo.py").read_text(encoding="utf-8")
    called = {
        "dynamodb:" + "".join(part.title() for part in name.split("_"))
        for name in re.findall(r"client\.(\w+)\(", source)
    }
    statements = [s for policy in function["Properties"]["Policies"] for s in policy["Statement"]]
    assert len(statements) == 1
    (statement,) = statements
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == {"Fn::GetAtt": ["CatalogTable", "Arn"]}
    assert set(statement["Action"]) == called
    assert "*" not in str(statement)


def test_function_url_defaults_to_no_auth_with_iam_as_the_choice(template, function):
    url = function["Properties"]["FunctionUrlConfig"]
    assert url["AuthType"] == {"Ref": "FunctionUrlAuthType"}
    parameter = template["Parameters"]["FunctionUrlAuthType"]
    assert parameter["Default"] == "NONE"
    assert parameter["AllowedValues"] == ["NONE", "AWS_IAM"]


def test_a_public_function_url_has_both_invoke_permissions_on_the_alias(template):
    # SAM adds them only for a literal AuthType NONE; ours is a parameter, so the template has them.
    resources = template["Resources"]
    assert template["Conditions"]["PublicFunctionUrl"] == {
        "Fn::Equals": [{"Ref": "FunctionUrlAuthType"}, "NONE"]
    }
    url = resources["FunctionUrlPublicInvokeUrl"]
    invoke = resources["FunctionUrlPublicInvokeFunction"]
    for permission in (url, invoke):
        assert permission["Condition"] == "PublicFunctionUrl"
        assert permission["Properties"]["FunctionName"] == {"Ref": "ProxyFunction.Alias"}
        assert permission["Properties"]["Principal"] == "*"
    assert url["Properties"]["Action"] == "lambda:InvokeFunctionUrl"
    assert url["Properties"]["FunctionUrlAuthType"] == "NONE"
    assert invoke["Properties"]["Action"] == "lambda:InvokeFunction"
    assert invoke["Properties"]["InvokedViaFunctionUrl"] is True


def test_http_api_routes_mcp_the_well_known_metadata_and_the_catalog(function):
    routes = {
        (e["Properties"]["Method"], e["Properties"]["Path"])
        for e in function["Properties"]["Events"].values()
        if e["Type"] == "HttpApi"
    }
    assert routes == {
        ("POST", "/mcp"),
        ("GET", "/mcp"),
        ("DELETE", "/mcp"),
        ("GET", "/.well-known/{proxy+}"),
        ("GET", "/catalog"),
        ("POST", "/catalog/refresh"),
    }


def test_the_model_layer_is_built_from_layers_model(template, function):
    layer = template["Resources"]["ModelLayer"]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    assert layer["Properties"]["ContentUri"] == "layers/model"
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert "build-ModelLayer:" in (ROOT / "layers" / "model" / "Makefile").read_text()
    assert "python3.13" in layer["Properties"]["CompatibleRuntimes"]
    assert function["Properties"]["Layers"] == [{"Ref": "ModelLayer"}]


def test_environment_names_real_settings_and_defaults_parse(template, function):
    variables = function["Properties"]["Environment"]["Variables"]
    known = {settings_module.env_name(f.name) for f in settings_module.fields()}
    ours = {name for name in variables if name.startswith("TOOLSEARCH_")}
    assert ours <= known, ours - known
    assert variables["TOOLSEARCH_UPSTREAM"] == {"Ref": "UpstreamUrl"}
    assert variables["TOOLSEARCH_DYNAMODB_TABLE"] == {"Ref": "CatalogTable"}
    assert variables["POWERTOOLS_SERVICE_NAME"] == "toolsearch"  # the package's logger name
    assert "POWERTOOLS_METRICS_NAMESPACE" in variables
    # Each parameter's default, as Lambda would see it, is a valid setting value.
    parameters = template["Parameters"]
    environ = {}
    for name in ours:
        value = variables[name]
        if isinstance(value, dict) and "Ref" in value and value["Ref"] in parameters:
            environ[name] = str(parameters[value["Ref"]]["Default"])
    assert len(environ) >= 10
    settings = settings_module.from_env(environ)
    assert settings.catalog_memory_entries == int(parameters["CatalogMemoryEntries"]["Default"])


def test_outputs_give_both_urls(template):
    outputs = template["Outputs"]
    assert "ProxyFunctionUrl.FunctionUrl" in outputs["McpFunctionUrl"]["Value"]["Fn::Sub"]
    assert outputs["McpFunctionUrl"]["Value"]["Fn::Sub"].endswith("mcp")
    http = outputs["McpHttpApiUrl"]["Value"]["Fn::Sub"]
    assert "${ServerlessHttpApi}.execute-api" in http and http.endswith("/mcp")


def _requirement_names(lines: list[str]) -> set[str]:
    """Distribution names of requirement lines (comments and blanks skipped), normalised."""
    names = set()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def test_lambda_requirements_follow_the_project_minus_what_lambda_does_not_run():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = _requirement_names(project["dependencies"])
    folder = ROOT / "functions" / "proxy"
    lambda_deps = _requirement_names((folder / "requirements.txt").read_text().splitlines())
    no_deps = _requirement_names((folder / "requirements-nodeps.txt").read_text().splitlines())
    assert "boto3" not in lambda_deps | no_deps  # the runtime has it
    # uvicorn (with httptools and uvloop) serves `toolsearch serve`; model2vec is the reference
    # loader and fetch-model's.
    local_only = {"uvicorn", "httptools", "uvloop", "model2vec"}
    assert lambda_deps | no_deps == (declared - local_only) | {"tokenizers"}


def test_every_event_file_is_json_with_a_post_to_mcp():
    for path in sorted((ROOT / "events").glob("*.json")):
        evt = json.loads(path.read_text(encoding="utf-8"))
        method = evt.get("httpMethod") or evt["requestContext"]["http"]["method"]
        assert method == "POST", path.name
        assert evt.get("rawPath", evt.get("path")) == "/mcp", path.name


TRANSLATE = """
import json, sys
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

class NoManagedPolicies:
    def load(self):
        return {}

template = yaml_parse(open(sys.argv[1]).read())
template["Resources"]["ProxyFunction"]["Properties"]["CodeUri"] = "s3://bucket/function.zip"
template["Resources"]["ModelLayer"]["Properties"]["ContentUri"] = "s3://bucket/layer.zip"
print(json.dumps(transform(template, {}, NoManagedPolicies())))
"""


@pytest.mark.skipif(not SAM.exists(), reason="SAM CLI not installed in .cache/sam-venv")
def test_sam_translates_to_a_url_and_api_on_the_live_alias():
    env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1")
    done = subprocess.run(
        [str(SAM.parent / "python"), "-c", TRANSLATE, str(TEMPLATE)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    resources = json.loads(done.stdout)["Resources"]
    types = {name: r["Type"] for name, r in resources.items()}
    assert types["ProxyFunctionUrl"] == "AWS::Lambda::Url"
    assert types["ProxyFunctionAliaslive"] == "AWS::Lambda::Alias"
    assert types["ServerlessHttpApi"] == "AWS::ApiGatewayV2::Api"
    assert resources["ProxyFunctionUrl"]["Properties"]["TargetFunctionArn"] == {
        "Ref": "ProxyFunctionAliaslive"
    }
    for name in ("FunctionUrlPublicInvokeUrl", "FunctionUrlPublicInvokeFunction"):
        assert resources[name]["Properties"]["FunctionName"] == {"Ref": "ProxyFunctionAliaslive"}


@pytest.mark.skipif(not SAM.exists(), reason="SAM CLI not installed in .cache/sam-venv")
def test_sam_validate_lint_passes():
    env = dict(os.environ, SAM_CLI_TELEMETRY="0")
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    done = subprocess.run(
        [str(SAM), "validate", "--lint", "--template-file", str(TEMPLATE)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr

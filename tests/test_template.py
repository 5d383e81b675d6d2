"""template.yaml and the Lambda build inputs: the properties the deployment relies on.

The template is read with PyYAML and a loader that accepts CloudFormation's
short tags (!Ref, !Sub, !GetAtt, ...), and transformed by the SAM translator
(what CloudFormation runs on deploy) in .cache/template-tools, which
`scripts/bootstrap.sh --test` installs (scripts/install-template-tools.sh) with
cfn-lint; cfn-lint then reads both the template (as `sam validate --lint` does)
and its transformed form. The transformed form is also evaluated for given
parameters (conditions and Fn::If resolved), so a test can ask what a stack
deployed with AWS_IAM actually exposes.
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
from toolsearch.server.local_server import CORS_ALLOW_HEADERS, CORS_EXPOSE_HEADERS

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
TOOLS = ROOT / ".cache" / "template-tools" / "bin"
MISSING_TOOLS = "the template tools are missing: run scripts/install-template-tools.sh (make test does)"


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
    # Encrypted at rest either way; by default with DynamoDB's own key, which KMS does not bill.
    assert props["SSESpecification"] == {"SSEEnabled": {"Fn::If": ["UseKmsKey", True, False]}}
    assert template["Parameters"]["TableEncryption"]["Default"] == "AwsOwnedKey"
    assert template["Conditions"]["UseKmsKey"] == {
        "Fn::Equals": [{"Ref": "TableEncryption"}, "AwsManagedKey"]
    }


def test_iam_allows_exactly_the_calls_the_store_makes_on_this_table_only(function):
    # The DynamoDB calls in the store's source, as IAM actions: get_item -> dynamodb:GetItem.
    source = (ROOT / "shared" / "toolsearch" / "catalogs" / "cache" / "dynamo.py").read_text(encoding="utf-8")
    called = {
        "dynamodb:" + "".join(part.title() for part in name.split("_"))
        for name in re.findall(r"client\.(\w+)\(", source)
    }
    # The policies that always apply (the client secret's are conditional: see below).
    policies = [policy for policy in function["Properties"]["Policies"] if "Statement" in policy]
    statements = [s for policy in policies for s in policy["Statement"]]
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


def test_http_api_routes_mcp_the_well_known_metadata_and_the_catalog(template):
    resources = template["Resources"]
    routes = {
        r["Properties"]["RouteKey"] for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Route"
    }
    assert routes == {
        "POST /mcp",
        "GET /mcp",
        "DELETE /mcp",
        "GET /.well-known/{proxy+}",
        "GET /catalog",
        "POST /catalog/refresh",
    }
    integration = resources["HttpApiIntegration"]["Properties"]
    assert integration["IntegrationUri"] == {"Ref": "ProxyFunction.Alias"}
    assert integration["PayloadFormatVersion"] == "2.0"


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
    # Fair use can be tuned per stack (docs/gateways.md), at the settings' own defaults.
    defaults = settings_module.from_env({})
    assert settings.caller_rate == defaults.caller_rate == float(parameters["CallerRate"]["Default"])
    assert settings.caller_burst == defaults.caller_burst == int(parameters["CallerBurst"]["Default"])
    assert settings.caller_concurrency == defaults.caller_concurrency
    assert defaults.caller_concurrency == int(parameters["CallerConcurrency"]["Default"])


def test_outputs_give_both_urls(template):
    outputs = template["Outputs"]
    assert "ProxyFunctionUrl.FunctionUrl" in outputs["McpFunctionUrl"]["Value"]["Fn::Sub"]
    assert outputs["McpFunctionUrl"]["Value"]["Fn::Sub"].endswith("mcp")
    http = outputs["McpHttpApiUrl"]["Value"]["Fn::Sub"]
    assert "${HttpApi}.execute-api" in http and http.endswith("/mcp")


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


def _requirements(lines: list[str]) -> dict[str, str]:
    """{normalised name: specifier text without spaces} of requirement lines."""
    found = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            name = re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]
            found[name.lower().replace("_", "-")] = line[len(name) :].replace(" ", "")
    return found


def test_lambda_requirements_pin_what_the_project_pins():
    # Names alone let `tokenizers>=0.21,<1` (Lambda) drift from `>=0.23,<0.24` (the project).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = _requirements(project["dependencies"])
    folder = ROOT / "functions" / "proxy"
    for name in ("requirements.txt", "requirements-nodeps.txt"):
        for dep, spec in _requirements((folder / name).read_text().splitlines()).items():
            assert spec == declared[dep], f"{name}: {dep}{spec}, pyproject.toml: {dep}{declared[dep]}"


def test_the_prepared_model_and_its_raw_download_are_ignored_by_git():
    # fetch-model writes ./model and, with --int8, the raw 512 MB download beside it (model.source).
    for path in ("model/model.safetensors", "model.source/model.safetensors"):
        done = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
        assert done.returncode == 0, f"{path} is not ignored by git"


# -- the transformed template: what CloudFormation deploys


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


def _tool(name: str) -> str:
    path = TOOLS / name
    assert path.exists(), MISSING_TOOLS
    return str(path)


def transform(path: Path) -> dict[str, Any]:
    env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1")
    done = subprocess.run(
        [_tool("python"), "-c", TRANSLATE, str(path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    return transform(TEMPLATE)


_NO_VALUE = {"Ref": "AWS::NoValue"}


def deployed(transformed: dict[str, Any], **overrides: str) -> dict[str, Any]:
    """The transformed template's resources as deployed with these parameters (defaults otherwise):
    conditions decided, resources whose condition is false dropped, Fn::If and parameter Refs
    resolved, AWS::NoValue removed. Other intrinsics stay as they are."""
    params = {name: str(p.get("Default", "")) for name, p in transformed["Parameters"].items()}
    unknown = set(overrides) - set(params)
    assert not unknown, unknown
    params.update(overrides)
    conditions = transformed.get("Conditions", {})

    def condition(name: str) -> bool:
        return bool(value(conditions[name]))

    def computed(node: Any) -> Any:
        if not isinstance(node, dict):
            return value(node)
        ((key, arg),) = node.items()
        if key == "Fn::Select":
            return computed(arg[1])[int(computed(arg[0]))]
        if key == "Fn::Split":
            return str(computed(arg[1])).split(str(computed(arg[0])))
        if key == "Fn::Join":
            return str(computed(arg[0])).join(str(computed(part)) for part in arg[1])
        return value(node)

    def value(node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (value(item) for item in node) if v != _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref" and arg in params:
                return params[arg]
            if key == "Fn::Equals":
                return str(value(arg[0])) == str(value(arg[1]))
            if key == "Fn::Not":
                return not value(arg[0])
            if key == "Fn::And":
                return all(value(a) for a in arg)
            if key == "Fn::Or":
                return any(value(a) for a in arg)
            if key == "Condition":
                return condition(arg)
            if key == "Fn::If":
                return value(arg[1] if condition(arg[0]) else arg[2])
            if key == "Fn::Select":  # as the secret's conditions use it: Select of a Split of a Join
                return computed(node)
        return {k: v for k, v in ((k, value(v)) for k, v in node.items()) if v != _NO_VALUE}

    return {
        name: value(resource)
        for name, resource in transformed["Resources"].items()
        if "Condition" not in resource or condition(resource["Condition"])
    }


def entry_points(resources: dict[str, Any]) -> dict[str, str]:
    """{resource: its authorization} for everything that lets a request from the internet reach
    the function. A kind of entry point this test does not know fails it, so that a new one is
    looked at rather than passed."""
    found = {}
    for name, resource in resources.items():
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::Lambda::Url":
            found[name] = props["AuthType"]
        elif kind == "AWS::ApiGatewayV2::Route":
            found[name] = props.get("AuthorizationType", "NONE")
        elif kind == "AWS::ApiGatewayV2::Api":
            # Routes inside an OpenAPI body or a quick-create target are not Route resources.
            assert not {"Body", "BodyS3Location", "Target"} & set(props), f"{name}: routes not declared"
        elif kind == "AWS::Lambda::Permission" and props.get("Principal") == "*":
            found[name] = "PUBLIC"
        else:
            assert not kind.startswith(("AWS::ApiGateway::", "AWS::ElasticLoadBalancingV2::")), kind
    return found


def test_with_aws_iam_every_public_entry_point_asks_for_sigv4(transformed):
    iam = entry_points(deployed(transformed, FunctionUrlAuthType="AWS_IAM"))
    assert "ProxyFunctionUrl" in iam and sum(k.startswith("Route") for k in iam) == 6
    assert set(iam.values()) == {"AWS_IAM"}, iam


def test_with_none_every_entry_point_is_open_and_the_url_may_be_invoked(transformed):
    public = entry_points(deployed(transformed, FunctionUrlAuthType="NONE"))
    assert public.pop("FunctionUrlPublicInvokeUrl") == "PUBLIC"
    assert public.pop("FunctionUrlPublicInvokeFunction") == "PUBLIC"
    assert set(public.values()) == {"NONE"}, public


def test_sam_translates_to_a_url_and_api_on_the_live_alias(transformed):
    resources = transformed["Resources"]
    types = {name: r["Type"] for name, r in resources.items()}
    assert types["ProxyFunctionUrl"] == "AWS::Lambda::Url"
    assert types["ProxyFunctionAliaslive"] == "AWS::Lambda::Alias"
    assert types["HttpApi"] == "AWS::ApiGatewayV2::Api"
    alias = {"Ref": "ProxyFunctionAliaslive"}
    assert resources["ProxyFunctionUrl"]["Properties"]["TargetFunctionArn"] == alias
    assert resources["HttpApiIntegration"]["Properties"]["IntegrationUri"] == alias
    for name in ("FunctionUrlPublicInvokeUrl", "FunctionUrlPublicInvokeFunction", "HttpApiInvokeFunction"):
        assert resources[name]["Properties"]["FunctionName"] == alias


def test_the_caller_policy_grants_exactly_what_signed_calls_need(transformed):
    with_iam = deployed(transformed, FunctionUrlAuthType="AWS_IAM")
    assert "McpCallerPolicy" not in deployed(transformed)
    statements = with_iam["McpCallerPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    actions = {s["Action"]: s["Resource"] for s in statements}
    assert actions["lambda:InvokeFunctionUrl"] == {"Ref": "ProxyFunctionAliaslive"}
    assert actions["lambda:InvokeFunction"] == {"Ref": "ProxyFunctionAliaslive"}
    assert "${HttpApi}/*" in actions["execute-api:Invoke"]["Fn::Sub"]
    assert len(statements) == 3


# -- signing: what an MCP client behind mcp-proxy-for-aws sends, checked as AWS checks SigV4

# The service each kind of entry point verifies SigV4 for (AWS documentation: function URLs sign
# for `lambda`, API Gateway for `execute-api`).
SIGNING_SERVICE = {"AWS::Lambda::Url": "lambda", "AWS::ApiGatewayV2::Route": "execute-api"}
HOSTS = {
    "AWS::Lambda::Url": "abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws",
    "AWS::ApiGatewayV2::Route": "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com",
}
KEY_ID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def sign_like_mcp_proxy_for_aws(request, service: str, region: str) -> None:
    """As mcp-proxy-for-aws 1.7 signs each request (its SigV4HTTPXAuth): botocore's SigV4Auth over
    the httpx request's method, URL, body and headers less `connection`, headers copied back."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    headers = dict(request.headers)
    headers.pop("connection", None)
    signed = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
    SigV4Auth(Credentials(KEY_ID, SECRET), service, region).add_auth(signed)
    request.headers.update(dict(signed.headers))


def sigv4_accepts(request, service: str, region: str) -> bool:
    """An independent SigV4 check (AWS's published algorithm) of what the server receives."""
    import hashlib
    import hmac
    from urllib.parse import quote

    def mac(key: bytes, text: str) -> bytes:
        return hmac.new(key, text.encode(), hashlib.sha256).digest()

    fields = dict(
        part.strip().split("=", 1) for part in request.headers["authorization"].split(" ", 1)[1].split(",")
    )
    key_id, date, scope_region, scope_service, terminal = fields["Credential"].split("/")
    if (key_id, scope_region, scope_service, terminal) != (KEY_ID, region, service, "aws4_request"):
        return False
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed:
        return False
    url = request.url
    query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(url.params.multi_items())
    )
    canonical = "\n".join(
        [
            request.method,
            quote(url.path, safe="/-_.~"),
            query,
            "".join(f"{h}:{' '.join(request.headers[h].split())}\n" for h in signed),
            ";".join(signed),
            hashlib.sha256(request.content).hexdigest(),
        ]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            request.headers["x-amz-date"],
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = mac(mac(mac(mac(f"AWS4{SECRET}".encode(), date), region), service), "aws4_request")
    return hmac.compare_digest(
        hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), fields["Signature"]
    )


def _mcp_request(host: str):
    import httpx

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    return httpx.Request(
        "POST",
        f"https://{host}/mcp",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
        },
        content=body,
    )


def test_a_request_signed_as_mcp_proxy_for_aws_signs_it_passes_each_iam_entry_point(transformed):
    resources = deployed(transformed, FunctionUrlAuthType="AWS_IAM")
    kinds = {resources[name]["Type"] for name in entry_points(resources)}
    assert kinds == set(SIGNING_SERVICE)
    for kind in kinds:
        service = SIGNING_SERVICE[kind]
        request = _mcp_request(HOSTS[kind])
        sign_like_mcp_proxy_for_aws(request, service, "eu-west-1")
        assert sigv4_accepts(request, service, "eu-west-1"), kind
        # The check is not vacuous: another body, service or region is refused.
        tampered = _mcp_request(HOSTS[kind])
        tampered.headers.update({k: v for k, v in request.headers.items() if k.startswith(("x-amz", "auth"))})
        tampered._content = request.content.replace(b"tools/list", b"tools/call")
        assert not sigv4_accepts(tampered, service, "eu-west-1")
        assert not sigv4_accepts(request, service, "us-east-1")
        # Without --service, mcp-proxy-for-aws 1.7 takes the host's first label as the service
        # (it recognises only *.api.aws and bedrock-agentcore hosts): such a signature is refused,
        # which is why docs/clients.md passes --service and --region.
        guessed = _mcp_request(HOSTS[kind])
        sign_like_mcp_proxy_for_aws(guessed, HOSTS[kind].split(".")[0], "eu-west-1")
        assert not sigv4_accepts(guessed, service, "eu-west-1")


# -- limits: what a flood can cost, and who hears about failures


def test_the_function_has_a_ceiling_on_concurrency_by_default(template, function):
    props = function["Properties"]
    assert props["ReservedConcurrentExecutions"] == {
        "Fn::If": ["HasReservedConcurrency", {"Ref": "ReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
    }
    parameter = template["Parameters"]["ReservedConcurrency"]
    assert 0 < parameter["Default"] <= 100 and parameter["MinValue"] == 0


def test_the_http_api_is_throttled_and_access_logged_without_personal_data(template, transformed):
    stage = deployed(transformed)["HttpApiStage"]["Properties"]
    parameters = template["Parameters"]
    assert stage["DefaultRouteSettings"] == {
        "ThrottlingRateLimit": str(parameters["ApiThrottlingRateLimit"]["Default"]),
        "ThrottlingBurstLimit": str(parameters["ApiThrottlingBurstLimit"]["Default"]),
    }
    logs = stage["AccessLogSettings"]
    assert logs["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    entry = json.loads(logs["Format"])  # one JSON object per request
    assert {"requestId", "route", "status", "latencyMs"} <= set(entry)
    for private in ("sourceIp", "userAgent", "identity", "header", "authorizer"):
        assert private not in logs["Format"], private
    group = template["Resources"]["ApiAccessLogGroup"]["Properties"]
    assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def _alarm_metrics(alarm: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    props = alarm["Properties"]
    if "MetricName" in props:
        stats = [{"Namespace": props["Namespace"], "MetricName": props["MetricName"], **props}]
    else:
        stats = [m["MetricStat"]["Metric"] for m in props["Metrics"] if "MetricStat" in m]
    return [
        (s["Namespace"], s["MetricName"], {d["Name"]: d["Value"] for d in s.get("Dimensions", [])})
        for s in stats
    ]


def test_alarms_watch_errors_throttles_api_5xx_and_dynamodb(template):
    alarms = {n: r for n, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    watched = {(json.dumps(ns), name) for alarm in alarms.values() for ns, name, _ in _alarm_metrics(alarm)}
    expected = [
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
        ("AWS/ApiGateway", "5xx"),
        ({"Ref": "MetricsNamespace"}, "catalog"),
    ]
    assert {(json.dumps(ns), name) for ns, name in expected} <= watched
    topic = template["Resources"]["AlarmTopic"]
    assert topic["Condition"] == "HasAlarmEmail"
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == {
            "Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]
        }
        assert alarm["Properties"]["TreatMissingData"] == "notBreaching"


def test_the_dynamodb_alarm_reads_the_metrics_the_lambda_handler_writes(template):
    # The alarm must name exactly what EMF publishes: namespace, metric, and every dimension.
    import io

    from toolsearch.aws.lambda_support import EmfMetrics

    (alarm,) = [r for n, r in template["Resources"].items() if n == "DynamoDbFailuresAlarm"]
    published = set()
    for event in ("dynamo_error", "dynamo_throttled"):
        sink = EmfMetrics(namespace="NS", service="toolsearch", stream=io.StringIO())
        sink("catalog", 1, {"event": event})  # what app.py's on_event hook counts for the store
        (document,) = sink.flush()
        (metrics,) = document["_aws"]["CloudWatchMetrics"]
        (names,) = metrics["Dimensions"]
        published.add((metrics["Metrics"][0]["Name"], tuple(sorted((n, document[n]) for n in names))))
    assert (
        template["Resources"]["ProxyFunction"]["Properties"]["Environment"]["Variables"][
            "POWERTOOLS_SERVICE_NAME"
        ]
        == "toolsearch"
    )
    watched = {
        (name, tuple(sorted(dims.items())))
        for ns, name, dims in _alarm_metrics(alarm)
        if ns == {"Ref": "MetricsNamespace"}
    }
    assert watched == published
    source = (ROOT / "shared" / "toolsearch" / "catalogs" / "cache" / "dynamo.py").read_text(encoding="utf-8")
    assert '"dynamo_throttled" if throttled else "dynamo_error"' in source


def test_tracing_is_a_switch_off_by_default(template, function):
    assert function["Properties"]["Tracing"] == {"Fn::If": ["UseTracing", "Active", "PassThrough"]}
    assert template["Parameters"]["Tracing"]["Default"] == "Disabled"


# -- CORS: browsers (the MCP Inspector) preflight with OPTIONS


def test_allowed_origins_get_cors_on_both_entry_points_and_nothing_otherwise(transformed):
    origins = "http://localhost:6274,https://app.example.com"
    for resources in (deployed(transformed), deployed(transformed, AllowedOrigins="")):
        assert "Cors" not in resources["ProxyFunctionUrl"]["Properties"]
        assert "CorsConfiguration" not in resources["HttpApi"]["Properties"]
    resources = deployed(transformed, AllowedOrigins=origins)
    routes = {
        r["Properties"]["RouteKey"].split()[0]
        for r in resources.values()
        if r["Type"] == "AWS::ApiGatewayV2::Route"
    }
    for cors in (
        resources["ProxyFunctionUrl"]["Properties"]["Cors"],
        resources["HttpApi"]["Properties"]["CorsConfiguration"],
    ):
        assert cors["AllowOrigins"] == {"Fn::Split": [",", origins]}
        assert set(cors["AllowMethods"]) == routes
        # What MCP clients send (Mcp-Name on every 2026-07-28 tools/call), and what SigV4 signing
        # adds: the same lists `toolsearch serve` answers preflights with.
        assert {h.lower() for h in cors["AllowHeaders"]} == set(CORS_ALLOW_HEADERS)
        assert {h.lower() for h in cors["ExposeHeaders"]} == set(CORS_EXPOSE_HEADERS)
        assert "AllowCredentials" not in cors  # tokens travel in Authorization, never in cookies


# -- the linters


def _cfn_lint(path: Path) -> None:
    done = subprocess.run(
        [_tool("cfn-lint"), "--format", "parseable", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Exit codes are bits: 2 errors, 4 warnings, 8 informational. Errors and warnings fail.
    assert done.returncode & 6 == 0, done.stdout + done.stderr


def test_cfn_lint_passes_on_the_template_as_sam_validate_lint_reads_it():
    _cfn_lint(TEMPLATE)


def test_cfn_lint_passes_on_the_transformed_template(transformed, tmp_path):
    path = tmp_path / "transformed.json"
    path.write_text(json.dumps(transformed), encoding="utf-8")
    _cfn_lint(path)


SECRET_ARNS = {
    "secretsmanager": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:toolsearch-client-AbCdEf",
    "ssm": "arn:aws:ssm:eu-west-1:123456789012:parameter/toolsearch/client-secret",
}


def _secret_statements(resources: dict[str, Any]) -> list[dict[str, Any]]:
    policies = resources["ProxyFunctionRole"]["Properties"]["Policies"]
    statements = [s for policy in policies for s in policy["PolicyDocument"]["Statement"]]
    return [s for s in statements if not str(s.get("Action", "")).startswith("['dynamodb")]


@pytest.mark.parametrize("store", ["none", "secretsmanager", "ssm"])
def test_exchange_settings_are_parameters_and_only_the_named_secret_may_be_read(transformed, store):
    arn = SECRET_ARNS.get(store, "")
    resources = deployed(
        transformed,
        AuthMode="exchange",
        OAuthIssuer="https://login.example.com/",
        OAuthJwksUrl="https://login.example.com/jwks",
        OAuthTokenUrl="https://login.example.com/token",
        OAuthClientId="toolsearch-proxy",
        OAuthClientSecretArn=arn,
        PublicUrl="https://proxy.example.com",
        ExchangeAudience="crm-api",
        ExchangeScope="crm.read",
        OAuthClientAuth="client_secret_post",
        IntrospectionCacheTtlSeconds="0",
        OAuthTimeoutSeconds="3",
    )
    variables = resources["ProxyFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["TOOLSEARCH_AUTH_MODE"] == "exchange"
    assert variables["TOOLSEARCH_OAUTH_CLIENT_SECRET_ARN"] == arn
    assert "TOOLSEARCH_OAUTH_CLIENT_SECRET" not in variables  # the secret never sits in the environment
    settings = settings_module.from_env({k: str(v) for k, v in variables.items() if isinstance(v, str)})
    assert settings.auth_mode == "exchange" and settings.oauth_client_secret_arn == arn
    assert (settings.exchange_audience, settings.exchange_scope) == ("crm-api", "crm.read")
    assert settings.oauth_client_auth == "client_secret_post"
    assert (settings.introspection_cache_ttl, settings.oauth_timeout) == (0.0, 3.0)
    statements = _secret_statements(resources)
    if store == "none":
        assert statements == []
        return
    (statement,) = statements
    action = {"secretsmanager": "secretsmanager:GetSecretValue", "ssm": "ssm:GetParameter"}[store]
    assert statement == {"Sid": statement["Sid"], "Effect": "Allow", "Action": action, "Resource": arn}


def test_forwarding_is_the_default_and_reads_no_secret(transformed):
    resources = deployed(transformed)
    assert (
        resources["ProxyFunction"]["Properties"]["Environment"]["Variables"]["TOOLSEARCH_AUTH_MODE"]
        == "forward"
    )
    assert _secret_statements(resources) == []

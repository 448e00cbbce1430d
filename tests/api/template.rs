//! `template.yaml` and the `Cargo.toml` watch router equal their rendering from the route table
//! (`cargo run -- render`, `src/render.rs`, whose unit tests hold the rules every policy keeps);
//! the hand-written rest of the template against the code's table schema, the runner's CORS and
//! the operations it must watch; `events/` and the guide's route tables against the route table.

use serde_norway::value::TaggedValue;
use serde_norway::{Mapping, Value};
use singlet_functions::context::EVENT_BUS_VAR;
use singlet_functions::events::mapping;
use singlet_functions::lambda::FUNCTION_VAR;
use singlet_functions::routes::{ROUTES, SCHEDULED, STREAMED};
use singlet_shared::schema::{self, INDEXES, Projection};
use std::collections::{BTreeMap, BTreeSet};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The template as CloudFormation reads it: short-form intrinsics (`!Ref X`, `!GetAtt X.Arn`,
/// `!Sub "..."`) in their long form (`{Ref: X}`, `{Fn::GetAtt: [X, Arn]}`, `{Fn::Sub: "..."}`).
fn template() -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/template.yaml")).unwrap();
    long_form(serde_norway::from_str(&text).unwrap())
}

fn long_form(value: Value) -> Value {
    match value {
        Value::Tagged(tagged) => {
            let TaggedValue { tag, value } = *tagged;
            let tag = tag.to_string();
            let name = tag.trim_start_matches('!');
            let key = match name {
                "Ref" | "Condition" => name.to_owned(),
                _ => format!("Fn::{name}"),
            };
            let value = match (name, value) {
                ("GetAtt", Value::String(path)) => {
                    let (resource, attribute) = path.split_once('.').unwrap();
                    Value::Sequence(vec![resource.into(), attribute.into()])
                }
                (_, value) => long_form(value),
            };
            let mut mapping = Mapping::new();
            mapping.insert(key.into(), value);
            Value::Mapping(mapping)
        }
        Value::Mapping(mapping) => Value::Mapping(
            mapping
                .into_iter()
                .map(|(k, v)| (k, long_form(v)))
                .collect(),
        ),
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(long_form).collect()),
        other => other,
    }
}

/// `{Ref: name}`.
fn reference(name: &str) -> Value {
    let mut mapping = Mapping::new();
    mapping.insert("Ref".into(), name.into());
    Value::Mapping(mapping)
}

/// `{Fn::GetAtt: [resource, attribute]}`.
fn get_att(resource: &str, attribute: &str) -> Value {
    let mut mapping = Mapping::new();
    mapping.insert(
        "Fn::GetAtt".into(),
        Value::Sequence(vec![resource.into(), attribute.into()]),
    );
    Value::Mapping(mapping)
}

/// `{Fn::Sub: text}`.
fn sub(text: &str) -> Value {
    let mut mapping = Mapping::new();
    mapping.insert("Fn::Sub".into(), text.into());
    Value::Mapping(mapping)
}

/// The logical id `{Ref: X}` or `{Fn::GetAtt: [X, _]}` names.
fn target(value: &Value) -> Option<&str> {
    value["Ref"]
        .as_str()
        .or_else(|| value["Fn::GetAtt"][0].as_str())
}

/// A value or a one-element list of it, as a list.
fn list(value: &Value) -> Vec<Value> {
    match value {
        Value::Sequence(items) => items.clone(),
        Value::Null => Vec::new(),
        other => vec![other.clone()],
    }
}

fn resources(template: &Value, kind: &str) -> Vec<(String, Value)> {
    template["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .map(|(name, r)| (name.as_str().unwrap().to_owned(), r.clone()))
        .collect()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Each function's block (its policy, `SINGLET_FUNCTION`, events, log group and alarms), the watch
/// router and `events/env.json` are what `cargo run -- render` makes of the route table: a route,
/// an entity it touches or an index it queries changed in the code and not rendered fails here.
#[test]
fn every_rendered_file_is_its_rendering() {
    let files = singlet::render::render(std::path::Path::new(ROOT)).unwrap();
    for file in files {
        assert!(
            file.is_current(),
            "{} differs from its rendering: run `cargo run -- render`",
            file.path.display()
        );
    }
}

#[test]
fn the_table_is_the_schema() {
    let template = template();
    let tables = resources(&template, "AWS::DynamoDB::Table");
    assert_eq!(tables.len(), 1, "one table");
    let table = &tables[0].1["Properties"];
    assert_eq!(table["BillingMode"], "PAY_PER_REQUEST");
    assert_eq!(
        table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"],
        true
    );
    assert_eq!(
        table["TimeToLiveSpecification"]["AttributeName"],
        schema::TTL_ATTRIBUTE
    );
    let declared: BTreeSet<(String, String)> = table["AttributeDefinitions"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["AttributeName"].as_str().unwrap().into(),
                a["AttributeType"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = schema::key_attributes()
        .into_iter()
        .map(|a| (a.to_owned(), "S".to_owned()))
        .collect();
    assert_eq!(declared, expected);
    let key = |ks: &Value| -> Vec<(String, String)> {
        ks.as_sequence()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["AttributeName"].as_str().unwrap().into(),
                    k["KeyType"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let pair = |pk: &str, sk: &str| {
        vec![
            (pk.to_owned(), "HASH".to_owned()),
            (sk.to_owned(), "RANGE".to_owned()),
        ]
    };
    assert_eq!(key(&table["KeySchema"]), pair(schema::PK, schema::SK));
    let indexes = table["GlobalSecondaryIndexes"].as_sequence().unwrap();
    assert_eq!(indexes.len(), INDEXES.len());
    for (declared, index) in indexes.iter().zip(INDEXES) {
        assert_eq!(declared["IndexName"], index.name);
        assert_eq!(key(&declared["KeySchema"]), pair(index.pk, index.sk));
        let projection = match index.projection {
            Projection::All => "ALL",
            Projection::KeysOnly => "KEYS_ONLY",
        };
        assert_eq!(
            declared["Projection"]["ProjectionType"], projection,
            "{}",
            index.name
        );
    }
}

/// `sam build` builds functions once per distinct CodeUri, Metadata, Handler, Runtime and
/// architecture (SAM CLI's `FunctionBuildDefinition`): with all of them equal, the route and
/// scheduled functions share one build of `singlet-lambda`; the stream-fed publisher runs the
/// events bootstrap, one build of `singlet-events-lambda`, so that its EventBridge and S3 clients
/// stay out of the API's.
#[test]
fn every_function_runs_the_one_binary_built_once() {
    let template = template();
    let manifest = std::fs::read_to_string(format!("{ROOT}/functions/Cargo.toml")).unwrap();
    for (binary, path) in [
        ("singlet-lambda", "src/main.rs"),
        ("singlet-events-lambda", "src/events_main.rs"),
    ] {
        assert!(
            manifest.contains(&format!("[[bin]]\nname = \"{binary}\"\npath = \"{path}\"")),
            "functions/Cargo.toml declares the {binary} binary"
        );
    }
    assert!(
        !std::path::Path::new(&format!("{ROOT}/functions/src/bin")).exists(),
        "functions/src/bin would add a build per binary"
    );
    let build_of = |binary: &str| -> Value {
        serde_norway::from_str(&format!(
            "{{BuildMethod: rust-cargolambda, BuildProperties: {{Binary: {binary}}}}}"
        ))
        .unwrap()
    };
    let mut publishers = 0;
    for (name, served, function) in functions(&template) {
        let binary = if singlet_functions::routes::streamed(&served).is_some() {
            publishers += 1;
            "singlet-events-lambda"
        } else {
            "singlet-lambda"
        };
        assert_eq!(function["Metadata"], build_of(binary), "{name}'s Metadata");
        assert_eq!(function["Properties"]["CodeUri"], ".", "{name}");
        for own in ["Handler", "Runtime", "Architectures"] {
            assert!(
                function["Properties"].get(own).is_none(),
                "{name} sets its own {own}: it would build on its own"
            );
        }
    }
    assert_eq!(
        publishers,
        singlet_functions::routes::STREAMED.len(),
        "every stream-fed function runs the events bootstrap"
    );
    let globals = &template["Globals"]["Function"];
    assert_eq!(globals["Handler"], "bootstrap");
    assert_eq!(globals["Runtime"], "provided.al2023");
    let arm64: Value = serde_norway::from_str("[arm64]").unwrap();
    assert_eq!(globals["Architectures"], arm64);
}

#[test]
fn every_function_has_an_event_and_a_line_in_the_docs() {
    // The README and the guide: each domain's page lists its routes.
    let docs: String = crate::docs::in_reading_order()
        .into_iter()
        .map(|page| page.text)
        .collect();
    for route in ROUTES {
        let event = std::fs::read_to_string(format!("{ROOT}/events/{}.json", route.function))
            .unwrap_or_else(|_| panic!("events/{}.json is missing", route.function));
        let event: serde_json::Value = serde_json::from_str(&event).unwrap();
        assert_eq!(
            event["routeKey"],
            route.key(),
            "events/{}.json",
            route.function
        );
        assert_eq!(event["requestContext"]["http"]["method"], route.method);
        assert!(
            docs.contains(&format!("`{}`", route.key())),
            "neither the README nor the guide lists `{}`",
            route.key()
        );
    }
}

/// The function a template function serves: its `SINGLET_FUNCTION`.
fn served(function: &Value) -> String {
    function["Properties"]["Environment"]["Variables"][FUNCTION_VAR]
        .as_str()
        .unwrap_or_else(|| panic!("every function sets {FUNCTION_VAR}"))
        .to_owned()
}

/// The logical id of the stack's tools function, which runs a binary of its own
/// (`singlet-tools-lambda`) and serves no route: tested by `tools_function_and_state_machine`.
const TOOLS_FUNCTION: &str = "TableToolsFunction";

/// The logical id of the tools check function (fsck's judge on AWS): the tools' binary too.
const TOOLS_CHECK_FUNCTION: &str = "TableToolsCheckFunction";

/// Every API `AWS::Serverless::Function`: all but the tools functions.
fn api_functions(template: &Value) -> Vec<(String, Value)> {
    resources(template, "AWS::Serverless::Function")
        .into_iter()
        .filter(|(name, _)| name != TOOLS_FUNCTION && name != TOOLS_CHECK_FUNCTION)
        .collect()
}

/// Every API `AWS::Serverless::Function`, with the name of the function it serves.
fn functions(template: &Value) -> Vec<(String, String, Value)> {
    api_functions(template)
        .into_iter()
        .map(|(logical, function)| {
            let name = served(&function);
            (logical, name, function)
        })
        .collect()
}

/// The one metric an alarm watches, or each metric of its metric-math expression.
fn watched(alarm: &Value) -> Vec<Value> {
    let properties = &alarm["Properties"];
    if properties["MetricName"].is_string() {
        return vec![properties.clone()];
    }
    list(&properties["Metrics"])
        .into_iter()
        .filter(|m| m["MetricStat"].is_mapping())
        .map(|m| m["MetricStat"]["Metric"].clone())
        .collect()
}

fn dimension<'a>(metric: &'a Value, name: &str) -> Option<&'a Value> {
    metric["Dimensions"]
        .as_sequence()?
        .iter()
        .find(|d| d["Name"] == name)
        .map(|d| &d["Value"])
}

/// The alarms on `namespace`/`metric` whose dimension `name` is `value`.
fn alarms_watching(
    template: &Value,
    namespace: &str,
    metric: &str,
    name: &str,
    value: &Value,
) -> Vec<Value> {
    resources(template, "AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|(_, alarm)| alarm)
        .filter(|alarm| {
            watched(alarm).iter().any(|m| {
                m["Namespace"] == namespace
                    && m["MetricName"] == metric
                    && dimension(m, name) == Some(value)
            })
        })
        .collect()
}

fn alarms_on(template: &Value, namespace: &str, metric: &str, name: &str, value: &Value) -> usize {
    alarms_watching(template, namespace, metric, name, value).len()
}

/// The function `logical` (`who` in a failure) has one alarm on its Lambda `Errors` and one on
/// its `Throttles`.
fn assert_one_errors_and_one_throttles_alarm(template: &Value, logical: &str, who: &str) {
    for metric in ["Errors", "Throttles"] {
        assert_eq!(
            alarms_on(
                template,
                "AWS/Lambda",
                metric,
                "FunctionName",
                &reference(logical)
            ),
            1,
            "{who} has one {metric} alarm"
        );
    }
}

/// Whether a metric-math alarm adds up all its metrics, each `FILL(id, 0)`: a metric with no
/// datapoint in a period (DynamoDB reports no `ThrottledRequests` for an operation nobody was
/// throttled on) would otherwise make the whole sum missing, and the alarm would never fire.
fn sums_its_metrics_with_gaps_as_zero(alarm: &Value) -> bool {
    let metrics = list(&alarm["Properties"]["Metrics"]);
    let expressions: Vec<&str> = metrics
        .iter()
        .filter_map(|m| m["Expression"].as_str())
        .collect();
    let [expression] = expressions[..] else {
        return false;
    };
    let terms: BTreeSet<String> = expression
        .split('+')
        .map(|term| term.trim().to_owned())
        .collect();
    let filled: BTreeSet<String> = metrics
        .iter()
        .filter(|m| m["MetricStat"].is_mapping())
        .map(|m| format!("FILL({}, 0)", m["Id"].as_str().unwrap()))
        .collect();
    terms == filled
}

/// The DynamoDB operations the functions call, as CloudWatch names them: each table action
/// the route table declares (a `ConditionCheckItem` is part of a transaction), `Query` for an
/// index, and `TransactWriteItems`, in which every change writes its outbox item.
fn operations_called() -> BTreeSet<String> {
    let accesses = ROUTES
        .iter()
        .map(|r| &r.access)
        .chain(SCHEDULED.iter().map(|s| &s.access))
        .chain(STREAMED.iter().map(|s| &s.access));
    let mut operations = BTreeSet::new();
    for access in accesses {
        for action in access.iam_actions() {
            if let Some(operation) = action.strip_prefix("dynamodb:")
                && operation != "ConditionCheckItem"
            {
                operations.insert(operation.to_owned());
            }
        }
        if !access.events.is_empty() {
            operations.insert("TransactWriteItems".to_owned());
        }
    }
    operations
}

#[test]
fn every_route_needs_a_token_from_the_configured_issuer_with_one_of_its_scopes() {
    let template = template();
    let parameters = &template["Parameters"];
    assert_eq!(parameters["JwtIssuer"]["Type"], "String");
    assert!(parameters["JwtAudience"]["Type"].is_string());
    let apis = resources(&template, "AWS::Serverless::HttpApi");
    assert_eq!(apis.len(), 1, "one HTTP API");
    let (api, properties) = (&apis[0].0, &apis[0].1["Properties"]);
    let auth = &properties["Auth"];
    let authorizer = auth["DefaultAuthorizer"]
        .as_str()
        .expect("a default authorizer: no route is reachable without a token");
    let jwt = &auth["Authorizers"][authorizer];
    assert_eq!(jwt["IdentitySource"], "$request.header.Authorization");
    assert_eq!(jwt["JwtConfiguration"]["issuer"], reference("JwtIssuer"));
    assert_eq!(
        list(&jwt["JwtConfiguration"]["audience"]),
        vec![reference("JwtAudience")]
    );
    // Throttling on every route, from parameters.
    for limit in ["ThrottlingBurstLimit", "ThrottlingRateLimit"] {
        let parameter = target(&properties["DefaultRouteSettings"][limit]).unwrap();
        assert_eq!(parameters[parameter]["Type"], "Number", "{limit}");
    }
    // Access logs: JSON, naming the request, the route, the answer, its latency and the subject.
    let logs = &properties["AccessLogSettings"];
    let group = target(&logs["DestinationArn"]).unwrap();
    assert_eq!(template["Resources"][group]["Type"], "AWS::Logs::LogGroup");
    assert!(!template["Resources"][group]["Properties"]["RetentionInDays"].is_null());
    let format: serde_json::Value =
        serde_json::from_str(logs["Format"].as_str().unwrap()).expect("access logs are JSON");
    for (field, variable) in [
        ("requestId", "$context.requestId"),
        ("routeKey", "$context.routeKey"),
        ("status", "$context.status"),
        ("responseLatency", "$context.responseLatency"),
        ("sub", "$context.authorizer.claims.sub"),
    ] {
        assert_eq!(format[field], variable, "access log field {field}");
    }
    // The rendered routes name this API and its authorizer (their scopes are the route table's).
    for (_, served, function) in functions(&template) {
        let events = function["Properties"]["Events"].as_mapping().unwrap();
        for event in events.values().filter(|e| e["Type"] == "HttpApi") {
            let event = &event["Properties"];
            assert_eq!(target(&event["ApiId"]), Some(api.as_str()), "{served}");
            assert_eq!(event["Auth"]["Authorizer"], authorizer, "{served}");
            assert!(
                !strings(&event["Auth"]["AuthorizationScopes"]).is_empty(),
                "{served} grants no scope"
            );
        }
    }
}

#[test]
fn every_function_logs_to_its_own_log_group_and_alarms_on_errors_and_throttles() {
    let template = template();
    let globals = &template["Globals"]["Function"];
    assert_eq!(globals["Tracing"], reference("Tracing"));
    assert_eq!(
        strings(&template["Parameters"]["Tracing"]["AllowedValues"]),
        ["Active", "PassThrough"]
    );
    assert_eq!(globals["LoggingConfig"]["LogFormat"], "JSON");
    let topic = reference("AlarmTopicArn");
    assert_eq!(template["Parameters"]["AlarmTopicArn"]["Type"], "String");

    for (logical, served, function) in functions(&template) {
        let properties = &function["Properties"];
        let name = format!("${{AWS::StackName}}-{served}");
        assert_eq!(properties["FunctionName"], sub(&name), "{served}'s name");
        let group = target(&properties["LoggingConfig"]["LogGroup"])
            .unwrap_or_else(|| panic!("{served} names no log group"));
        let group = &template["Resources"][group];
        assert_eq!(group["Type"], "AWS::Logs::LogGroup", "{served}");
        assert_eq!(
            group["Properties"]["LogGroupName"],
            sub(&format!("/aws/lambda/{name}")),
            "{served}'s log group"
        );
        assert_eq!(
            group["Properties"]["RetentionInDays"],
            reference("LogRetentionInDays"),
            "{served}'s log retention"
        );
        assert_one_errors_and_one_throttles_alarm(&template, &logical, &served);
    }
    for (name, alarm) in resources(&template, "AWS::CloudWatch::Alarm") {
        assert!(
            list(&alarm["Properties"]["AlarmActions"]).contains(&topic),
            "{name} notifies the alarm topic"
        );
    }
}

#[test]
fn the_api_the_table_and_the_marker_are_watched() {
    let template = template();
    let table = &resources(&template, "AWS::DynamoDB::Table")[0];
    assert_eq!(table.1["Properties"]["DeletionProtectionEnabled"], true);
    let api = &resources(&template, "AWS::Serverless::HttpApi")[0].0;
    assert_eq!(
        alarms_on(&template, "AWS/ApiGateway", "5xx", "ApiId", &reference(api)),
        1,
        "the API's 5xx rate"
    );
    let called = operations_called();
    assert!(called.contains("TransactWriteItems"), "{called:?}");
    for metric in ["ThrottledRequests", "SystemErrors"] {
        let alarms = alarms_watching(
            &template,
            "AWS/DynamoDB",
            metric,
            "TableName",
            &reference(&table.0),
        );
        assert_eq!(alarms.len(), 1, "the table's {metric}");
        let operations: BTreeSet<String> = watched(&alarms[0])
            .iter()
            .filter_map(|m| dimension(m, "Operation")?.as_str().map(str::to_owned))
            .collect();
        assert!(
            operations.is_superset(&called),
            "{metric}: every operation the functions call, {called:?}, not {operations:?}"
        );
        assert!(
            sums_its_metrics_with_gaps_as_zero(&alarms[0]),
            "{metric}: FILL(x, 0) + ..."
        );
    }

    // A scheduled function's failed runs land in a queue (after Lambda's retries), and any
    // message there alarms. Its own policy grants DynamoDB and the server secret only: SAM adds
    // sqs:SendMessage on that queue alone, for the destination.
    for scheduled in SCHEDULED {
        let (_, _, function) = functions(&template)
            .into_iter()
            .find(|(_, served, _)| served == scheduled.function)
            .unwrap();
        let invoke = &function["Properties"]["EventInvokeConfig"];
        assert!(invoke["MaximumRetryAttempts"].is_number());
        let on_failure = &invoke["DestinationConfig"]["OnFailure"];
        assert_eq!(on_failure["Type"], "SQS", "{}", scheduled.function);
        let queue = target(&on_failure["Destination"]).unwrap();
        assert_eq!(template["Resources"][queue]["Type"], "AWS::SQS::Queue");
        let alarmed = resources(&template, "AWS::CloudWatch::Alarm")
            .into_iter()
            .any(|(_, alarm)| {
                let properties = &alarm["Properties"];
                properties["Threshold"] == 0
                    && properties["ComparisonOperator"] == "GreaterThanThreshold"
                    && watched(&alarm).iter().any(|m| {
                        m["Namespace"] == "AWS/SQS"
                            && m["MetricName"] == "ApproximateNumberOfMessagesVisible"
                            && dimension(m, "QueueName") == Some(&get_att(queue, "QueueName"))
                    })
            });
        assert!(alarmed, "a message in {queue} alarms");
        for alarm in alarms_watching(
            &template,
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "QueueName",
            &get_att(queue, "QueueName"),
        ) {
            if alarm["Properties"]["Metrics"].is_sequence() {
                assert!(
                    sums_its_metrics_with_gaps_as_zero(&alarm),
                    "{queue}'s alarm: FILL(x, 0) + ..."
                );
            }
        }
        let statements = &function["Properties"]["Policies"][0]["Statement"];
        for action in list(statements).iter().flat_map(|s| strings(&s["Action"])) {
            assert!(
                action.starts_with("dynamodb:") || action == "secretsmanager:GetSecretValue",
                "{action}"
            );
        }
    }
}

#[test]
fn the_env_vars_file_names_every_function_and_only_declared_variables() {
    let template = template();
    let text = std::fs::read_to_string(format!("{ROOT}/events/env.json")).unwrap();
    let env: BTreeMap<String, BTreeMap<String, String>> = serde_json::from_str(&text).unwrap();
    let logical: BTreeSet<String> = functions(&template)
        .into_iter()
        .map(|(logical, _, _)| logical)
        .collect();
    assert_eq!(
        env.keys().cloned().collect::<BTreeSet<_>>(),
        logical,
        "events/env.json names every function resource"
    );
    // `sam local invoke --env-vars` only overrides variables the template declares, in Globals
    // or on the function.
    let global = template["Globals"]["Function"]["Environment"]["Variables"]
        .as_mapping()
        .unwrap();
    for (function, variables) in &env {
        let own =
            &template["Resources"][function.as_str()]["Properties"]["Environment"]["Variables"];
        let declared = |name: &str| {
            global.contains_key(name) || own.as_mapping().is_some_and(|m| m.contains_key(name))
        };
        for name in ["AWS_ENDPOINT_URL_DYNAMODB", "TABLE_NAME", "CURSOR_KEY"] {
            assert!(variables.contains_key(name), "{function} sets {name}");
        }
        assert_eq!(
            variables["CURSOR_KEY"],
            singlet_functions::cursor::LOCAL_SECRET,
            "{function}: the runner's key, so the ids the events name are the ones it derives"
        );
        for name in variables.keys() {
            assert!(
                declared(name),
                "{function}: {name} is not declared in Globals or on the function, so SAM would \
                 ignore it"
            );
        }
    }
    assert_eq!(
        global["AWS_ENDPOINT_URL_DYNAMODB"],
        reference("DynamoDbEndpoint")
    );
    assert_eq!(template["Parameters"]["DynamoDbEndpoint"]["Default"], "");
}

/// CORS on the HTTP API comes from `CorsAllowedOrigins` (none by default: no configuration at
/// all), with the same headers and methods as the runner's `--cors-origin`.
#[test]
fn cors_is_a_parameter_off_by_default_with_the_runners_lists() {
    use singlet::serve::front_door::{
        CORS_ALLOW_HEADERS, CORS_ALLOW_METHODS, CORS_EXPOSE_HEADERS, CORS_MAX_AGE,
    };
    let template = template();
    assert_eq!(template["Parameters"]["CorsAllowedOrigins"]["Default"], "");
    let condition = &template["Conditions"]["AllowsCors"]["Fn::Not"][0]["Fn::Equals"];
    assert_eq!(condition[0], reference("CorsAllowedOrigins"));
    assert_eq!(condition[1], "");
    let (_, api) = resources(&template, "AWS::Serverless::HttpApi")
        .into_iter()
        .next()
        .unwrap();
    let cors = &api["Properties"]["CorsConfiguration"]["Fn::If"];
    assert_eq!(cors[0], "AllowsCors");
    assert_eq!(cors[2], reference("AWS::NoValue"), "no origin, no CORS");
    let allowed = &cors[1];
    assert_eq!(
        allowed["AllowOrigins"]["Fn::Split"][1],
        reference("CorsAllowedOrigins")
    );
    assert_eq!(strings(&allowed["AllowHeaders"]), CORS_ALLOW_HEADERS);
    assert_eq!(strings(&allowed["AllowMethods"]), CORS_ALLOW_METHODS);
    assert_eq!(strings(&allowed["ExposeHeaders"]), CORS_EXPOSE_HEADERS);
    assert_eq!(allowed["MaxAge"].as_u64(), Some(CORS_MAX_AGE));
}

/// A deployed function sends its signed requests wherever `DynamoDbEndpoint` points: only an
/// `https://` URL (or none) is taken.
#[test]
fn the_dynamodb_endpoint_parameter_takes_only_https() {
    let template = template();
    let pattern = template["Parameters"]["DynamoDbEndpoint"]["AllowedPattern"]
        .as_str()
        .expect("an AllowedPattern");
    let schema = serde_json::json!({"type": "string", "pattern": pattern});
    let allowed = |url: &str| jsonschema::is_valid(&schema, &serde_json::json!(url));
    assert_eq!(pattern, "^(https://[^\\s]+)?$");
    for url in ["", "https://dynamodb.eu-west-1.amazonaws.com"] {
        assert!(allowed(url), "{url}");
    }
    for url in ["http://evil.example:8000", "ftp://x", "https://"] {
        assert!(!allowed(url), "{url}");
    }
}

/// The stream that feeds the publisher (its mapping is rendered from `events::mapping`, which
/// the runner plays): the table's stream has the view the mapping reads, the publisher is given
/// the stack's own bus (`EventBus`), and a batch it could not publish lands in a queue that alarms.
#[test]
fn the_stream_feeds_the_publisher_and_its_failures_alarm() {
    let template = template();
    let table = &template["Resources"]["Table"]["Properties"];
    assert_eq!(
        table["StreamSpecification"]["StreamViewType"],
        mapping::STREAM_VIEW_TYPE
    );
    for streamed in STREAMED {
        let (_, _, function) = functions(&template)
            .into_iter()
            .find(|(_, served, _)| served == streamed.function)
            .expect("the streamed function is in the template");
        let properties = &function["Properties"];
        assert_eq!(
            properties["Environment"]["Variables"][EVENT_BUS_VAR],
            reference("EventBus")
        );
        let stream = properties["Events"]
            .as_mapping()
            .unwrap()
            .values()
            .find(|e| e["Type"] == "DynamoDB")
            .expect("a DynamoDB stream event")
            .clone();
        let mapped = &stream["Properties"];
        assert_eq!(mapped["Stream"], get_att("Table", "StreamArn"));
        for filter in list(&mapped["FilterCriteria"]["Filters"]) {
            let filter: serde_json::Value =
                serde_json::from_str(filter["Pattern"].as_str().unwrap()).unwrap();
            let keys: Vec<&String> = filter.as_object().unwrap().keys().collect();
            assert_eq!(
                keys,
                ["dynamodb"],
                "a stream filter sees the dynamodb key only"
            );
        }
        let on_failure = &mapped["DestinationConfig"]["OnFailure"];
        assert_eq!(on_failure["Type"], "SQS");
        let queue = target(&on_failure["Destination"]).unwrap();
        assert_eq!(template["Resources"][queue]["Type"], "AWS::SQS::Queue");
        assert_eq!(
            alarms_on(
                &template,
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                "QueueName",
                &get_att(queue, "QueueName")
            ),
            1,
            "a message in {queue} alarms"
        );
    }
}

/// Events go to a bus of the stack's own, not the account's `default` (where any rule could read
/// their personal data and any principal allowed `events:PutEvents` could forge `singlet.*`
/// events beside them): its resource policy denies `PutEvents` to every principal but the
/// publisher's role, and the publisher may put events on that bus and no other.
#[test]
fn events_go_to_the_stacks_own_bus_which_only_the_publisher_puts_to() {
    let template = template();
    let bus = &template["Resources"]["EventBus"];
    assert_eq!(bus["Type"], "AWS::Events::EventBus");
    assert_eq!(bus["Properties"]["Name"], sub("${AWS::StackName}-events"));
    let bus_arn = sub(
        "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/${AWS::StackName}-events",
    );
    let (publisher, _, function) = functions(&template)
        .into_iter()
        .find(|(_, served, _)| served == "publish-events")
        .unwrap();
    // SAM names the role it makes for a function `<function's logical id>Role`.
    let role = format!("{publisher}Role");
    let policy = &bus["Properties"]["Policy"];
    assert_eq!(policy["Version"], "2012-10-17");
    let statements = list(&policy["Statement"]);
    assert_eq!(statements.len(), 1, "{statements:?}");
    let deny = &statements[0];
    assert_eq!(deny["Effect"], "Deny");
    assert_eq!(deny["Principal"], "*");
    assert_eq!(list(&deny["Action"]), [Value::from("events:PutEvents")]);
    assert_eq!(list(&deny["Resource"]), std::slice::from_ref(&bus_arn));
    assert_eq!(
        deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"],
        get_att(&role, "Arn"),
        "every principal but the publisher's role"
    );

    let puts = |statements: &Value| -> Vec<Value> {
        list(statements)
            .iter()
            .filter(|s| list(&s["Action"]).contains(&Value::from("events:PutEvents")))
            .flat_map(|s| list(&s["Resource"]))
            .collect()
    };
    let properties = &function["Properties"];
    assert_eq!(
        puts(&properties["Policies"][0]["Statement"]),
        std::slice::from_ref(&bus_arn)
    );
    let boundary = target(&properties["PermissionsBoundary"]).unwrap();
    assert_eq!(
        puts(&template["Resources"][boundary]["Properties"]["PolicyDocument"]["Statement"]),
        [bus_arn]
    );
    // No other function may put events, and nothing names the default bus any more.
    for (name, served, function) in functions(&template) {
        if served != "publish-events" {
            assert!(
                puts(&function["Properties"]["Policies"][0]["Statement"]).is_empty(),
                "{name} may put events"
            );
        }
    }
    let text = std::fs::read_to_string(format!("{ROOT}/template.yaml")).unwrap();
    assert!(!text.contains("event-bus/default"));
    assert!(!text.contains("EventBusName"));
}

/// The Lambda binary stays lean: the streams SDK is the runner's alone (it plays the
/// event-source mapping locally), and the EventBridge client has no SigV4a and no second HTTPS
/// stack (default features off; it takes the DynamoDB client's); the server secret is read
/// without a client of its own.
#[test]
fn the_lambda_binary_links_no_streams_sdk_and_a_lean_eventbridge_client() {
    let functions = std::fs::read_to_string(format!("{ROOT}/functions/Cargo.toml")).unwrap();
    assert!(!functions.contains("aws-sdk-dynamodbstreams"));
    let workspace = std::fs::read_to_string(format!("{ROOT}/Cargo.toml")).unwrap();
    let eventbridge = workspace
        .lines()
        .find(|line| line.starts_with("aws-sdk-eventbridge ="))
        .unwrap();
    assert!(
        eventbridge.contains("default-features = false"),
        "{eventbridge}"
    );
    assert!(!eventbridge.contains("sigv4a"), "{eventbridge}");
    // The archive's S3 client (retention), as lean.
    let s3 = workspace
        .lines()
        .find(|line| line.starts_with("aws-sdk-s3 ="))
        .unwrap();
    assert!(s3.contains("default-features = false"), "{s3}");
    assert!(!s3.contains("sigv4a"), "{s3}");
    // The server secret is one signed call (functions/src/secret.rs), not a client of its own:
    // making `aws-sdk-secretsmanager`'s cost a cold start more than the call.
    for manifest in [&workspace, &functions] {
        assert!(
            !manifest
                .lines()
                .any(|line| line.trim_start().starts_with("aws-sdk-secretsmanager")),
            "a Secrets Manager client is linked"
        );
    }
    let sigv4 = workspace
        .lines()
        .find(|line| line.starts_with("aws-sigv4 ="))
        .unwrap();
    assert!(!sigv4.contains("sigv4a"), "{sigv4}");
}

/// Retention's template: the archive bucket private, encrypted and expiring; the publisher
/// writing to it alone; every function told the loan history's period.
#[test]
fn the_archive_bucket_is_private_encrypted_expiring_and_the_publishers_alone() {
    let template = template();
    let bucket = &template["Resources"]["ArchiveBucket"];
    assert_eq!(bucket["Type"], "AWS::S3::Bucket");
    let properties = &bucket["Properties"];
    assert_public_access_blocked(properties);
    let encryption = &properties["BucketEncryption"]["ServerSideEncryptionConfiguration"][0];
    assert!(encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"].is_string());
    let rule = &properties["LifecycleConfiguration"]["Rules"][0];
    assert_eq!(rule["Status"], "Enabled");
    assert_eq!(rule["ExpirationInDays"], reference("ArchiveRetentionDays"));
    // Append-only: every put must be `If-None-Match: *` (a key already there is refused), and
    // no principal deletes an object or a version; only the lifecycle rule expires them.
    let (_, bucket_policy) = resources(&template, "AWS::S3::BucketPolicy")
        .into_iter()
        .find(|(_, p)| p["Properties"]["Bucket"] == reference("ArchiveBucket"))
        .expect("the archive's bucket policy");
    let denied = list(&bucket_policy["Properties"]["PolicyDocument"]["Statement"]);
    let deny_of = |action: &str| -> Vec<Value> {
        denied
            .iter()
            .filter(|s| s["Effect"] == "Deny" && s["Principal"] == "*")
            .filter(|s| list(&s["Action"]).contains(&Value::from(action)))
            .cloned()
            .collect()
    };
    let objects = sub("${ArchiveBucket.Arn}/*");
    let overwrite = deny_of("s3:PutObject");
    assert_eq!(overwrite.len(), 1, "{overwrite:?}");
    assert_eq!(
        list(&overwrite[0]["Resource"]),
        std::slice::from_ref(&objects)
    );
    assert_eq!(
        overwrite[0]["Condition"]["Null"]["s3:if-none-match"],
        "true"
    );
    for action in ["s3:DeleteObject", "s3:DeleteObjectVersion"] {
        let deletes = deny_of(action);
        assert_eq!(deletes.len(), 1, "{action}");
        assert!(
            deletes[0]["Condition"].is_null(),
            "{action} denied outright"
        );
        assert!(list(&deletes[0]["Resource"]).contains(&objects), "{action}");
    }

    let (_, _, publisher) = functions(&template)
        .into_iter()
        .find(|(_, served, _)| served == "publish-events")
        .unwrap();
    let properties = &publisher["Properties"];
    // SAM attaches AWSLambdaDynamoDBExecutionRole (stream reads on every stream of the account)
    // to a stream-fed function's role: its boundary caps the reads to this table's stream.
    let boundary = target(&properties["PermissionsBoundary"]).expect("a permissions boundary");
    let boundary = &template["Resources"][boundary];
    assert_eq!(boundary["Type"], "AWS::IAM::ManagedPolicy");
    let capped = boundary["Properties"]["PolicyDocument"]["Statement"]
        .as_sequence()
        .unwrap();
    for read in [
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:DescribeStream",
    ] {
        let allowing: Vec<&Value> = capped
            .iter()
            .filter(|s| strings(&s["Action"]).contains(&read.to_owned()))
            .collect();
        assert_eq!(allowing.len(), 1, "{read}");
        assert_eq!(
            allowing[0]["Resource"],
            get_att("Table", "StreamArn"),
            "{read}"
        );
    }
    for statement in capped {
        if statement["Resource"] == "*" {
            for action in strings(&statement["Action"]) {
                assert!(
                    action == "dynamodb:ListStreams" || action.starts_with("xray:"),
                    "{action} on every resource"
                );
            }
        }
    }
    assert_eq!(
        properties["Environment"]["Variables"]["ARCHIVE_BUCKET"],
        reference("ArchiveBucket")
    );
    let statements = properties["Policies"][0]["Statement"]
        .as_sequence()
        .unwrap();
    let puts: Vec<&Value> = statements
        .iter()
        .filter(|s| strings(&s["Action"]).contains(&"s3:PutObject".to_owned()))
        .collect();
    assert_eq!(puts.len(), 1);
    assert_eq!(strings(&puts[0]["Action"]), ["s3:PutObject"]);
    assert_eq!(list(&puts[0]["Resource"]), [sub("${ArchiveBucket.Arn}/*")]);
    for (name, _, function) in functions(&template)
        .into_iter()
        .filter(|(_, served, _)| served != "publish-events")
    {
        let statements = function["Properties"]["Policies"][0]["Statement"]
            .as_sequence()
            .cloned()
            .unwrap_or_default();
        assert!(
            statements
                .iter()
                .all(|s| !strings(&s["Action"]).iter().any(|a| a.starts_with("s3:"))),
            "{name} may not touch the archive"
        );
    }

    let days = &template["Parameters"]["LoanHistoryDays"];
    assert_eq!(days["Type"], "Number");
    assert_eq!(
        days["Default"],
        singlet_functions::context::DEFAULT_LOAN_HISTORY_DAYS
    );
    assert_eq!(
        template["Globals"]["Function"]["Environment"]["Variables"]["LOAN_HISTORY_DAYS"],
        reference("LoanHistoryDays")
    );
}

/// Least privilege for the server's secret: a function is granted `GetSecretValue` on it, and
/// told its ARN, exactly when the route table says it holds the server's keys (it derives ids,
/// signs cursors or keys a subject's one-account lock); the scheduled and streamed functions,
/// and every route that only reads or changes what it is named, start without it.
#[test]
fn only_the_functions_that_hold_the_server_keys_may_read_the_secret() {
    use singlet_functions::routes::by_function;
    let template = template();
    let mut holders = Vec::new();
    for (logical, function, resource) in functions(&template) {
        let holds = by_function(&function).is_some_and(|route| route.holds_server_keys());
        let statements = &resource["Properties"]["Policies"][0]["Statement"];
        let granted: Vec<Value> = list(statements)
            .into_iter()
            .filter(|s| {
                strings(&s["Action"])
                    .iter()
                    .any(|a| a.starts_with("secretsmanager:"))
            })
            .collect();
        let told = &resource["Properties"]["Environment"]["Variables"]["SERVER_SECRET_ARN"];
        if holds {
            holders.push(function.clone());
            assert_eq!(granted.len(), 1, "{logical}: one statement on the secret");
            assert_eq!(
                strings(&granted[0]["Action"]),
                ["secretsmanager:GetSecretValue"]
            );
            assert_eq!(
                granted[0]["Resource"],
                Value::Sequence(vec![reference("ServerSecret")])
            );
            assert_eq!(
                *told,
                reference("ServerSecret"),
                "{logical} is told the secret's ARN"
            );
        } else {
            assert!(
                granted.is_empty(),
                "{logical} may not read the secret: {granted:?}"
            );
            assert!(told.is_null(), "{logical} is not told the secret's ARN");
        }
    }
    assert!(
        template["Globals"]["Function"]["Environment"]["Variables"]["SERVER_SECRET_ARN"].is_null(),
        "no function is told the secret's ARN by Globals"
    );
    for function in [
        "register-vehicle",
        "create-account",
        "delete-account",
        "loan-history",
    ] {
        assert!(
            holders.iter().any(|h| h == function),
            "{function} holds the keys"
        );
    }
    for function in [
        "get-vehicle",
        "find-by-plate",
        "change-plate",
        "mark-overdue",
        "publish-events",
    ] {
        assert!(
            !holders.iter().any(|h| h == function),
            "{function} does not"
        );
    }
}

/// The first state of a map's item processor.
fn inner_start(map: &Value) -> Value {
    map["ItemProcessor"]["StartAt"].clone()
}

/// The stack's tools function runs its own binary (so the tools library never links into the
/// API's bootstrap) under the rendered tools policy and nothing more; the tools state machine's
/// map is DISTRIBUTED, invokes that function and only it, retries Lambda's throttling and a
/// segment stopped by Lambda's time limit, and its role may invoke that function only and start
/// and stop only its own child executions. (docs/guide/tools-on-step-functions.md)
#[test]
fn tools_function_and_state_machine() {
    let template = template();
    let function = &template["Resources"][TOOLS_FUNCTION];
    assert_eq!(function["Type"], "AWS::Serverless::Function");
    let own_build: Value = serde_norway::from_str(
        "{BuildMethod: rust-cargolambda, BuildProperties: {Binary: singlet-tools-lambda}}",
    )
    .unwrap();
    assert_eq!(function["Metadata"], own_build);
    let manifest = std::fs::read_to_string(format!("{ROOT}/tools-lambda/Cargo.toml")).unwrap();
    assert!(manifest.contains("[[bin]]\nname = \"singlet-tools-lambda\""));
    let api = std::fs::read_to_string(format!("{ROOT}/functions/Cargo.toml")).unwrap();
    assert!(
        !api.contains("singlet-tools"),
        "the API's crate does not depend on the tools"
    );
    let properties = &function["Properties"];
    assert_eq!(
        properties["FunctionName"],
        sub("${AWS::StackName}-table-tools")
    );
    assert!(properties["Environment"]["Variables"][FUNCTION_VAR].is_null());
    assert!(
        properties["Events"].is_null(),
        "invoked by the state machine only"
    );
    // Each tools function's policy: its rendered statements alone, on the table (no index,
    // no secret) and on its tools' results in the results bucket (no other object, no listing).
    let check = &template["Resources"][TOOLS_CHECK_FUNCTION];
    assert_eq!(
        check["Metadata"], own_build,
        "the judge runs the tools' bootstrap"
    );
    assert_eq!(
        check["Properties"]["FunctionName"],
        sub("${AWS::StackName}-table-tools-check")
    );
    assert!(check["Properties"]["Events"].is_null());
    for (function, declared) in [
        (function, singlet::render::tools_policy()),
        (check, singlet::render::tools_check_policy()),
    ] {
        let properties = &function["Properties"];
        let statements = list(&properties["Policies"][0]["Statement"]);
        assert_eq!(statements.len(), declared.len());
        for (statement, declared) in statements.iter().zip(&declared) {
            assert_eq!(strings(&statement["Action"]), declared.actions);
            let resource = if declared.actions[0].starts_with("dynamodb:") {
                get_att("Table", "Arn")
            } else if declared.actions[0].starts_with("secretsmanager:") {
                // The judge's only: the server's keys, for where owner locks are keyed.
                assert_eq!(declared.actions, ["secretsmanager:GetSecretValue"]);
                assert_eq!(
                    function["Properties"]["FunctionName"],
                    sub("${AWS::StackName}-table-tools-check")
                );
                reference("ServerSecret")
            } else {
                assert_eq!(declared.actions, ["s3:GetObject", "s3:PutObject"]);
                // fsck's prefix for both; a migration's for the segments' function alone.
                let prefix = declared.why.as_deref().unwrap_or_default();
                match prefix.contains("migration") {
                    true => {
                        assert_eq!(
                            function["Properties"]["FunctionName"],
                            sub("${AWS::StackName}-table-tools")
                        );
                        sub("${ToolsResultsBucket.Arn}/migrate/*")
                    }
                    false => sub("${ToolsResultsBucket.Arn}/fsck/*"),
                }
            };
            assert_eq!(statement["Resource"], Value::Sequence(vec![resource]));
            assert!(statement["Condition"].is_null());
        }
        assert_eq!(properties["Policies"].as_sequence().unwrap().len(), 1);
    }
    assert_eq!(
        alarms_on(
            &template,
            "AWS/Lambda",
            "Errors",
            "FunctionName",
            &reference(TOOLS_CHECK_FUNCTION)
        ),
        1
    );
    assert_one_errors_and_one_throttles_alarm(&template, TOOLS_FUNCTION, "the tools function");

    let machines = resources(&template, "AWS::Serverless::StateMachine");
    assert_eq!(machines.len(), 1, "one state machine, the tools'");
    let (logical, machine) = &machines[0];
    let properties = &machine["Properties"];
    assert_eq!(properties["Type"], "STANDARD");
    // Every Task of the definition invokes a function through DefinitionSubstitutions: the
    // segments the tools function, fsck's judge the check function; and the results' bucket.
    let substitutions = properties["DefinitionSubstitutions"].as_mapping().unwrap();
    assert_eq!(substitutions.len(), 3);
    assert_eq!(
        substitutions["TableToolsFunctionArn"],
        get_att(TOOLS_FUNCTION, "Arn")
    );
    assert_eq!(
        substitutions["TableToolsCheckFunctionArn"],
        get_att(TOOLS_CHECK_FUNCTION, "Arn")
    );
    assert_eq!(
        substitutions["ToolsResultsBucket"],
        reference("ToolsResultsBucket")
    );
    let definition = &properties["Definition"];
    let states = &definition["States"];
    // First the run's results are named (s3://<bucket>/<tool>/<run>/), then the map.
    let start = &states[definition["StartAt"].as_str().unwrap()];
    assert_eq!(start["Type"], "Pass");
    assert_eq!(
        start["Parameters"]["url.$"],
        "States.Format('s3://${ToolsResultsBucket}/{}/{}/', $.tool, $.run)"
    );
    assert_eq!(start["ResultPath"], "$.results");
    // Then what the map's segments run (`step.tool`): a migration that claims values
    // (`survey`) is surveyed first, the map run again afterwards; any other run, its tool.
    let survey = &states[start["Next"].as_str().unwrap()];
    assert_eq!(survey["Type"], "Choice");
    let surveyed = list(&survey["Choices"]);
    assert_eq!(surveyed.len(), 1);
    assert_eq!(surveyed[0]["Variable"], "$.survey");
    assert_eq!(surveyed[0]["BooleanEquals"], true);
    let surveying = &states[surveyed[0]["Next"].as_str().unwrap()];
    let running_name = survey["Default"].as_str().unwrap();
    let running = &states[running_name];
    assert_eq!(
        surveying["Parameters"]["tool"],
        singlet_tools::migrate::on_aws::SURVEY_TOOL
    );
    assert_eq!(running["Parameters"]["tool.$"], "$.tool");
    for step in [surveying, running] {
        assert_eq!(step["Type"], "Pass");
        assert_eq!(step["ResultPath"], "$.step");
        assert_eq!(step["Next"], running["Next"], "both go to the one map");
    }
    let map = &states[running["Next"].as_str().unwrap()];
    assert_eq!(map["Type"], "Map");
    assert_eq!(
        map["ItemProcessor"]["ProcessorConfig"]["Mode"],
        "DISTRIBUTED"
    );
    assert_eq!(
        map["ItemProcessor"]["ProcessorConfig"]["ExecutionType"],
        "STANDARD"
    );
    assert_eq!(map["ItemsPath"], "$.segments");
    assert_eq!(map["MaxConcurrencyPath"], "$.maxConcurrency");
    assert_eq!(map["ResultPath"], "$.reports");
    // The segments' reports go to the results bucket, not the execution's 256 KiB output.
    let writer = &map["ResultWriter"];
    assert_eq!(writer["Resource"], "arn:aws:states:::s3:putObject");
    assert_eq!(writer["Parameters"]["Bucket"], "${ToolsResultsBucket}");
    assert_eq!(writer["Parameters"]["Prefix"], "map-runs");
    // The item's event is the tools function's (singlet_tools::segment::SegmentEvent).
    let selector: BTreeSet<String> = map["ItemSelector"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().trim_end_matches(".$").to_owned())
        .collect();
    let event: BTreeSet<String> = [
        "tool",
        "migration",
        "segment",
        "segments",
        "maxWcu",
        "maxKeyWcu",
        "pageSize",
        "dryRun",
        "results",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(selector, event);
    assert_eq!(map["ItemSelector"]["results.$"], "$.results.url");
    assert_eq!(map["ItemSelector"]["tool.$"], "$.step.tool");
    let mut tasks = Vec::new();
    let inner = map["ItemProcessor"]["States"].as_mapping().unwrap();
    for (name, state) in inner {
        // No nested maps or parallels: the Task, the Choice that invokes it again while its
        // segment is not complete, and the Pass that ends with the report.
        assert!(
            ["Task", "Choice", "Pass"].contains(&state["Type"].as_str().unwrap()),
            "{name:?}"
        );
        if state["Type"] == "Choice" {
            let again = list(&state["Choices"]);
            assert_eq!(again.len(), 1);
            assert_eq!(again[0]["Variable"], "$.answer.report.complete");
            assert_eq!(again[0]["BooleanEquals"], false);
            assert_eq!(again[0]["Next"], inner_start(map));
        }
        if state["Type"] == "Task" {
            tasks.push(state.clone());
        }
    }
    assert_eq!(tasks.len(), 1);
    let task = &tasks[0];
    assert_eq!(task["Resource"], "arn:aws:states:::lambda:invoke");
    assert_eq!(
        task["Parameters"]["FunctionName"],
        "${TableToolsFunctionArn}"
    );
    // The event it sends is the item's, field for field.
    let payload: BTreeSet<String> = task["Parameters"]["Payload"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().trim_end_matches(".$").to_owned())
        .collect();
    assert_eq!(payload, selector);
    let retried: Vec<String> = list(&task["Retry"])
        .iter()
        .flat_map(|retry| strings(&retry["ErrorEquals"]))
        .collect();
    for error in [
        "Lambda.TooManyRequestsException",
        "Sandbox.Timedout",
        "States.TaskFailed",
    ] {
        assert!(
            retried.iter().any(|e| e == error),
            "{logical} retries {error}"
        );
    }
    // After the map, a survey goes on to the map again, its segments migrating; fsck alone
    // goes on to its judge, the one other state that invokes anything: the check function,
    // with fsck's judge event.
    let choice = &states[map["Next"].as_str().unwrap()];
    assert_eq!(choice["Type"], "Choice");
    let choices = list(&choice["Choices"]);
    assert_eq!(choices.len(), 3);
    assert_eq!(choices[0]["Variable"], "$.step.tool");
    assert_eq!(
        choices[0]["StringEquals"],
        singlet_tools::migrate::on_aws::SURVEY_TOOL
    );
    assert_eq!(choices[0]["Next"], running_name);
    let to_judge = &choices[1..2];
    assert_eq!(to_judge[0]["Variable"], "$.tool");
    assert_eq!(to_judge[0]["StringEquals"], "fsck");
    assert_eq!(
        states[choice["Default"].as_str().unwrap()]["Type"],
        "Succeed"
    );
    let judge_name = to_judge[0]["Next"].as_str().unwrap();
    let judge = &states[judge_name];
    assert_eq!(judge["Resource"], "arn:aws:states:::lambda:invoke");
    assert_eq!(
        judge["Parameters"]["FunctionName"],
        "${TableToolsCheckFunctionArn}"
    );
    assert_eq!(judge["Parameters"]["Payload"]["tool"], "fsck-judge");
    assert_eq!(judge["Parameters"]["Payload"]["results.$"], "$.results.url");
    assert_eq!(judge["ResultPath"], "$.fsck");
    assert_eq!(judge["End"], true);
    let judge_retries = list(&judge["Retry"]);
    assert_eq!(
        judge_retries[1]["ErrorEquals"],
        Value::from(vec!["Sandbox.Timedout"])
    );
    assert_eq!(
        judge_retries[1]["MaxAttempts"], 0,
        "a judge out of time is not run again"
    );
    // A migration goes on to its gathering: the tools function, with the gathering's event
    // (singlet_tools::segment), every segment's report read from the run's results.
    assert_eq!(choices[2]["Variable"], "$.tool");
    assert_eq!(choices[2]["StringEquals"], "migrate");
    let gather_name = choices[2]["Next"].as_str().unwrap();
    let gather = &states[gather_name];
    assert_eq!(gather["Resource"], "arn:aws:states:::lambda:invoke");
    assert_eq!(
        gather["Parameters"]["FunctionName"],
        "${TableToolsFunctionArn}"
    );
    let payload = &gather["Parameters"]["Payload"];
    assert_eq!(payload["tool"], singlet_tools::migrate::on_aws::GATHER_TOOL);
    assert_eq!(payload["results.$"], "$.results.url");
    assert_eq!(payload["segments.$"], "$.segmentCount");
    assert_eq!(payload["dryRun.$"], "$.dryRun");
    assert_eq!(gather["ResultPath"], "$.migrate");
    assert_eq!(gather["End"], true);
    for (name, state) in states.as_mapping().unwrap() {
        assert!(
            state["Resource"].is_null() || name == judge_name || name == gather_name,
            "{name:?} invokes nothing itself"
        );
    }

    // The role: invoke the tools function only; start, describe and stop its own executions.
    let policies = list(&properties["Policies"]);
    let invoke: Vec<&Value> = policies
        .iter()
        .filter(|p| !p["LambdaInvokePolicy"].is_null())
        .collect();
    let invoked: Vec<Value> = invoke
        .iter()
        .map(|p| p["LambdaInvokePolicy"]["FunctionName"].clone())
        .collect();
    assert_eq!(
        invoked,
        [reference(TOOLS_FUNCTION), reference(TOOLS_CHECK_FUNCTION)]
    );
    let own = "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}";
    for statement in policies.iter().flat_map(|p| list(&p["Statement"])) {
        let actions = strings(&statement["Action"]);
        assert!(
            !actions
                .iter()
                .any(|a| a.starts_with("lambda:") || a.starts_with("dynamodb:")),
            "the role invokes only through LambdaInvokePolicy and never touches the table"
        );
        // S3: the map's ResultWriter, under map-runs/ of the results bucket, nothing else.
        if actions.iter().any(|a| a.starts_with("s3:")) {
            assert!(actions.iter().all(|a| a.starts_with("s3:")));
            assert_eq!(
                list(&statement["Resource"]),
                [sub("${ToolsResultsBucket.Arn}/map-runs/*")]
            );
        }
        if actions.iter().any(|a| a.starts_with("states:")) {
            let resources = list(&statement["Resource"]);
            assert_eq!(resources.len(), 1);
            let resource = resources[0]["Fn::Sub"].as_str().unwrap();
            assert!(
                resource == format!("{own}:stateMachine:${{AWS::StackName}}-table-tools")
                    || resource == format!("{own}:execution:${{AWS::StackName}}-table-tools/*"),
                "{resource}"
            );
        }
    }
    assert_eq!(properties["Name"], sub("${AWS::StackName}-table-tools"));
    assert_eq!(
        template["Outputs"]["TableToolsStateMachineArn"]["Value"],
        reference(logical)
    );
}

/// Every public access of a bucket's `properties` blocked.
fn assert_public_access_blocked(properties: &Value) {
    let block = &properties["PublicAccessBlockConfiguration"];
    for setting in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(block[setting], true, "{setting}");
    }
}

/// The tools' results bucket (fsck's copies of the table's items, its reports) is private,
/// encrypted, TLS only and expiring; only the tools functions' rendered statements reach it,
/// and only its `fsck/` prefix.
#[test]
fn the_tools_results_bucket_is_private_encrypted_tls_only_and_expiring() {
    let template = template();
    let properties = &template["Resources"]["ToolsResultsBucket"]["Properties"];
    assert_public_access_blocked(properties);
    let encryption = &properties["BucketEncryption"]["ServerSideEncryptionConfiguration"][0];
    assert_eq!(
        encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"],
        "AES256"
    );
    let rule = &properties["LifecycleConfiguration"]["Rules"][0];
    assert_eq!(rule["Status"], "Enabled");
    assert_eq!(rule["ExpirationInDays"], reference("ToolsResultsDays"));
    assert!(rule["NoncurrentVersionExpiration"]["NoncurrentDays"].is_number());
    let (_, policy) = resources(&template, "AWS::S3::BucketPolicy")
        .into_iter()
        .find(|(_, p)| p["Properties"]["Bucket"] == reference("ToolsResultsBucket"))
        .expect("the results' bucket policy");
    let statements = list(&policy["Properties"]["PolicyDocument"]["Statement"]);
    assert_eq!(statements.len(), 1);
    let tls = &statements[0];
    assert_eq!(
        (&tls["Effect"], &tls["Principal"], &tls["Action"]),
        (&"Deny".into(), &"*".into(), &"s3:*".into())
    );
    assert_eq!(tls["Condition"]["Bool"]["aws:SecureTransport"], "false");
    // No function but the tools' names the bucket.
    for (name, function) in resources(&template, "AWS::Serverless::Function") {
        let text = serde_norway::to_string(&function).unwrap();
        assert_eq!(
            text.contains("ToolsResultsBucket"),
            name == TOOLS_FUNCTION || name == TOOLS_CHECK_FUNCTION,
            "{name}"
        );
    }
}

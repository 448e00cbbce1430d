//! `cargo run -- render`: the parts of `template.yaml` and `Cargo.toml` that the route table
//! (`singlet_functions::routes`) already says, rendered from it, so that no policy, route or
//! event is typed twice.
//!
//! Each file marks what is rendered with two comment lines, `# >>> rendered: <region>` and
//! `# <<< rendered: <region>`; everything between them is replaced, everything else is a person's
//! and kept byte for byte:
//! - `template.yaml`, region `functions`: every function's resources (the function, its log
//!   group, its alarms), with its `SINGLET_FUNCTION`, its events (the HTTP route and its scopes,
//!   the schedule, the stream's mapping from `events::mapping`) and its least-privilege policy
//!   from its [`Access`]: table actions bounded by the `LeadingKeys` prefixes of the entities it
//!   touches, a `Query` statement per index, and the statements beyond the table it declares;
//! - `Cargo.toml`, region `watch router`: `cargo lambda watch`'s router, every route's method
//!   and path to the one binary.
//!
//! `render --check` writes nothing and fails when a file differs from its rendering (a test in
//! `tests/api/template.rs` does the same).

use serde_json::Value;
use singlet_functions::access::{Access, Action};
use singlet_functions::events::mapping;
use singlet_functions::lambda::FUNCTION_VAR;
use singlet_functions::routes::{
    CRITICAL, ROUTES, Route, SCHEDULED, STREAMED, Scheduled, Streamed,
};
use singlet_functions::secret::{ENDPOINT_VAR as SECRETS_ENDPOINT_VAR, SERVER_SECRET_VAR};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The template's rendered region.
pub const FUNCTIONS_REGION: &str = "functions";
/// The template's region of the tools function's policy.
pub const TOOLS_POLICY_REGION: &str = "tools policy";
/// The template's region of the tools check function's policy (fsck's judge on AWS).
pub const TOOLS_CHECK_POLICY_REGION: &str = "tools check policy";
/// `Cargo.toml`'s rendered region.
pub const WATCH_ROUTER_REGION: &str = "watch router";
/// The API's Lambda binary, which every route and scheduled function runs (`functions/Cargo.toml`).
pub const BINARY: &str = "singlet-lambda";
/// The events bootstrap, which the stream-fed functions run (`functions/Cargo.toml`): their
/// EventBridge and S3 clients stay out of [`BINARY`].
pub const EVENTS_BINARY: &str = "singlet-events-lambda";

/// The binary `function` runs.
pub fn binary_of(function: &str) -> &'static str {
    if singlet_functions::routes::streamed(function).is_some() {
        EVENTS_BINARY
    } else {
        BINARY
    }
}

/// One statement of a function's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Why the statement is there, when the actions do not say it.
    pub why: Option<String>,
    pub actions: Vec<String>,
    /// The resource, as the template writes it.
    pub resource: String,
    /// The partition-key prefixes that bound it (`dynamodb:LeadingKeys`); none for a statement
    /// on an index or outside the table.
    pub leading_keys: Vec<String>,
}

/// The table's ARN, as the template writes it.
pub const TABLE_ARN: &str = "!GetAtt Table.Arn";

/// An index's ARN, as the template writes it.
pub fn index_arn(index: &str) -> String {
    format!("!Sub \"${{Table.Arn}}/index/{index}\"")
}

/// The policy of `function`, which touches `access` (and takes `Idempotency-Key`s when
/// `idempotent`): one statement per set of table actions, bounded by the partition-key prefixes
/// it calls them on ([`Access::table_statements`]: each entity gets only what is called on it,
/// its own idempotency records `GetItem` and `PutItem`, its events' outboxes and the records it
/// makes tombstones `PutItem`, and a deleting route its events' outboxes `Query` and
/// `DeleteItem` too); one `Query` statement per index, unbounded (template.yaml says
/// why, above the functions); and its grants beyond the table.
pub fn policy(function: &str, idempotent: bool, access: &Access) -> Vec<Statement> {
    let mut statements: Vec<Statement> = access
        .table_statements(function, idempotent)
        .into_iter()
        .map(|reach| Statement {
            why: Some(format!("Items of: {}.", reach.holds.join("; "))),
            actions: reach.actions.iter().map(|a| a.iam().to_owned()).collect(),
            resource: TABLE_ARN.to_owned(),
            leading_keys: reach
                .prefixes
                .into_iter()
                .map(|prefix| format!("{prefix}*"))
                .collect(),
        })
        .collect();
    for index in access.indexes {
        statements.push(Statement {
            why: None,
            actions: vec![Action::Query.iam().to_owned()],
            resource: index_arn(index.name),
            leading_keys: Vec::new(),
        });
    }
    for grant in access.grants {
        statements.push(Statement {
            why: Some(grant.why.to_owned()),
            actions: grant.actions.iter().map(|a| (*a).to_owned()).collect(),
            resource: grant.resource.to_owned(),
            leading_keys: Vec::new(),
        });
    }
    statements
}

/// The binary of the stack's tools function (`tools-lambda/Cargo.toml`), which no API function
/// runs.
pub const TOOLS_BINARY: &str = "singlet-tools-lambda";

/// The policy of the stack's tools function (template.yaml's `TableToolsFunction`): what one
/// segment of a migration calls ([`singlet_tools::migrate::on_aws::run_one_segment`]): its
/// `Scan`, the load marker's and a refused item's `GetItem`, the checkpoints' `Query` and
/// `PutItem`, the migration's conditioned writes, alone or as a transaction (whose parts IAM
/// authorises as `PutItem`, `UpdateItem`, `DeleteItem` and `ConditionCheckItem`), and its
/// survey, report and a dry run's place under the results bucket's `migrate/` prefix. On the
/// table only, no index: a migration's items are any entity's, and a `Scan` cannot be bounded
/// by `dynamodb:LeadingKeys`. And what one segment of `fsck` calls
/// ([`singlet_tools::fsck::on_aws::segment`]): the same `Scan`, and its parts and checkpoint
/// read and written under the results bucket's `fsck/` prefix, no other.
pub fn tools_policy() -> Vec<Statement> {
    vec![
        tools_table_statement(
            "One segment of a migration: its Scan, the load marker's and a refused item's \
             consistent reads, its checkpoints, its conditioned writes.",
            &[Action::GetItem],
        ),
        results(
            "One segment of fsck: what it read, and its checkpoint, in the run's results.",
            FSCK_RESULTS_ARN,
        ),
        results(
            "One segment of a migration: its survey, its report so far, a dry run's place.",
            MIGRATE_RESULTS_ARN,
        ),
    ]
}

/// A tools function's statement on the table: `Scan` (the API's functions never scan, so the
/// route table's actions have none), `extra`, and the conditioned writes, alone or as a
/// transaction (whose parts IAM authorises as `PutItem`, `UpdateItem`, `DeleteItem` and
/// `ConditionCheckItem`), with `Query`.
fn tools_table_statement(why: &str, extra: &[Action]) -> Statement {
    let writes = [
        Action::Query,
        Action::PutItem,
        Action::UpdateItem,
        Action::DeleteItem,
        Action::ConditionCheckItem,
    ];
    let actions = ["dynamodb:Scan"]
        .into_iter()
        .chain(extra.iter().chain(&writes).map(|action| action.iam()));
    Statement {
        why: Some(why.to_owned()),
        actions: actions.map(str::to_owned).collect(),
        resource: TABLE_ARN.to_owned(),
        leading_keys: Vec::new(),
    }
}

/// The results of fsck's runs on AWS, as the template writes them: the results bucket's
/// `fsck/` prefix.
pub const FSCK_RESULTS_ARN: &str = "!Sub \"${ToolsResultsBucket.Arn}/fsck/*\"";

/// The results of migrations' runs on AWS: the results bucket's `migrate/` prefix.
pub const MIGRATE_RESULTS_ARN: &str = "!Sub \"${ToolsResultsBucket.Arn}/migrate/*\"";

/// Reading and writing the objects of one tool's runs (`arn`: its prefix), and no other of the
/// bucket (no listing, no delete: each run's objects are named by its checkpoints, and the
/// bucket's lifecycle rule expires them).
fn results(why: &str, arn: &str) -> Statement {
    Statement {
        why: Some(why.to_owned()),
        actions: vec!["s3:GetObject".to_owned(), "s3:PutObject".to_owned()],
        resource: arn.to_owned(),
        leading_keys: Vec::new(),
    }
}

/// The tools function's policy as template.yaml writes it.
pub fn tools_policy_region() -> String {
    let mut yaml = Yaml::default();
    statements_yaml(&mut yaml, &tools_policy());
    yaml.0
}

/// The policy of the tools check function (template.yaml's `TableToolsCheckFunction`), fsck's
/// judge on AWS ([`singlet_tools::fsck::on_aws::judge`]): the segments' results read back and
/// the report written; the load marker's `GetItem`; the confirmation's strongly consistent
/// reads (`GetItem`, which IAM authorises each item of a `TransactGetItems` as, `Query` of
/// a partition, and the `Scan`s of a finding's other items and of a round after repairs); and
/// the repairs' conditioned writes, alone or as a transaction. On the table, no index: the
/// confirmation reads none (an index cannot be read strongly consistent).
pub fn tools_check_policy() -> Vec<Statement> {
    vec![
        tools_table_statement(
            "fsck's judge: the confirmation's consistent reads, the repairs' conditioned writes.",
            &[Action::GetItem],
        ),
        results(
            "fsck's judge: the segments' results read back, its report written.",
            FSCK_RESULTS_ARN,
        ),
        // Where a subject's one-account lock is keyed is the owner key's (OWNER_KEY, else
        // CURSOR_KEY): without it every owner lock would look misplaced.
        server_secret(),
    ]
}

/// The tools check function's policy as template.yaml writes it.
pub fn tools_check_policy_region() -> String {
    let mut yaml = Yaml::default();
    statements_yaml(&mut yaml, &tools_check_policy());
    yaml.0
}

/// Secrets Manager's endpoint in the stack's region and partition.
const SECRETS_ENDPOINT: &str = "!Sub \"https://secretsmanager.${AWS::Region}.${AWS::URLSuffix}\"";

/// What a function that holds the server's keys ([`Route::holds_server_keys`]) may read beyond
/// the table: them, once per cold start (`SERVER_SECRET_ARN`; template.yaml's `ServerSecret`),
/// and no other secret. No other function may read it.
pub fn server_secret() -> Statement {
    Statement {
        why: Some(
            "The server's keys, read once per cold start (SERVER_SECRET_ARN): this secret only."
                .to_owned(),
        ),
        actions: vec!["secretsmanager:GetSecretValue".to_owned()],
        resource: "!Ref ServerSecret".to_owned(),
        leading_keys: Vec::new(),
    }
}

/// `register-vehicle` → `RegisterVehicle`: the stem of the function's logical ids.
pub fn logical_stem(function: &str) -> String {
    function
        .split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// Lines of YAML, each indented by a number of spaces.
#[derive(Default)]
struct Yaml(String);

impl Yaml {
    fn line(&mut self, indent: usize, text: impl AsRef<str>) {
        let _ = writeln!(self.0, "{:indent$}{}", "", text.as_ref());
    }

    fn blank(&mut self) {
        self.0.push('\n');
    }
}

/// What differs between the kinds of function in their block.
struct Block<'a> {
    function: &'a str,
    description: String,
    /// `checkov:skip` reasons, by check.
    skips: [(&'a str, String); 4],
    timeout_seconds: Option<u32>,
    environment: &'a [(&'a str, &'a str)],
    statements: Vec<Statement>,
    /// Properties after the policy (`EventInvokeConfig`), at the properties' indent.
    after_policy: Yaml,
    /// The `Events` mapping's entries, at its indent.
    events: Yaml,
    /// A comment above the block.
    heading: Option<&'a str>,
    /// Alarms beyond errors and throttles.
    iterator_age_alarm: bool,
    /// Whether it runs on the capacity provider when the stack says so (`ManagedInstances`):
    /// the API's functions do; the marker and the publisher, which serve one event at a time,
    /// stay on Lambda's default model.
    managed_instances: bool,
}

/// An API function's place on the capacity provider when the stack puts it there: requests per
/// execution environment, environments kept and allowed, and its `$LATEST.PUBLISHED` version
/// republished with each deployment (what API Gateway's unqualified ARN invokes). The
/// `AWS::LanguageExtensions` transform resolves each `!If` before SAM reads the properties.
const MANAGED_INSTANCES: &[&str] = &[
    "CapacityProviderConfig: !If",
    "  - OnManagedInstances",
    "  - Arn: !GetAtt ApiCapacityProvider.Arn",
    "    PerExecutionEnvironmentMaxConcurrency: !Ref ManagedInstancesMaxConcurrency",
    "  - !Ref AWS::NoValue",
    "FunctionScalingConfig: !If",
    "  - OnManagedInstances",
    "  - MinExecutionEnvironments: !Ref ManagedInstancesMinEnvironments",
    "    MaxExecutionEnvironments: !Ref ManagedInstancesMaxEnvironments",
    "  - !Ref AWS::NoValue",
    "PublishToLatestPublished: !If [OnManagedInstances, true, !Ref AWS::NoValue]",
];

const SKIP_VPC_DYNAMODB: &str = "talks to DynamoDB only, over its public IAM-signed endpoint: a VPC would add NAT or endpoints and cold start";
const SKIP_VARIABLES: &str = "variables are encrypted at rest with the AWS managed key and hold no secret: the server's keys are read from Secrets Manager at cold start";
const SKIP_RESERVED: &str = "reserved by the CriticalReservedConcurrency parameter, which is 0 (none) by default for a new account's small pool";

fn no_reservation(function_count: usize, why: &str) -> String {
    format!(
        "no reserved concurrency: {function_count} reservations would starve a new account's pool; {why}"
    )
}

fn function_count() -> usize {
    ROUTES.len() + SCHEDULED.len() + STREAMED.len()
}

fn route_block(route: &Route) -> Block<'_> {
    let reserved = if CRITICAL.contains(&route.function) {
        SKIP_RESERVED.to_owned()
    } else {
        no_reservation(function_count(), "API throttling caps load")
    };
    let mut events = Yaml::default();
    events.line(8, "Api:");
    events.line(10, "Type: HttpApi");
    events.line(10, "Properties:");
    events.line(12, "ApiId: !Ref HttpApi");
    events.line(12, format!("Method: {}", route.method));
    events.line(12, format!("Path: {}", route.path));
    events.line(12, "Auth:");
    events.line(14, "Authorizer: JwtAuthorizer");
    events.line(14, "AuthorizationScopes:");
    for scope in route.scopes {
        events.line(16, format!("- {scope}"));
    }
    Block {
        function: route.function,
        description: route.key(),
        skips: [
            ("CKV_AWS_115", reserved),
            (
                "CKV_AWS_116",
                "invoked synchronously by API Gateway: a DLQ only ever receives failed asynchronous events".to_owned(),
            ),
            ("CKV_AWS_117", SKIP_VPC_DYNAMODB.to_owned()),
            ("CKV_AWS_173", SKIP_VARIABLES.to_owned()),
        ],
        timeout_seconds: None,
        environment: if route.holds_server_keys() {
            &[
                (SERVER_SECRET_VAR, "!Ref ServerSecret"),
                // The endpoint for the stack's region and partition, so that the function need
                // not know AWS's partitions to read its secret (functions/src/secret.rs).
                (SECRETS_ENDPOINT_VAR, SECRETS_ENDPOINT),
            ]
        } else {
            &[]
        },
        statements: route_policy(route),
        after_policy: Yaml::default(),
        events,
        heading: None,
        iterator_age_alarm: false,
        managed_instances: true,
    }
}

/// A route's [`policy`], and the server's secret when it holds the server's keys.
pub fn route_policy(route: &Route) -> Vec<Statement> {
    let mut statements = policy(route.function, route.idempotent, &route.access);
    if route.holds_server_keys() {
        statements.push(server_secret());
    }
    statements
}

/// How often Lambda (after a failed run) and the schedule (after a failed delivery) try again:
/// a run is safe to repeat, and the next one comes anyway.
const SCHEDULED_RETRIES: u32 = 2;

/// EventBridge's `rate(…)` for every `minutes`.
fn rate(minutes: u32) -> String {
    match minutes {
        1 => "rate(1 minute)".to_owned(),
        n => format!("rate({n} minutes)"),
    }
}

fn scheduled_block(scheduled: &Scheduled) -> Block<'_> {
    let stem = logical_stem(scheduled.function);
    // A run older than the period is superseded by the next one.
    let maximum_age = scheduled.every_minutes * 60;
    let retries = SCHEDULED_RETRIES;
    let mut after_policy = Yaml::default();
    after_policy.line(6, "EventInvokeConfig:");
    after_policy.line(8, format!("MaximumRetryAttempts: {retries}"));
    after_policy.line(8, format!("MaximumEventAgeInSeconds: {maximum_age}"));
    after_policy.line(8, "DestinationConfig:");
    after_policy.line(10, "OnFailure:");
    after_policy.line(12, "Type: SQS");
    after_policy.line(12, format!("Destination: !GetAtt {stem}Failures.Arn"));
    let mut events = Yaml::default();
    events.line(8, "Schedule:");
    events.line(10, "Type: Schedule");
    events.line(10, "Properties:");
    events.line(
        12,
        format!("Name: !Sub \"${{AWS::StackName}}-{}\"", scheduled.function),
    );
    events.line(12, format!("Schedule: {}", rate(scheduled.every_minutes)));
    events.line(12, format!("Description: {}", scheduled.summary));
    events.line(12, "RetryPolicy:");
    events.line(14, format!("MaximumRetryAttempts: {retries}"));
    events.line(14, format!("MaximumEventAgeInSeconds: {maximum_age}"));
    events.line(12, "DeadLetterConfig:");
    events.line(14, format!("Arn: !GetAtt {stem}ScheduleDeadLetters.Arn"));
    let reserved = if CRITICAL.contains(&scheduled.function) {
        SKIP_RESERVED.to_owned()
    } else {
        no_reservation(function_count(), "its schedule bounds its concurrency")
    };
    Block {
        function: scheduled.function,
        description: format!(
            "{}, every {} minutes",
            scheduled.summary, scheduled.every_minutes
        ),
        skips: [
            ("CKV_AWS_115", reserved),
            (
                "CKV_AWS_116",
                "failed runs go to the EventInvokeConfig on-failure queue, which supersedes a DLQ"
                    .to_owned(),
            ),
            ("CKV_AWS_117", SKIP_VPC_DYNAMODB.to_owned()),
            ("CKV_AWS_173", SKIP_VARIABLES.to_owned()),
        ],
        timeout_seconds: Some(scheduled.timeout_seconds),
        environment: &[],
        statements: policy(scheduled.function, false, &scheduled.access),
        after_policy,
        events,
        heading: None,
        iterator_age_alarm: false,
        managed_instances: false,
    }
}

fn streamed_block(streamed: &Streamed) -> Block<'_> {
    let stem = logical_stem(streamed.function);
    let mut events = Yaml::default();
    events.line(8, "Stream:");
    events.line(10, "Type: DynamoDB");
    events.line(10, "Properties:");
    events.line(12, "Stream: !GetAtt Table.StreamArn");
    events.line(
        12,
        format!("StartingPosition: {}", mapping::STARTING_POSITION),
    );
    events.line(12, format!("BatchSize: {}", mapping::BATCH_SIZE));
    events.line(12, "FunctionResponseTypes:");
    events.line(14, "- ReportBatchItemFailures");
    events.line(
        12,
        format!(
            "BisectBatchOnFunctionError: {}",
            mapping::BISECT_BATCH_ON_FUNCTION_ERROR
        ),
    );
    events.line(
        12,
        format!("MaximumRetryAttempts: {}", mapping::MAXIMUM_RETRY_ATTEMPTS),
    );
    events.line(
        12,
        format!(
            "MaximumRecordAgeInSeconds: {}",
            mapping::MAXIMUM_RECORD_AGE_SECONDS
        ),
    );
    events.line(12, "FilterCriteria:");
    events.line(14, "Filters:");
    for filter in mapping::FILTERS {
        events.line(16, format!("- Pattern: '{}'", filter.replace('\'', "''")));
    }
    events.line(12, "DestinationConfig:");
    events.line(14, "OnFailure:");
    events.line(16, "Type: SQS");
    events.line(16, format!("Destination: !GetAtt {stem}Failures.Arn"));
    let reserved = if CRITICAL.contains(&streamed.function) {
        SKIP_RESERVED.to_owned()
    } else {
        no_reservation(
            function_count(),
            "the stream's shards bound its concurrency",
        )
    };
    Block {
        function: streamed.function,
        description: streamed.summary.to_owned(),
        skips: [
            ("CKV_AWS_115", reserved),
            (
                "CKV_AWS_116",
                "records that keep failing go to the event-source mapping's on-failure queue, which a DLQ would not receive".to_owned(),
            ),
            (
                "CKV_AWS_117",
                "talks to AWS services only, over their public IAM-signed endpoints: a VPC would add NAT or endpoints and cold start".to_owned(),
            ),
            ("CKV_AWS_173", SKIP_VARIABLES.to_owned()),
        ],
        timeout_seconds: Some(streamed.timeout_seconds),
        environment: streamed.environment,
        statements: policy(streamed.function, false, &streamed.access),
        after_policy: boundary(&stem),
        events,
        heading: Some(
            "The table's stream -> this function. Its event-source mapping is\n\
             functions/src/events/mapping.rs's, which the local runner plays too: partial batch\n\
             responses, bisection, retries, a record age, and the filters of what it reads.",
        ),
        iterator_age_alarm: true,
        managed_instances: false,
    }
}

/// A stream-fed function's permissions boundary, `<Stem>Boundary` in the hand-written part of
/// `template.yaml`: SAM gives such a function's role the managed policy
/// `AWSLambdaDynamoDBExecutionRole`, whose stream reads are on every stream of the account, and
/// the boundary caps the role to this table's stream and the function's own statements.
fn boundary(stem: &str) -> Yaml {
    let mut yaml = Yaml::default();
    yaml.line(6, format!("PermissionsBoundary: !Ref {stem}Boundary"));
    yaml
}

fn statements_yaml(yaml: &mut Yaml, statements: &[Statement]) {
    yaml.line(6, "Policies:");
    yaml.line(8, "- Version: \"2012-10-17\"");
    yaml.line(10, "Statement:");
    for statement in statements {
        if let Some(why) = &statement.why {
            yaml.line(12, format!("# {why}"));
        }
        yaml.line(12, "- Effect: Allow");
        yaml.line(14, "Action:");
        for action in &statement.actions {
            yaml.line(16, format!("- {action}"));
        }
        yaml.line(14, "Resource:");
        yaml.line(16, format!("- {}", statement.resource));
        if !statement.leading_keys.is_empty() {
            yaml.line(14, "Condition:");
            yaml.line(16, "ForAllValues:StringLike:");
            yaml.line(18, "dynamodb:LeadingKeys:");
            for prefix in &statement.leading_keys {
                yaml.line(20, format!("- \"{prefix}\""));
            }
        }
    }
}

fn alarm(
    yaml: &mut Yaml,
    stem: &str,
    metric: &str,
    description: &str,
    statistic: &str,
    threshold: u32,
) {
    yaml.line(2, format!("{stem}{metric}:"));
    yaml.line(4, "Type: AWS::CloudWatch::Alarm");
    yaml.line(4, "Properties:");
    yaml.line(6, format!("AlarmDescription: {description}"));
    yaml.line(6, "Namespace: AWS/Lambda");
    yaml.line(6, format!("MetricName: {metric}"));
    yaml.line(
        6,
        format!("Dimensions: [{{Name: FunctionName, Value: !Ref {stem}Function}}]"),
    );
    yaml.line(6, format!("Statistic: {statistic}"));
    yaml.line(6, "Period: 300");
    yaml.line(6, "EvaluationPeriods: 1");
    yaml.line(6, format!("Threshold: {threshold}"));
    yaml.line(6, "ComparisonOperator: GreaterThanThreshold");
    yaml.line(6, "TreatMissingData: notBreaching");
    yaml.line(6, "AlarmActions: [!Ref AlarmTopicArn]");
    yaml.line(6, "OKActions: [!Ref AlarmTopicArn]");
}

/// A function's resources: the function, its log group, its alarms.
fn block_yaml(block: &Block) -> String {
    let function = block.function;
    let stem = logical_stem(function);
    let mut yaml = Yaml::default();
    if let Some(heading) = block.heading {
        for line in heading.lines() {
            yaml.line(2, format!("# {}", line.trim()));
        }
    }
    yaml.line(2, format!("{stem}Function:"));
    yaml.line(4, "Type: AWS::Serverless::Function");
    for (check, why) in &block.skips {
        yaml.line(4, format!("# checkov:skip={check}:{why}"));
    }
    yaml.line(4, "Metadata:");
    yaml.line(6, "BuildMethod: rust-cargolambda");
    yaml.line(6, "BuildProperties:");
    yaml.line(8, format!("Binary: {}", binary_of(function)));
    yaml.line(4, "Properties:");
    yaml.line(
        6,
        format!("FunctionName: !Sub \"${{AWS::StackName}}-{function}\""),
    );
    if CRITICAL.contains(&function) {
        yaml.line(
            6,
            "ReservedConcurrentExecutions: !If [ReserveCriticalConcurrency, !Ref CriticalReservedConcurrency, !Ref AWS::NoValue]",
        );
    }
    if block.managed_instances {
        for line in MANAGED_INSTANCES {
            yaml.line(6, line);
        }
    }
    yaml.line(6, "Environment:");
    yaml.line(8, "Variables:");
    yaml.line(10, format!("{FUNCTION_VAR}: {function}"));
    for (name, value) in block.environment {
        yaml.line(10, format!("{name}: {value}"));
    }
    yaml.line(6, "CodeUri: .");
    yaml.line(6, format!("Description: {}", block.description));
    if let Some(timeout) = block.timeout_seconds {
        yaml.line(6, format!("Timeout: {timeout}"));
    }
    yaml.line(6, "LoggingConfig:");
    yaml.line(8, format!("LogGroup: !Ref {stem}Logs"));
    statements_yaml(&mut yaml, &block.statements);
    yaml.0.push_str(&block.after_policy.0);
    yaml.line(6, "Events:");
    yaml.0.push_str(&block.events.0);
    yaml.blank();
    yaml.line(2, format!("{stem}Logs:"));
    yaml.line(4, "Type: AWS::Logs::LogGroup");
    yaml.line(
        4,
        "# checkov:skip=CKV_AWS_158:CloudWatch Logs encrypts at rest already; these logs hold no secrets, and a customer key adds a key policy to run",
    );
    yaml.line(4, "DeletionPolicy: Delete");
    yaml.line(4, "UpdateReplacePolicy: Delete");
    yaml.line(4, "Properties:");
    yaml.line(
        6,
        format!("LogGroupName: !Sub \"/aws/lambda/${{AWS::StackName}}-{function}\""),
    );
    yaml.line(6, "RetentionInDays: !Ref LogRetentionInDays");
    yaml.blank();
    alarm(
        &mut yaml,
        &stem,
        "Errors",
        &format!("{function} errors"),
        "Sum",
        0,
    );
    yaml.blank();
    alarm(
        &mut yaml,
        &stem,
        "Throttles",
        &format!("{function} throttles"),
        "Sum",
        0,
    );
    if block.iterator_age_alarm {
        yaml.blank();
        yaml.line(
            2,
            "# Events falling behind their changes: the age of the newest record read, over a minute.",
        );
        alarm(
            &mut yaml,
            &stem,
            "IteratorAge",
            &format!("{function} is more than a minute behind the table's stream"),
            "Maximum",
            60_000,
        );
    }
    yaml.0
}

/// The template's `functions` region: every function of the route table, the scheduled ones
/// and the stream-fed ones, in that order.
pub fn functions_region() -> String {
    let blocks: Vec<String> = ROUTES
        .iter()
        .map(route_block)
        .chain(SCHEDULED.iter().map(scheduled_block))
        .chain(STREAMED.iter().map(streamed_block))
        .map(|block| block_yaml(&block))
        .collect();
    blocks.join("\n")
}

/// `route`'s function block alone, as `functions_region` renders it.
pub fn route_function(route: &Route) -> String {
    block_yaml(&route_block(route))
}

/// The longest line the router writes on one line (`taplo`'s default width).
const ROUTER_LINE_WIDTH: usize = 100;

/// `Cargo.toml`'s `watch router` region: `cargo lambda watch`'s router, each path with the
/// method of every route on it, all on the one binary. cargo-lambda matches paths with
/// `matchit`, whose `{param}` is API Gateway's, so the paths are the route table's as they are.
pub fn watch_router_region(routes: &[Route]) -> String {
    let mut paths: Vec<(&str, Vec<&str>)> = Vec::new();
    for route in routes {
        match paths.iter_mut().find(|(path, _)| *path == route.path) {
            Some((_, methods)) => methods.push(route.method),
            None => paths.push((route.path, vec![route.method])),
        }
    }
    let entry = |method: &str| format!("{{ method = \"{method}\", function = \"{BINARY}\" }}");
    let mut toml = String::from("[workspace.metadata.lambda.watch.router]\n");
    for (path, methods) in paths {
        let one_line = format!("\"{path}\" = [{}]", entry(methods[0]));
        if methods.len() == 1 && one_line.len() <= ROUTER_LINE_WIDTH {
            let _ = writeln!(toml, "{one_line}");
            continue;
        }
        let _ = writeln!(toml, "\"{path}\" = [");
        for method in methods {
            let _ = writeln!(toml, "    {},", entry(method));
        }
        toml.push_str("]\n");
    }
    toml
}

/// `text` with the lines between `# >>> rendered: <region>` and `# <<< rendered: <region>`
/// replaced by `content` (whole lines); the markers and everything around them are kept.
pub fn replace_region(text: &str, region: &str, content: &str) -> Result<String, String> {
    let begin = format!("# >>> rendered: {region}");
    let end = format!("# <<< rendered: {region}");
    let marker = |wanted: &str| {
        let mut offset = 0;
        let mut found = Vec::new();
        for line in text.split_inclusive('\n') {
            if line.trim() == wanted {
                found.push((offset, offset + line.len()));
            }
            offset += line.len();
        }
        match found[..] {
            [one] => Ok(one),
            [] => Err(format!("no line `{wanted}`")),
            _ => Err(format!("`{wanted}` is there {} times", found.len())),
        }
    };
    let (_, content_start) = marker(&begin)?;
    let (content_end, _) = marker(&end)?;
    if content_end < content_start {
        return Err(format!("`{end}` comes before `{begin}`"));
    }
    Ok(format!(
        "{}{content}{}",
        &text[..content_start],
        &text[content_end..]
    ))
}

/// A file rendered: what it holds and what it should.
pub struct Rendered {
    pub path: PathBuf,
    pub current: String,
    pub rendered: String,
}

impl Rendered {
    pub fn is_current(&self) -> bool {
        self.current == self.rendered
    }
}

fn render_file(path: PathBuf, region: &str, content: &str) -> Result<Rendered, String> {
    render_regions(path, &[(region, content)])
}

/// A file with each of its `regions` (name, content) rendered.
fn render_regions(path: PathBuf, regions: &[(&str, &str)]) -> Result<Rendered, String> {
    let current = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut rendered = current.clone();
    for (region, content) in regions {
        rendered = replace_region(&rendered, region, content)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(Rendered {
        path,
        current,
        rendered,
    })
}

/// `events/env.json`, `sam local invoke --env-vars`' file: every function of the template, in
/// its order, pointed at a local engine through Docker's host name, with the published local
/// key, and `SERVER_SECRET_ARN` emptied on the functions that hold the server's keys (so they
/// take the key from `CURSOR_KEY`, as `sam local` has no secret to read). Rendered whole: JSON
/// has no comment to mark a region with.
pub fn env_vars_file() -> String {
    let functions = ROUTES
        .iter()
        .map(|route| (route.function, route.holds_server_keys()))
        .chain(SCHEDULED.iter().map(|s| (s.function, false)))
        .chain(STREAMED.iter().map(|s| (s.function, false)));
    let blocks: Vec<String> = functions
        .map(|(function, holds_keys)| {
            let mut variables = vec![
                (
                    "AWS_ENDPOINT_URL_DYNAMODB",
                    "http://host.docker.internal:8000",
                ),
                ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "false"),
                ("TABLE_NAME", singlet_shared::schema::DEFAULT_TABLE_NAME),
                ("CURSOR_KEY", singlet_functions::cursor::LOCAL_SECRET),
            ];
            if holds_keys {
                variables.push((SERVER_SECRET_VAR, ""));
            }
            let lines: Vec<String> = variables
                .into_iter()
                .map(|(name, value)| format!("    {}: {}", Value::from(name), Value::from(value)))
                .collect();
            format!(
                "  \"{}Function\": {{\n{}\n  }}",
                logical_stem(function),
                lines.join(",\n")
            )
        })
        .collect();
    format!("{{\n{}\n}}\n", blocks.join(",\n"))
}

/// A file rendered whole; one that is not there yet is rendered as new.
fn render_whole(path: PathBuf, rendered: String) -> Result<Rendered, String> {
    let current = match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        read => read.map_err(|e| format!("cannot read {}: {e}", path.display()))?,
    };
    Ok(Rendered {
        path,
        current,
        rendered,
    })
}

/// `template.yaml`, `Cargo.toml` and `events/env.json` in the repository `root`, rendered.
pub fn render(root: &Path) -> Result<Vec<Rendered>, String> {
    Ok(vec![
        render_regions(
            root.join("template.yaml"),
            &[
                (FUNCTIONS_REGION, &functions_region()),
                (TOOLS_POLICY_REGION, &tools_policy_region()),
                (TOOLS_CHECK_POLICY_REGION, &tools_check_policy_region()),
            ],
        )?,
        render_file(
            root.join("Cargo.toml"),
            WATCH_ROUTER_REGION,
            &watch_router_region(ROUTES),
        )?,
        render_whole(root.join("events/env.json"), env_vars_file())?,
    ])
}

/// The command: write the rendered files (or, with `check`, only say which differ: exit 1).
pub fn cli(root: &Path, check: bool) -> Result<ExitCode, String> {
    let files = render(root)?;
    let stale: Vec<&Rendered> = files.iter().filter(|f| !f.is_current()).collect();
    if check {
        for file in &stale {
            eprintln!(
                "{} differs from its rendering: run `cargo run -- render`",
                file.path.display()
            );
        }
        return Ok(if stale.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    for file in &stale {
        std::fs::write(&file.path, &file.rendered)
            .map_err(|e| format!("cannot write {}: {e}", file.path.display()))?;
        eprintln!("rendered {}", file.path.display());
    }
    if stale.is_empty() {
        eprintln!("template.yaml, Cargo.toml and events/env.json are their rendering already");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use singlet_functions::access::{Grant, NARROWED, Reach, idempotency_records};
    use singlet_functions::events::EventType;
    use singlet_functions::model::Entity;
    use singlet_functions::model::idempotency::IdLock;
    use singlet_functions::model::library::Branch;
    use singlet_shared::schema::{GSI1, INDEXES};

    /// A route nobody wrote a policy for: declared with what it touches, like any other.
    fn umbrella_route() -> Route {
        Route {
            function: "lend-umbrella",
            method: "POST",
            path: "/branches/{branchId}/umbrellas",
            summary: "Lend an umbrella from a branch",
            scopes: &["library:staff"],
            idempotent: true,
            paged: false,
            access: Access {
                table: &[
                    Reach {
                        actions: &[Action::GetItem],
                        entities: &[Branch::TYPE],
                    },
                    Reach {
                        actions: &[Action::PutItem],
                        entities: &[IdLock::TYPE],
                    },
                ],
                indexes: &[GSI1],
                events: &[EventType::BranchCreated],
                ..Access::NONE
            },
            handler: ROUTES[0].handler,
        }
    }

    #[test]
    fn a_new_route_gets_its_function_and_least_privilege_policy_from_its_declaration() {
        let block = route_function(&umbrella_route());
        let expected_policy = r#"      Policies:
        - Version: "2012-10-17"
          Statement:
            # Items of: branch.
            - Effect: Allow
              Action:
                - dynamodb:GetItem
              Resource:
                - !GetAtt Table.Arn
              Condition:
                ForAllValues:StringLike:
                  dynamodb:LeadingKeys:
                    - "BRANCH#*"
            # Items of: id-lock; its events' outbox.
            - Effect: Allow
              Action:
                - dynamodb:PutItem
              Resource:
                - !GetAtt Table.Arn
              Condition:
                ForAllValues:StringLike:
                  dynamodb:LeadingKeys:
                    - "ID#*"
                    - "OUTBOX#branch#*"
            # Items of: its idempotency records.
            - Effect: Allow
              Action:
                - dynamodb:GetItem
                - dynamodb:PutItem
              Resource:
                - !GetAtt Table.Arn
              Condition:
                ForAllValues:StringLike:
                  dynamodb:LeadingKeys:
                    - "IDEMPOTENCY#lend-umbrella#*"
            - Effect: Allow
              Action:
                - dynamodb:Query
              Resource:
                - !Sub "${Table.Arn}/index/GSI1"
"#;
        assert!(block.contains(expected_policy), "{block}");
        for line in [
            "  LendUmbrellaFunction:\n",
            "      FunctionName: !Sub \"${AWS::StackName}-lend-umbrella\"\n",
            "          SINGLET_FUNCTION: lend-umbrella\n",
            // It derives ids from Idempotency-Keys: it holds the server's keys.
            "          SERVER_SECRET_ARN: !Ref ServerSecret\n",
            "          AWS_ENDPOINT_URL_SECRETS_MANAGER: !Sub \"https://secretsmanager.${AWS::Region}.${AWS::URLSuffix}\"\n",
            "                - secretsmanager:GetSecretValue\n",
            "      Description: POST /branches/{branchId}/umbrellas\n",
            "        LogGroup: !Ref LendUmbrellaLogs\n",
            "            Method: POST\n",
            "            Path: /branches/{branchId}/umbrellas\n",
            "                - library:staff\n",
            "  LendUmbrellaLogs:\n",
            "  LendUmbrellaErrors:\n",
            "  LendUmbrellaThrottles:\n",
        ] {
            assert!(block.contains(line), "{line:?} in\n{block}");
        }
        assert!(
            !block.contains("ReservedConcurrentExecutions"),
            "not critical"
        );
        let router = watch_router_region(&[umbrella_route()]);
        assert_eq!(
            router,
            "[workspace.metadata.lambda.watch.router]\n\
             \"/branches/{branchId}/umbrellas\" = [{ method = \"POST\", function = \"singlet-lambda\" }]\n"
        );
    }

    #[test]
    fn a_grant_beyond_the_table_is_its_own_statement() {
        const ACCESS: Access = Access {
            grants: &[Grant {
                why: "The archive, nothing else.",
                actions: &["s3:PutObject"],
                resource: "!Sub \"${ArchiveBucket.Arn}/*\"",
            }],
            ..Access::NONE
        };
        let statements = policy("publish-events", false, &ACCESS);
        assert_eq!(
            statements,
            [Statement {
                why: Some("The archive, nothing else.".into()),
                actions: vec!["s3:PutObject".into()],
                resource: "!Sub \"${ArchiveBucket.Arn}/*\"".into(),
                leading_keys: vec![],
            }]
        );
    }

    /// The rules every rendered policy keeps, whatever is declared.
    #[test]
    fn every_table_statement_is_bounded_by_key_and_every_index_statement_is_one_query() {
        let functions = ROUTES
            .iter()
            .map(|r| (r.function, r.idempotent, &r.access))
            .chain(SCHEDULED.iter().map(|s| (s.function, false, &s.access)))
            .chain(STREAMED.iter().map(|s| (s.function, false, &s.access)));
        for (function, idempotent, access) in functions {
            let statements = policy(function, idempotent, access);
            assert!(!statements.is_empty(), "{function} has a policy");
            for entity in access.entities() {
                assert!(
                    !NARROWED.contains(&entity),
                    "{function} names {}: its partitions come from its route and events",
                    entity.name
                );
            }
            for reach in access.table {
                assert!(
                    !reach.actions.is_empty() && !reach.entities.is_empty(),
                    "{function}: table actions and the entities they reach come together"
                );
            }
            // Each prefix is in one table statement: its actions are all in one place.
            let mut prefixes: Vec<&String> = statements
                .iter()
                .filter(|s| s.resource == TABLE_ARN)
                .flat_map(|s| &s.leading_keys)
                .collect();
            let all = prefixes.len();
            prefixes.sort_unstable();
            prefixes.dedup();
            assert_eq!(
                prefixes.len(),
                all,
                "{function}: a prefix in two statements"
            );
            for statement in &statements {
                assert!(!statement.actions.is_empty(), "{function}");
                if statement.resource == TABLE_ARN {
                    assert!(
                        !statement.leading_keys.is_empty(),
                        "{function}: every table statement is bounded by key"
                    );
                    for prefix in &statement.leading_keys {
                        let stem = prefix.strip_suffix("#*").unwrap_or_else(|| {
                            panic!("{function}: {prefix} is one key prefix ending in #*")
                        });
                        assert!(
                            !stem.is_empty() && !stem.contains('*'),
                            "{function}: {prefix}"
                        );
                    }
                } else if let Some(index) = INDEXES
                    .iter()
                    .find(|index| statement.resource == index_arn(index.name))
                {
                    assert_eq!(
                        statement.actions,
                        [Action::Query.iam()],
                        "{function}: {} is only queried",
                        index.name
                    );
                    assert!(statement.leading_keys.is_empty());
                } else {
                    assert!(
                        statement
                            .actions
                            .iter()
                            .all(|a| !a.starts_with("dynamodb:")),
                        "{function}: a DynamoDB action on {}",
                        statement.resource
                    );
                }
            }
            if idempotent {
                let records = format!("{}*", idempotency_records(function));
                assert!(
                    statements
                        .iter()
                        .any(|s| s.resource == TABLE_ARN && s.leading_keys.contains(&records)),
                    "{function} may touch its idempotency records {records}"
                );
            }
            if let Some(creator) = access.tombstones {
                assert!(
                    ROUTES.iter().any(|r| r.function == creator && r.idempotent),
                    "{function} makes tombstones of {creator}'s records: an idempotent route"
                );
            }
        }
        for function in CRITICAL {
            assert!(
                ROUTES.iter().any(|r| r.function == *function)
                    || SCHEDULED.iter().any(|s| s.function == *function)
                    || STREAMED.iter().any(|s| s.function == *function),
                "{function} is critical but not a function"
            );
        }
    }

    #[test]
    fn the_watch_router_routes_every_route_to_the_one_binary() {
        let router = watch_router_region(ROUTES);
        for route in ROUTES {
            let path = format!("\"{}\" = [", route.path);
            let at = router
                .find(&path)
                .unwrap_or_else(|| panic!("{} is routed", route.path));
            let entries = &router[at..at + router[at..].find(']').unwrap()];
            assert!(
                entries.contains(&format!(
                    "{{ method = \"{}\", function = \"{BINARY}\" }}",
                    route.method
                )),
                "{} {}",
                route.method,
                route.path
            );
        }
        let entries = router.matches("function = ").count();
        assert_eq!(entries, ROUTES.len(), "one entry per route, nothing else");
    }

    #[test]
    fn a_region_is_replaced_and_everything_around_it_kept_byte_for_byte() {
        let text = "a: 1\r\n  # >>> rendered: r\n  old\n  # <<< rendered: r\nb:  2 # mine\n";
        assert_eq!(
            replace_region(text, "r", "  new\n  lines\n").unwrap(),
            "a: 1\r\n  # >>> rendered: r\n  new\n  lines\n  # <<< rendered: r\nb:  2 # mine\n"
        );
        assert!(
            replace_region("a: 1\n", "r", "")
                .unwrap_err()
                .contains("no line")
        );
        let twice = "# >>> rendered: r\n# >>> rendered: r\n# <<< rendered: r\n";
        assert!(
            replace_region(twice, "r", "")
                .unwrap_err()
                .contains("2 times")
        );
        let reversed = "# <<< rendered: r\n# >>> rendered: r\n";
        assert!(replace_region(reversed, "r", "").is_err());
    }

    /// `render --check` fails on a stale file and writes nothing; `render` writes it, after which
    /// the check passes.
    #[test]
    fn check_fails_on_a_stale_file_and_render_makes_it_current() {
        let root = std::env::temp_dir().join(format!("singlet-render-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let stale_template = "Resources:\n  # >>> rendered: functions\n  Old: {}\n  # <<< rendered: functions\n  # >>> rendered: tools policy\n  # <<< rendered: tools policy\n  # >>> rendered: tools check policy\n  # <<< rendered: tools check policy\nOutputs: {}\n";
        let stale_manifest =
            "[package]\n# >>> rendered: watch router\n# <<< rendered: watch router\n";
        std::fs::write(root.join("template.yaml"), stale_template).unwrap();
        std::fs::write(root.join("Cargo.toml"), stale_manifest).unwrap();
        std::fs::create_dir_all(root.join("events")).unwrap();
        assert_eq!(cli(&root, true), Ok(ExitCode::FAILURE));
        assert_eq!(
            std::fs::read_to_string(root.join("template.yaml")).unwrap(),
            stale_template,
            "--check writes nothing"
        );
        assert_eq!(cli(&root, false), Ok(ExitCode::SUCCESS));
        assert_eq!(cli(&root, true), Ok(ExitCode::SUCCESS));
        let template = std::fs::read_to_string(root.join("template.yaml")).unwrap();
        assert!(
            template.starts_with(
                "Resources:\n  # >>> rendered: functions\n  RegisterVehicleFunction:\n"
            )
        );
        assert!(template.ends_with(&format!(
            "  # <<< rendered: functions\n  # >>> rendered: tools policy\n{}  # <<< rendered: tools policy\n  # >>> rendered: tools check policy\n{}  # <<< rendered: tools check policy\nOutputs: {{}}\n",
            tools_policy_region(),
            tools_check_policy_region()
        )));
        assert!(!template.contains("Old: {}"));
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(manifest.starts_with(
            "[package]\n# >>> rendered: watch router\n[workspace.metadata.lambda.watch.router]\n"
        ));
        // The env-vars file, missing, is written whole.
        let env: Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("events/env.json")).unwrap())
                .unwrap();
        assert_eq!(
            env["RegisterVehicleFunction"]["SERVER_SECRET_ARN"], "",
            "{env}"
        );
        assert!(env["GetVehicleFunction"].get("SERVER_SECRET_ARN").is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn logical_ids_are_the_function_in_upper_camel_case() {
        assert_eq!(logical_stem("register-vehicle"), "RegisterVehicle");
        assert_eq!(logical_stem("mark-overdue"), "MarkOverdue");
    }
}

//! How long one engine call of a table tool may take: longer than an API request's.

use aws_sdk_dynamodb::Client;

/// One call of an operator tool (`fsck`, `export`, `migrate`, `import`, `load`, `seed`) may take
/// this long, each attempt: a `Scan` page of up to 1 MB from an engine serving the API at the same
/// time, or a batch a busy table takes its time over. The API's budget
/// ([`singlet_functions::context::timeouts`], 1.5 s an attempt, 4 s in all) is for a request a
/// person waits on under the Lambda's timeout; a tool that hits it under load fails a whole run
/// (`operation timeout after 4s`). The snapshot's copy gives a page as long
/// (the runner's `export_snapshot`); the stack's tools functions take it too, a segment's page
/// read and written as the laptop's.
pub const BULK_ATTEMPT_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

/// The tools' budget: [`BULK_ATTEMPT_BUDGET`] an attempt, the standard retries' three attempts in
/// all, and a few seconds to connect to an endpoint across a network.
pub fn bulk_timeouts() -> aws_sdk_dynamodb::config::timeout::TimeoutConfig {
    aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
        .connect_timeout(std::time::Duration::from_secs(5))
        .operation_attempt_timeout(BULK_ATTEMPT_BUDGET)
        .operation_timeout(BULK_ATTEMPT_BUDGET * 3)
        .build()
}

/// `client` with the tools' budget ([`bulk_timeouts`]) instead of the API's, all else (endpoint,
/// region, credentials, retries, the IAM check) as it was.
pub fn for_bulk_work(client: &Client) -> Client {
    Client::from_conf(
        client
            .config()
            .to_builder()
            .timeout_config(bulk_timeouts())
            .build(),
    )
}

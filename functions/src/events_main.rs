//! `singlet-events-lambda`, the events bootstrap: the stream-fed publisher (`publish-events`,
//! `SINGLET_FUNCTION`), with its EventBridge and S3 clients. A binary of its own so that those
//! clients are not linked into `singlet-lambda`, which every API function runs: the API's
//! bootstrap is smaller and starts faster without them (docs/guide/deploy.md, "`sam
//! build`"). It serves one batch at a time (`lambda::run_streamed`).

fn main() -> Result<(), lambda_runtime::Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(singlet_functions::lambda::run_streamed())
}

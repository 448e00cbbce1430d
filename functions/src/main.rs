//! `singlet-lambda`, the one Lambda binary: every function of `template.yaml` runs it, and its
//! `SINGLET_FUNCTION` variable names the route or scheduled function it serves (see
//! `lambda::run`). One binary lets `sam build` link the program once for all functions.
//!
//! A `current_thread` runtime where Lambda hands the process one event at a time: worker threads
//! would only add to its cold start. Where it hands it many at once (`AWS_LAMBDA_MAX_CONCURRENCY`
//! above 1, Lambda Managed Instances), a worker thread per vCPU, so that one invocation's CPU work
//! (JSON, signing, TLS) does not hold up the others.

fn main() -> Result<(), lambda_runtime::Error> {
    let mut runtime = if singlet_functions::invocation::max_concurrency() > 1 {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    runtime
        .enable_all()
        .build()?
        .block_on(singlet_functions::lambda::run())
}

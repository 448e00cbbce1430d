//! `singlet-lambda`, the one Lambda binary: every function of `template.yaml` runs it, and its
//! `SINGLET_FUNCTION` variable names the route or scheduled function it serves (see
//! `lambda::run`). One binary lets `sam build` link the program once for all functions.
//!
//! A `current_thread` runtime: Lambda hands an instance one event at a time; worker threads would
//! only add to its cold start.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    singlet_functions::lambda::run().await
}

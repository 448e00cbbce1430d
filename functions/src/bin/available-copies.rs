//! The `available-copies` Lambda: the function of the route table named like this binary, on a
//! `current_thread` runtime (Lambda hands an instance one event at a time; worker threads would
//! only add to its cold start).

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    singlet_functions::lambda::run(env!("CARGO_BIN_NAME")).await
}

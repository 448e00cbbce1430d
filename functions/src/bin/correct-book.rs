//! The `correct-book` Lambda: the function of the route table named like this binary.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    singlet_functions::lambda::run(env!("CARGO_BIN_NAME")).await
}

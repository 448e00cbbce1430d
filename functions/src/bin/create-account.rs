//! The `create-account` Lambda: see [`singlet_functions::accounts::create_account`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::accounts::create_account::handle
    ))
    .await
}

//! The `delete-account` Lambda: see [`singlet_functions::accounts::delete_account`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::accounts::delete_account::handle
    ))
    .await
}

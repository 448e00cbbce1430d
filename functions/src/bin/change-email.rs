//! The `change-email` Lambda: see [`singlet_functions::accounts::change_email`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::accounts::change_email::handle
    ))
    .await
}

//! The `change-username` Lambda: see [`singlet_functions::accounts::change_username`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::accounts::change_username::handle
    ))
    .await
}

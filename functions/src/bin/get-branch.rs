//! The `get-branch` Lambda: see [`singlet_functions::library::get_branch`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::get_branch::handle
    ))
    .await
}

//! The `create-branch` Lambda: see [`singlet_functions::library::create_branch`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::create_branch::handle
    ))
    .await
}

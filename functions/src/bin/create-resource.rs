//! The `create-resource` Lambda: see [`singlet_functions::audit::create_resource`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::audit::create_resource::handle
    ))
    .await
}

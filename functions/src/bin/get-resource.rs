//! The `get-resource` Lambda: see [`singlet_functions::audit::get_resource`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::audit::get_resource::handle
    ))
    .await
}

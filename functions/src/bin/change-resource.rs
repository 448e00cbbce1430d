//! The `change-resource` Lambda: see [`singlet_functions::audit::change_resource`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::audit::change_resource::handle
    ))
    .await
}

//! The `resource-history` Lambda: see [`singlet_functions::audit::resource_history`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::audit::resource_history::handle
    ))
    .await
}

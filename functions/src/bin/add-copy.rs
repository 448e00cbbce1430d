//! The `add-copy` Lambda: see [`singlet_functions::library::add_copy`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::add_copy::handle
    ))
    .await
}

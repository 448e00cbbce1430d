//! The `list-copies` Lambda: see [`singlet_functions::library::list_copies`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::list_copies::handle
    ))
    .await
}

//! The `list-patrons` Lambda: see [`singlet_functions::library::list_patrons`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::list_patrons::handle
    ))
    .await
}

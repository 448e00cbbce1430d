//! The `get-patron` Lambda: see [`singlet_functions::library::get_patron`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::get_patron::handle
    ))
    .await
}

//! The `book-availability` Lambda: see [`singlet_functions::library::book_availability`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::book_availability::handle
    ))
    .await
}

//! The `get-book` Lambda: see [`singlet_functions::library::get_book`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::get_book::handle
    ))
    .await
}

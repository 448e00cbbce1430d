//! The `create-book` Lambda: see [`singlet_functions::library::create_book`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::create_book::handle
    ))
    .await
}

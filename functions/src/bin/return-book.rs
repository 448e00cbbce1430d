//! The `return-book` Lambda: see [`singlet_functions::loans::return_book`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::loans::return_book::handle
    ))
    .await
}

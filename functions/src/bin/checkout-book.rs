//! The `checkout-book` Lambda: see [`singlet_functions::loans::checkout_book`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::loans::checkout_book::handle
    ))
    .await
}

//! The `renew-checkout` Lambda: see [`singlet_functions::loans::renew_checkout`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::loans::renew_checkout::handle
    ))
    .await
}

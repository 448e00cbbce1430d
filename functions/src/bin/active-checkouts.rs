//! The `active-checkouts` Lambda: see [`singlet_functions::loans::active_checkouts`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::loans::active_checkouts::handle
    ))
    .await
}

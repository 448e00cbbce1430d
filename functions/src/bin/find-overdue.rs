//! The `find-overdue` Lambda: see [`singlet_functions::loans::find_overdue`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::loans::find_overdue::handle
    ))
    .await
}

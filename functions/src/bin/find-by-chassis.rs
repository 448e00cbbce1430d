//! The `find-by-chassis` Lambda: see [`singlet_functions::fleet::find_by_chassis`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::fleet::find_by_chassis::handle
    ))
    .await
}

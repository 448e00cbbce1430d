//! The `find-by-card` Lambda: see [`singlet_functions::library::find_by_card`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::library::find_by_card::handle
    ))
    .await
}

//! The `change-plate` Lambda: see [`singlet_functions::fleet::change_plate`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::fleet::change_plate::handle
    ))
    .await
}

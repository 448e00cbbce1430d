//! The `register-vehicle` Lambda: see [`singlet_functions::fleet::register_vehicle`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::fleet::register_vehicle::handle
    ))
    .await
}

//! The `find-by-plate` Lambda: see [`singlet_functions::fleet::find_by_plate`].

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    singlet_functions::lambda::serve_http(singlet_functions::handler!(
        singlet_functions::fleet::find_by_plate::handle
    ))
    .await
}

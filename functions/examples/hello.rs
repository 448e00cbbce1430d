//! The cold-start benchmark's baseline: a bare `lambda_http` hello, built by this package with
//! the same `lambda_http` features and the same release profile as every function, and never
//! deployed (an example is not a binary). It does no start-up work of its own: whatever a
//! function's figures add to this one's is the function's own (`benches/cold_start.rs`).

use lambda_http::{Body, Error, Request, Response, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::run(service_fn(|_: Request| async {
        Ok::<_, Error>(
            Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(Body::from(r#"{"hello":"world"}"#))?,
        )
    }))
    .await
}

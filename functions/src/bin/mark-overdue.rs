//! The `mark-overdue` Lambda, on an EventBridge schedule: see
//! [`singlet_functions::loans::mark_overdue`].

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    singlet_functions::loans::mark_overdue::serve().await
}

//! The console's heat view (`/_console/api/heat`): the hottest partition key values of each key
//! family, of the table and of each index, over the last minutes, against the per-key limits
//! (`partition_limits::heat`). Read from the limiter in front of the engine the console's client
//! talks to (the one this process serves); none when the engine is not limited
//! (`--partition-limits off`, `--endpoint`).

use serde_json::{Value, json};

/// The heat report of the runner's engine, as JSON: `{"limited": false}` when no limiter is
/// there (the runner serves no engine of its own with an external `--endpoint`).
pub fn report() -> Value {
    match crate::partition_limits::serving() {
        Some(limiter) => {
            let mut report =
                serde_json::to_value(limiter.meter.report(limiter.second())).expect("JSON");
            report["limited"] = Value::Bool(true);
            report
        }
        None => json!({"limited": false}),
    }
}

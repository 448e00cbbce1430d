//! The console's heat view (`/_console/api/heat`): the hottest partition key values of each key
//! family, of the table and of each index, over the last minutes, against the per-key limits
//! (`partition_limits::heat`). Read from the limiter in front of the engine the console's client
//! talks to ([`EngineSeen`] notes which); none when that engine is not limited
//! (`--partition-limits off`, an external `--endpoint`).

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The engine endpoint the console's client last sent a request to: the SDK's configuration does
/// not say it, its requests do.
#[derive(Debug, Clone, Default)]
pub struct EngineSeen(Arc<Mutex<Option<String>>>);

impl Intercept for EngineSeen {
    fn name(&self) -> &'static str {
        "singlet-console-engine-seen"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let uri = context.request().uri();
        if let Some(rest) = uri.strip_prefix("http://") {
            let authority = rest.split('/').next().unwrap_or(rest);
            let endpoint = format!("http://{authority}");
            let mut seen = self.0.lock().expect("not poisoned");
            if seen.as_deref() != Some(endpoint.as_str()) {
                *seen = Some(endpoint);
            }
        }
        Ok(())
    }
}

impl EngineSeen {
    /// The heat report of the engine seen, as JSON: `{"limited": false}` when no limiter of this
    /// process stands in front of it.
    pub fn report(&self) -> Value {
        let endpoint = self.0.lock().expect("not poisoned").clone();
        match endpoint
            .as_deref()
            .and_then(crate::serve::partition_limits::at)
        {
            Some(limiter) => {
                let mut report =
                    serde_json::to_value(limiter.meter.report(limiter.second())).expect("JSON");
                report["limited"] = Value::Bool(true);
                report
            }
            None => json!({"limited": false}),
        }
    }
}

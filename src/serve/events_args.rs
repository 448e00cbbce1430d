//! The runner's options for domain events, when it serves: where records that fail for good go,
//! and the faults it can inject on demand. Where the local bus writes (`--events-out`) is a runner
//! option, since `invoke publish-events` publishes too.

use crate::serve::engine::streams_client;
use crate::serve::event_source::{EventSource, Faults};
use crate::serve::local_bus::LocalBus;
use singlet_functions::Ctx;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args, Debug, Clone)]
pub struct EventsArgs {
    /// The on-failure destination: Lambda's invocation record of each batch of stream records
    /// that could not be published after the mapping's retries.
    #[arg(long, default_value = ".singlet/events-failed.jsonl")]
    pub events_failed: PathBuf,
    /// Fault: the local bus refuses this share (0..1) of `PutEvents` entries.
    #[arg(long, default_value_t = 0.0)]
    pub fault_put_events: f64,
    /// Fault: every n-th invocation of `publish-events` fails as a whole (0: never).
    #[arg(long, default_value_t = 0)]
    pub fault_publisher_error_every: u64,
    /// Fault: every n-th batch of stream records is delivered twice (0: never).
    #[arg(long, default_value_t = 0)]
    pub fault_duplicate_batch_every: u64,
    /// Fault: write one outbox item whose event does not decode, at start.
    #[arg(long)]
    pub fault_undecodable_outbox: bool,
}

impl EventsArgs {
    /// The local bus writing to `events_out`, refusing the share of entries these options ask.
    pub fn bus(&self, events_out: &Path) -> Result<LocalBus, String> {
        if !(0.0..=1.0).contains(&self.fault_put_events) {
            return Err(format!(
                "--fault-put-events {} is not a share between 0 and 1",
                self.fault_put_events
            ));
        }
        let bus = LocalBus::open(events_out)?;
        Ok(if self.fault_put_events > 0.0 {
            bus.failing(self.fault_put_events, rand::random())
        } else {
            bus
        })
    }

    pub fn faults(&self) -> Faults {
        Faults {
            publisher_error_every: self.fault_publisher_error_every,
            duplicate_batch_every: self.fault_duplicate_batch_every,
        }
    }

    /// The event-source mapping for `ctx`'s table on the engine at `endpoint` (the embedded
    /// one, or an external one), publishing to the local bus that writes `events_out`, its
    /// checkpoint kept in `position_file` when given.
    pub async fn start(
        &self,
        ctx: Ctx,
        events_out: &Path,
        endpoint: &str,
        position_file: Option<PathBuf>,
    ) -> Result<EventSource, String> {
        let ctx = ctx.with_bus(Arc::new(self.bus(events_out)?));
        let streams = streams_client(&ctx.db, endpoint).await;
        let source = EventSource::start(
            ctx.clone(),
            streams,
            self.events_failed.clone(),
            self.faults(),
        )
        .await?;
        let source = match position_file {
            Some(file) => source.remember_in(file),
            None => source,
        };
        if self.fault_undecodable_outbox {
            crate::serve::event_source::write_undecodable_outbox_item(&ctx).await?;
        }
        tracing::info!(
            events = %events_out.display(),
            failed = %self.events_failed.display(),
            "publishing every change's event to the events file"
        );
        Ok(source)
    }
}

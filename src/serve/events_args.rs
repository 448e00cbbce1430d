//! The runner's options for domain events, when it serves: where records that fail for good go,
//! how often the stream is read (or whether it is at all), and the faults it can inject on
//! demand. Where the local bus writes (`--events-out`) is a runner option, since
//! `invoke publish-events` publishes too.

use crate::serve::engine::streams_client;
use crate::serve::event_source::{EventSource, Faults};
use crate::serve::local_bus::LocalBus;
use crate::serve::unstreamed_outbox::before_the_stream;
use singlet_functions::Ctx;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
    /// Publish no events: the table's stream is not read. Its records wait for the next runner
    /// that publishes (the stream keeps them a day, as DynamoDB's does). For an engine whose
    /// streams are slow (moto), when the events do not matter to the run.
    #[arg(long)]
    pub no_events: bool,
    /// How often the table's stream is read when it had nothing new, in milliseconds (Lambda
    /// reads a shard every 250). A longer wait for an engine whose `GetRecords` slows as its
    /// stream grows (moto), so that the reads do not slow the API's own calls.
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub stream_poll_ms: u64,
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

    /// Refuses, before anything is served, an events file or on-failure file that could not be
    /// written safely (a symbolic link, not a regular file, another file's hard link), and makes
    /// an existing one its user's alone (`0600`): they hold whole entities. The on-failure file
    /// is made only when a record fails for good, so it is looked at only when it exists. Nothing
    /// to refuse with `--no-events`, which opens neither.
    pub fn refuse_unsafe_files(&self, events_out: &Path) -> Result<(), String> {
        if self.no_events {
            return Ok(());
        }
        LocalBus::open(events_out)?;
        if std::fs::symlink_metadata(&self.events_failed).is_ok() {
            singlet_tools::files::open_private_append(&self.events_failed).map_err(|e| {
                format!(
                    "cannot open the on-failure file {}: {e}",
                    self.events_failed.display()
                )
            })?;
        }
        Ok(())
    }

    pub fn faults(&self) -> Faults {
        Faults {
            publisher_error_every: self.fault_publisher_error_every,
            duplicate_batch_every: self.fault_duplicate_batch_every,
        }
    }

    /// The event-source mapping for `ctx`'s table on the engine at `endpoint` (the embedded
    /// one, or an external one), publishing to the local bus that writes `events_out`, its
    /// checkpoint kept in `position_file` when given; `None` with `--no-events`.
    ///
    /// A table whose stream is off has its outbox items listed before the mapping switches the
    /// stream on, and delivered first ([`crate::serve::unstreamed_outbox`]); the list is kept beside
    /// the checkpoint.
    pub async fn start(
        &self,
        ctx: Ctx,
        events_out: &Path,
        endpoint: &str,
        position_file: Option<PathBuf>,
    ) -> Result<Option<EventSource>, String> {
        if self.no_events {
            tracing::warn!(
                "--no-events: no event is published; the stream keeps the changes' records for \
                 the next runner that publishes"
            );
            return Ok(None);
        }
        let ctx = ctx.with_bus(Arc::new(self.bus(events_out)?));
        let streams = streams_client(&ctx.db, endpoint).await;
        let (unstreamed, published) = before_the_stream(&ctx, position_file.as_deref()).await?;
        let source = EventSource::start(
            ctx.clone(),
            streams,
            self.events_failed.clone(),
            self.faults(),
        )
        .await?
        .first_delivering(unstreamed)
        .publishing_once(published)
        .polling_every(Duration::from_millis(self.stream_poll_ms));
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
        Ok(Some(source))
    }
}

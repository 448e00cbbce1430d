//! The outbox items whose events the runner has published, kept beside the stream position: what
//! makes each committed change's event go out once when the table's stream is switched off and
//! on again (the second review of issue 45, finding 2).
//!
//! With the stream off, the runner lists the table's outbox items to publish them first
//! ([`crate::serve::unstreamed_outbox`]); without this, the list held the items an earlier stream
//! had already delivered, and they were published again. And a stream switched on again is a new
//! stream (on AWS it holds only the writes made after; dynoxide's still holds the old stream's
//! records), which the kept position, naming the old one, cannot place: it is read from its start.
//! So every outbox item delivered is written here (its key, and when), and neither the list nor
//! the stream delivers one that is.
//!
//! A line is appended after its batch was delivered: a runner killed in between publishes that
//! batch again, with the same `eventId`s, as Lambda's at-least-once delivery does. An outbox item
//! lives a day ([`singlet_functions::events::outbox::KEEP_SECONDS`]); a line is kept twice that,
//! so that an item TTL has not deleted yet is still known, and the file is rewritten without the
//! older ones when it is opened. The file names its table and the table's creation time, as the
//! list does: a table made again (a data file deleted) starts a new one.

use serde_json::Value;
use singlet_functions::events::outbox::KEEP_SECONDS;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The keys of the outbox items published, and where they are kept.
pub struct Published {
    file: Option<PathBuf>,
    keys: HashSet<String>,
}

impl Published {
    /// None kept: a runner with no position file (each run publishes from the start).
    pub fn none() -> Self {
        Self {
            file: None,
            keys: HashSet::new(),
        }
    }

    /// The ledger beside `position_file`, for the table `table` (its name and creation time, as
    /// [`crate::serve::unstreamed_outbox`] names it), read at `now` (epoch seconds).
    pub fn beside(position_file: &Path, table: &str, now: i64) -> Result<Self, String> {
        let file = position_file.with_file_name("published-outbox.txt");
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(format!("cannot read {}: {error}", file.display())),
        };
        let mut lines = text.lines();
        let mut keys = HashSet::new();
        let mut kept = Vec::new();
        let same_table = lines.next() == Some(table);
        let oldest = now - 2 * KEEP_SECONDS;
        if same_table {
            for line in lines {
                let Some((at, key)) = line.split_once(' ') else {
                    continue;
                };
                if at.parse::<i64>().is_ok_and(|at| at >= oldest) {
                    keys.insert(key.to_owned());
                    kept.push(line);
                }
            }
        }
        // Rewritten when it names another table or holds lines past their time.
        if !same_table || kept.len() + 1 < text.lines().count() {
            let mut text = format!("{table}\n");
            for line in kept {
                text.push_str(line);
                text.push('\n');
            }
            let aside = file.with_extension("partial");
            singlet_tools::files::write_private_file(&aside, text)
                .and_then(|()| std::fs::rename(&aside, &file))
                .map_err(|e| format!("cannot keep {}: {e}", file.display()))?;
        }
        Ok(Self {
            file: Some(file),
            keys,
        })
    }

    /// Whether `record` (a Lambda stream record) is the insert of an outbox item published
    /// already.
    pub fn holds(&self, record: &Value) -> bool {
        outbox_key(record).is_some_and(|key| self.keys.contains(&key))
    }

    /// `records` were delivered at `now`: their outbox items are written down.
    pub fn add(&mut self, records: &[Value], now: i64) -> Result<(), String> {
        let mut lines = String::new();
        for key in records.iter().filter_map(outbox_key) {
            lines.push_str(&format!("{now} {key}\n"));
            self.keys.insert(key);
        }
        let Some(file) = &self.file else {
            return Ok(());
        };
        if lines.is_empty() {
            return Ok(());
        }
        singlet_tools::files::open_private_append(file)
            .and_then(|mut out| out.write_all(lines.as_bytes()))
            .map_err(|e| format!("cannot keep {}: {e}", file.display()))
    }
}

/// The key of the outbox item a record inserts (`OUTBOX#…`, `EVENT#…`), as one word of text.
fn outbox_key(record: &Value) -> Option<String> {
    let image = &record["dynamodb"]["NewImage"];
    let pk = image["PK"]["S"].as_str()?;
    let sk = image["SK"]["S"].as_str()?;
    (record["eventName"] == "INSERT" && pk.starts_with(singlet_shared::keys::OUTBOX_PREFIX))
        .then(|| format!("{pk}\t{sk}"))
}

//! The runner's EventBridge: a bus that appends every event it accepts to the events file, one
//! line of JSON each, as an EventBridge rule target receives it (`--events-out`, default
//! `.singlet/events.jsonl`). It can refuse a share of entries on purpose (`--fault-put-events`),
//! as `PutEvents` does under throttling, so the publisher's retries can be seen at work.

use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::json;
use singlet_functions::events::Entry;
use singlet_functions::events::bus::Bus;
use singlet_functions::routes::BoxFuture;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The account and region the local bus names in its events.
pub const ACCOUNT: &str = "000000000000";
pub const REGION: &str = "local";

pub struct LocalBus {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    /// The share of entries refused with `InternalFailure`, and the generator that picks them.
    failure_rate: f64,
    rng: Mutex<StdRng>,
}

impl LocalBus {
    /// A bus appending to `path` (its directory made when missing).
    pub fn open(path: &Path) -> Result<Self, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            singlet_tools::files::create_private_dir(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        // The events carry the entities whole (emails, names, card numbers): the file is its
        // user's alone wherever `--events-out` puts it, an existing one made so, and a symbolic
        // link planted at its name is refused rather than written through.
        let file = singlet_tools::files::open_private_append(path)
            .map_err(|e| format!("cannot open the events file {}: {e}", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
            failure_rate: 0.0,
            rng: Mutex::new(StdRng::seed_from_u64(22)),
        })
    }

    /// The same bus refusing `rate` (0..1) of the entries it is sent, picked by a generator
    /// seeded with `seed` (so a test's faults are the same on every run).
    pub fn failing(mut self, rate: f64, seed: u64) -> Self {
        self.failure_rate = rate;
        self.rng = Mutex::new(StdRng::seed_from_u64(seed));
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn refuse(&self) -> bool {
        self.failure_rate > 0.0 && self.rng.lock().expect("rng").r#gen::<f64>() < self.failure_rate
    }
}

impl Bus for LocalBus {
    fn put_events<'a>(
        &'a self,
        entries: &'a [Entry],
    ) -> BoxFuture<'a, Result<Vec<Option<String>>, String>> {
        Box::pin(async move {
            let mut lines = String::new();
            let mut outcomes = Vec::with_capacity(entries.len());
            let time = singlet_functions::clock::iso(singlet_functions::clock::now());
            for entry in entries {
                if self.refuse() {
                    outcomes.push(Some("InternalFailure".to_owned()));
                    continue;
                }
                let detail: serde_json::Value = serde_json::from_str(&entry.detail)
                    .map_err(|e| format!("an entry's detail is not JSON: {e}"))?;
                let event = json!({
                    "version": "0",
                    "id": uuid_v4(),
                    "detail-type": entry.detail_type,
                    "source": entry.source,
                    "account": ACCOUNT,
                    "time": time,
                    "region": REGION,
                    "resources": [],
                    "detail": detail,
                });
                lines.push_str(&event.to_string());
                lines.push('\n');
                outcomes.push(None);
            }
            // One write per call, so a reader never sees half a line.
            let mut file = self.file.lock().expect("the events file");
            file.write_all(lines.as_bytes())
                .map_err(|e| format!("cannot append to {}: {e}", self.path.display()))?;
            Ok(outcomes)
        })
    }
}

fn uuid_v4() -> String {
    let bytes: [u8; 16] = rand::random();
    let mut hex = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        let byte = match i {
            6 => (byte & 0x0f) | 0x40,
            8 => (byte & 0x3f) | 0x80,
            _ => *byte,
        };
        if matches!(i, 4 | 6 | 8 | 10) {
            hex.push('-');
        }
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

//! The parallel `Scan`: `segments` workers, each paging through its segment of the table, each
//! item turned into what the caller wants (decoded, for the check) as it arrives.

use singlet_functions::Ctx;
use singlet_functions::store::{Item, Scan};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Items read so far, for progress lines.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, n: usize) {
        self.0.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// How a scan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// As a bare `Scan` does: the check's scan, whose findings are all confirmed afterwards.
    Eventually,
    /// Every item written before the scan reached its place is read: the confirmation's scans,
    /// which must not miss an item to prove a finding.
    Strongly,
}

/// Every item of the table, each passed through `each` in the worker that read it.
pub async fn scan<T, F>(
    ctx: &Ctx,
    segments: u32,
    read: Read,
    counter: &Counter,
    each: F,
) -> Result<Vec<T>, String>
where
    T: Send + 'static,
    F: Fn(Item) -> T + Clone + Send + Sync + 'static,
{
    let workers: Vec<_> = (0..segments)
        .map(|segment| {
            let (ctx, counter, each) = (ctx.clone(), counter.clone(), each.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                let mut start = None;
                loop {
                    let mut page = Scan::table().segment(segment, segments).start_after(start);
                    if read == Read::Strongly {
                        page = page.consistent();
                    }
                    let page = ctx
                        .scan(page)
                        .await
                        .map_err(|e| format!("cannot scan the table: {e:?}"))?;
                    counter.add(page.items.len());
                    out.extend(page.items.into_iter().map(&each));
                    start = page.last_key;
                    if start.is_none() {
                        return Ok::<_, String>(out);
                    }
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for worker in workers {
        all.extend(
            worker
                .await
                .map_err(|e| format!("a scan worker failed: {e}"))??,
        );
    }
    Ok(all)
}

/// A bare parallel `Scan` that keeps nothing: the yardstick the bench measures `fsck` against.
pub async fn bare(ctx: &Ctx, segments: u32) -> Result<u64, String> {
    let counter = Counter::default();
    scan(ctx, segments, Read::Eventually, &counter, drop).await?;
    Ok(counter.get())
}

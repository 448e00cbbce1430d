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

/// Every item of the table, each passed through `each` in the worker that read it: every
/// segment's pages ([`segment`]) read side by side, as the tools function reads one of them on
/// AWS.
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
        .map(|n| {
            let (ctx, counter, each) = (ctx.clone(), counter.clone(), each.clone());
            tokio::spawn(async move {
                let pages = Pages {
                    segment: n,
                    segments,
                    read,
                    page_size: None,
                };
                let (items, _) = segment(&ctx, pages, None, &counter, each, |_| false).await?;
                Ok::<_, String>(items)
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

/// Which pages [`segment`] reads.
#[derive(Debug, Clone, Copy)]
pub struct Pages {
    pub segment: u32,
    pub segments: u32,
    pub read: Read,
    /// Items a page, at most (`None`: DynamoDB's 1 MB pages).
    pub page_size: Option<i32>,
}

/// One segment of the parallel `Scan`, from after `start` (a page's last key; `None`: its
/// beginning), each item through `each`, until its end or until `stop`, asked after each page
/// with the items read so far, says to stop: the items, and where it stopped (`None` at the
/// segment's end).
pub async fn segment<T>(
    ctx: &Ctx,
    pages: Pages,
    mut start: Option<Item>,
    counter: &Counter,
    each: impl Fn(Item) -> T,
    mut stop: impl FnMut(usize) -> bool,
) -> Result<(Vec<T>, Option<Item>), String> {
    let mut out = Vec::new();
    loop {
        let mut page = Scan::table()
            .segment(pages.segment, pages.segments)
            .limit(pages.page_size)
            .start_after(start);
        if pages.read == Read::Strongly {
            page = page.consistent();
        }
        let page = ctx
            .scan(page)
            .await
            .map_err(|e| format!("cannot scan the table: {e:?}"))?;
        counter.add(page.items.len());
        out.extend(page.items.into_iter().map(&each));
        start = page.last_key;
        if start.is_none() || stop(out.len()) {
            return Ok((out, start));
        }
    }
}

/// A bare parallel `Scan` that keeps nothing: the yardstick the bench measures `fsck` against.
pub async fn bare(ctx: &Ctx, segments: u32) -> Result<u64, String> {
    let counter = Counter::default();
    scan(ctx, segments, Read::Eventually, &counter, drop).await?;
    Ok(counter.get())
}

//! A write throttle by consumed capacity, shared by the commands that write much (`migrate`,
//! `import`): every write first waits until the write units consumed in the last second (as
//! `ReturnConsumedCapacity` reported them) leave room for it, so no one-second window goes over
//! the limit by more than one write.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The write units consumed in the last second, as a sliding window, and the run's peak.
pub struct Throttle {
    max: Option<f64>,
    window: Mutex<VecDeque<(Instant, f64)>>,
    peak: Mutex<f64>,
}

impl Throttle {
    pub fn new(max: Option<f64>) -> Self {
        Self {
            max,
            window: Mutex::new(VecDeque::new()),
            peak: Mutex::new(0.0),
        }
    }

    /// Waits until `estimate` more units fit in the last second.
    pub async fn admit(&self, estimate: f64) {
        let Some(max) = self.max else { return };
        loop {
            let wait = {
                let mut window = self.window.lock().unwrap();
                let now = Instant::now();
                while window
                    .front()
                    .is_some_and(|(at, _)| now.duration_since(*at) >= Duration::from_secs(1))
                {
                    window.pop_front();
                }
                let used: f64 = window.iter().map(|(_, units)| units).sum();
                if used + estimate <= max || window.is_empty() {
                    // Held in the window now, so that other segments see it before it is sent.
                    window.push_back((now, estimate));
                    return;
                }
                let oldest = window.front().expect("not empty").0;
                Duration::from_secs(1).saturating_sub(now.duration_since(oldest))
            };
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }

    /// The most write units consumed in any one-second window so far.
    pub fn peak(&self) -> f64 {
        *self.peak.lock().unwrap()
    }

    /// Replaces an admitted estimate with what the write consumed.
    pub fn settle(&self, estimate: f64, units: f64) {
        let mut window = self.window.lock().unwrap();
        match window.iter_mut().rev().find(|(_, u)| *u == estimate) {
            Some(entry) if self.max.is_some() => entry.1 = units,
            _ => window.push_back((Instant::now(), units)),
        }
        let now = Instant::now();
        while window
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) >= Duration::from_secs(1))
        {
            window.pop_front();
        }
        let used: f64 = window.iter().map(|(_, units)| units).sum();
        let mut peak = self.peak.lock().unwrap();
        *peak = peak.max(used);
    }
}

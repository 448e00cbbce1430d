//! A long run's progress on standard error, told one way by every table tool (`import`, `fsck`,
//! `migrate`, `export`, `load`).
//!
//! On a terminal the running count is one line rewritten in place (`\r`). On a file or a pipe
//! (CI, a log) a line rewritten with `\r` reads as one long line with whatever is said next run
//! onto its end, so there the count is a line of its own at most once a second, and the final
//! figure always is.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A count is on the terminal's current line, not yet ended by a line break: one standard error,
/// so one flag, which the runner's log lines end too ([`end_line`]) before they are written.
static LINE_OPEN: AtomicBool = AtomicBool::new(false);

/// Ends a count's line on the terminal, if one is open, so that what is written next (a log
/// line, an error) starts a line of its own.
pub fn end_line() {
    if LINE_OPEN.swap(false, Ordering::SeqCst) {
        eprintln!();
    }
}

/// Clears what a longer line written before left on the terminal's line.
const CLEAR_TO_END: &str = "\x1b[K";

pub struct Progress {
    shown: bool,
    terminal: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// When the count was last written on a line of its own (not on a terminal).
    last_line: Option<Instant>,
    /// What that line said: a final count equal to it is not written again.
    last_said: String,
}

impl Progress {
    /// Progress on standard error; `shown: false` says nothing (a test, a library caller).
    pub fn new(shown: bool) -> Self {
        Self {
            shown,
            terminal: std::io::stderr().is_terminal(),
            state: Mutex::default(),
        }
    }

    /// The running count, made only when it is written.
    pub fn count(&self, line: impl FnOnce() -> String) {
        if !self.shown {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.terminal {
            eprint!("\r{}{CLEAR_TO_END}", line());
            LINE_OPEN.store(true, Ordering::SeqCst);
        } else if state
            .last_line
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            state.last_line = Some(Instant::now());
            state.last_said = line();
            eprintln!("{}", state.last_said);
        }
    }

    /// The final count, on a line of its own: on a terminal it replaces the running one.
    pub fn finish(&self, line: &str) {
        if !self.shown {
            return;
        }
        if self.terminal {
            eprintln!("\r{line}{CLEAR_TO_END}");
            LINE_OPEN.store(false, Ordering::SeqCst);
        } else if self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_said
            != line
        {
            eprintln!("{line}");
        }
    }

    /// Ends the terminal's count line, so that what is told next (an error) reads on a line of
    /// its own.
    pub fn interrupt(&self) {
        end_line();
    }
}

/// A run that ends without [`Progress::finish`] (an error returned, or the run dropped on
/// Ctrl-C) ends its count line too, before whatever is told next.
impl Drop for Progress {
    fn drop(&mut self) {
        self.interrupt();
    }
}

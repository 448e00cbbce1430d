//! What a command prints on standard output: its report, its list, its token.
//!
//! `println!` panics when standard output cannot be written, and a reader that has read enough
//! closes it (`singlet fsck --json | head -c 100`, `singlet migrate | grep -q pending`): the
//! command then died with a panic's message and exit `101`, which a script takes for a crash.
//! Here a closed reader stops the printing and nothing else: the command's work is done by the
//! time it prints (a repair is not cut off half way, as a `SIGPIPE` kill could), and its exit code
//! still says what it found. Any other failure to write (a full disk under `> file`) is said on
//! standard error and ends the command with exit `2` ([`COULD_NOT_RUN`]): what it printed is not
//! whole.

use super::runner::COULD_NOT_RUN;
use std::fmt::Display;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once the reader has gone: nothing more is written.
static READER_GONE: AtomicBool = AtomicBool::new(false);

/// `text` and a newline.
pub fn line(text: impl Display) {
    write(format_args!("{text}\n"));
}

/// `text` as it is (it ends its own lines).
pub fn text(text: impl Display) {
    write(format_args!("{text}"));
}

fn write(text: std::fmt::Arguments<'_>) {
    if READER_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    match out.write_fmt(text).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => READER_GONE.store(true, Ordering::Relaxed),
        Err(e) => {
            eprintln!("error: could not write to standard output: {e}");
            std::process::exit(COULD_NOT_RUN.into());
        }
    }
}

//! The runner's logs and its start-up banner. The Lambdas log JSON for CloudWatch
//! (`singlet_functions::lambda`); a person at a terminal gets one readable line per event
//! instead, and a pipe, a file or CI gets the JSON.

use std::io::IsTerminal;
use std::path::Path;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

/// How the runner writes its logs on standard error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `human` on a terminal, `json` otherwise.
    Auto,
    /// One readable line per event.
    Human,
    /// One JSON object per line, as the Lambdas write them.
    Json,
}

/// The filter without `RUST_LOG`: the embedded engine logs every error answer it gives (each
/// `409`'s failed condition) as a warning, and the SDK's credential lookups explain at length
/// why each provider had nothing: only their errors are news here.
pub const DEFAULT_FILTER: &str = "info,dynoxide=error,aws_config=error";

/// Starts logging to standard error in `format`, filtered by `RUST_LOG` or else
/// [`DEFAULT_FILTER`]; answers whether the logs are for a person.
pub fn init(format: LogFormat) -> bool {
    let human = match format {
        LogFormat::Auto => std::io::stderr().is_terminal(),
        LogFormat::Human => true,
        LogFormat::Json => false,
    };
    if !human {
        singlet_functions::lambda::init_tracing_to(std::io::stderr, DEFAULT_FILTER);
        return false;
    }
    let filter: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| DEFAULT_FILTER.parse().expect("a valid default filter"));
    let lines = tracing_subscriber::fmt::layer()
        .compact()
        .with_target(false)
        // A table tool's count may be open on the terminal's line: a log line starts its own.
        .with_writer(|| {
            singlet_tools::progress::end_line();
            OneLine(std::io::stderr())
        });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .try_init();
    true
}

/// Writes each log line as one line: a value a caller chose (a token's `sub`, a header) that
/// holds a line break or another control character would otherwise start a line of its own on
/// the terminal, one that reads as the runner's (`INFO singlet is serving ...`). The JSON logs
/// escape them already. `fmt` writes each event's line in one call, its one line break last.
struct OneLine<W>(W);

impl<W: std::io::Write> std::io::Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(&one_line(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `line` with every control character but a last line break written as `\u{..}`.
fn one_line(line: &[u8]) -> Vec<u8> {
    let (body, end) = match line.strip_suffix(b"\n") {
        Some(body) => (body, &b"\n"[..]),
        None => (line, &b""[..]),
    };
    let mut out = Vec::with_capacity(line.len());
    for &byte in body {
        if byte.is_ascii_control() && byte != b'\t' {
            out.extend_from_slice(format!("\\u{{{byte:02x}}}").as_bytes());
        } else {
            out.push(byte);
        }
    }
    out.extend_from_slice(end);
    out
}

/// What the banner tells.
pub struct Banner<'a> {
    /// The API's base URL, `http://127.0.0.1:3000`.
    pub api: &'a str,
    /// The console's URL with its per-start secret; none with `--no-console`.
    pub console: Option<&'a str>,
    /// The embedded engine's DynamoDB endpoint, when the runner serves one.
    pub engine: Option<&'a str>,
    /// The table's name.
    pub table: &'a str,
    /// Whether the runner accepts its own tokens (not another issuer's, `--jwks`).
    pub own_tokens: bool,
    /// Where its token key is, for the `token` command to copy.
    pub key_dir: &'a Path,
}

/// The lines a person sees when the runner starts on a terminal: where everything is, and the
/// command that gets a token, since every route needs one.
pub fn banner(b: &Banner) -> String {
    let (api, table) = (b.api, b.table);
    let mut text = format!("\nsinglet is serving\n\x20 API       {api}\n");
    if let Some(console) = b.console {
        text += &format!("  console   {console}\n");
    }
    text += &format!("  OpenAPI   {api}/openapi.json\n");
    if let Some(engine) = b.engine {
        text += &format!(
            "  DynamoDB  {engine}   (aws dynamodb scan --table-name {table} --endpoint-url {engine})\n"
        );
    }
    if b.own_tokens {
        let key_dir = if b.key_dir == Path::new(".singlet") {
            String::new()
        } else {
            format!(" --key-dir {}", b.key_dir.display())
        };
        let scopes = singlet_functions::routes::all_scopes().join(" ");
        text += &format!(
            "\nEvery route needs a bearer token. In another terminal, in this directory:\n\
             \x20 export TOKEN=$(cargo run -q --{key_dir} token --scope \"{scopes}\")\n\
             \x20 curl -H \"authorization: Bearer $TOKEN\" {api}/branches\n"
        );
    } else {
        text += "\nEvery route needs a bearer token from the issuer that --jwks names.\n";
    }
    text += "\nCtrl-C stops it.\n\n";
    text
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_value_with_a_line_break_stays_on_its_line() {
        let forged = b"INFO request handled subject=a\nINFO singlet is serving FAKE\r\x1b[2J\n";
        let written = String::from_utf8(one_line(forged)).unwrap();
        assert_eq!(
            written,
            "INFO request handled subject=a\\u{0a}INFO singlet is serving FAKE\\u{0d}\\u{1b}[2J\n"
        );
        assert_eq!(written.lines().count(), 1);
        assert_eq!(one_line(b"tab\tkept\n"), b"tab\tkept\n");
    }
}

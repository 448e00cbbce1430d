//! The local runner: singlet's API on a developer's machine, answering exactly as API Gateway and
//! Lambda do, over an embedded DynamoDB engine (dynoxide) or any external one.

pub mod anonymise;
pub mod auth;
pub mod console;
pub mod engine;
pub mod engine_door;
pub mod event_source;
pub mod events_args;
pub mod front_door;
pub mod fsck;
pub mod iam;
pub mod import;
pub mod invoke;
pub mod local_bus;
pub mod logging;
pub mod migrate;
pub mod partition_limits;
pub mod progress;
pub mod refusal;
pub mod render;
pub mod retention;
pub mod throttle;
pub mod transfer;

/// The server secret the runner uses when `CURSOR_KEY` is not set: public, so that ids derived
/// from `Idempotency-Key`s, cursors and the sample events in `events/` agree across runs and
/// machines. Only the local runner falls back to it; a Lambda without `CURSOR_KEY` does not start.
pub const LOCAL_SECRET: &str = "singlet-local-development-secret-do-not-deploy";

/// Creates `dir` and any parent it lacks readable by their owner alone (`0700` on Unix): what the
/// runner keeps under `.singlet/` (the engine's data, the events, the archive, the signing key)
/// and an export hold personal data. A directory that exists already is left as it is.
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates (or truncates) the file `path`, readable and writable by its owner alone (`0600`) when
/// it is new: what the runner writes from a table (an export's data, an import's rejects, the
/// archive, the engine's file) holds people's data. An existing file keeps its mode.
pub fn create_private_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// [`create_private_file`], holding `bytes`.
pub fn write_private_file(path: &std::path::Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::io::Write;
    create_private_file(path)?.write_all(bytes.as_ref())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_dirs_are_their_owners_alone_and_existing_ones_are_left() {
        let root = std::env::temp_dir().join(format!("singlet-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let inner = root.join("a").join("b");
        super::create_private_dir(&inner).unwrap();
        for dir in [&root, &root.join("a"), &inner] {
            let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o755)).unwrap();
        super::create_private_dir(&inner).unwrap();
        let mode = std::fs::metadata(&inner).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755, "an existing directory is left as it is");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn private_files_are_their_owners_alone_and_existing_ones_keep_their_mode() {
        let file = std::env::temp_dir().join(format!("singlet-private-{}.txt", std::process::id()));
        let _ = std::fs::remove_file(&file);
        super::write_private_file(&file, "one").unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        super::write_private_file(&file, "two").unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "an existing file keeps its mode");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "two",
            "and is rewritten whole"
        );
        std::fs::remove_file(&file).unwrap();
    }
}

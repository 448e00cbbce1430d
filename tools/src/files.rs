//! Files the tools and the runner write from a table: readable by their owner alone.

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

/// Creates (or truncates) the file `path`, readable and writable by its owner alone (`0600`),
/// whether it is new or not: what the runner writes from a table (an export's data, an import's
/// rejects, the archive, the engine's file) holds people's data, and a file left by an earlier
/// run, or planted, with a wider mode would keep showing it to others. An existing file is made
/// `0600` before anything is written into it.
///
/// `path` is never followed if it is a symbolic link (`O_NOFOLLOW`): the tools write beside the
/// files they are given (`<file>.rejects.jsonl`), often in a folder others can write to, where a
/// link planted under that name would have its target truncated and overwritten. Nor is anything
/// but a regular file written (a FIFO would hold the tool, a device take the bytes): it is opened
/// without blocking and without truncating, looked at, and only then truncated; nor a file with
/// another name (a hard link), whose other names would see it overwritten.
pub fn create_private_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true);
    let file = open_private(path, options, "remove it (the file is made anew)")?;
    file.set_len(0)?;
    Ok(file)
}

/// Opens the file `path` to append to, creating it when missing, readable and writable by its
/// owner alone (`0600`) whether it is new or not: the runner's events files (`--events-out`,
/// `--events-failed`) hold whole entities, personal data included, and are kept across runs.
/// As [`create_private_file`]: a symbolic link is never followed (`O_NOFOLLOW`), only a regular
/// file is written, never one with other names (a hard link), and an existing file is made
/// `0600` before anything is appended. Nothing already in the file is touched.
pub fn open_private_append(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    open_private(path, options, "remove it, or name another file")
}

/// `path` opened with `options`, as [`create_private_file`] and [`open_private_append`] say:
/// never through a symbolic link, only a regular file with no other name, made `0600`. `remedy`
/// tells a person what to do about a link.
fn open_private(
    path: &std::path::Path,
    mut options: std::fs::OpenOptions,
    remedy: &str,
) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // `O_NONBLOCK` only so that opening a FIFO fails rather than waits for a reader; a
        // regular file ignores it.
        options
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("it is a symbolic link, which is never written through: {remedy}"),
            );
        }
        e
    })?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // A hard link planted under that name is the same file as its target, which writing
        // would overwrite or show under its other names (`O_NOFOLLOW` stops only symbolic links).
        if metadata.nlink() > 1 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "it has other names (hard links), which would see what is written: {remedy}"
                ),
            ));
        }
        if metadata.permissions().mode() & 0o7777 != 0o600 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(file)
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
    fn private_files_are_their_owners_alone_even_when_they_exist() {
        let file = std::env::temp_dir().join(format!("singlet-private-{}.txt", std::process::id()));
        let _ = std::fs::remove_file(&file);
        super::write_private_file(&file, "one").unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        super::write_private_file(&file, "two").unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "an existing file is made its owner's alone");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "two",
            "and is rewritten whole"
        );
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn a_private_file_is_never_written_through_a_link() {
        let dir = std::env::temp_dir().join(format!("singlet-private-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("target.txt");
        std::fs::write(&target, "kept").unwrap();
        let link = dir.join("link.txt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let refused = super::write_private_file(&link, "written").unwrap_err();
        assert!(refused.to_string().contains("symbolic link"), "{refused}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

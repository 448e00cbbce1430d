//! The copy `export` takes of the embedded engine's file (`src/export_snapshot.rs`): a whole copy
//! of the table, so private wherever the data file is, and never left behind for good.

use crate::transfer::scratch;
use singlet::export_snapshot::take;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn copies(dir: &Path) -> Vec<PathBuf> {
    let mut copies: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(".export-snapshot-"))
        })
        .collect();
    copies.sort();
    copies
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// In a folder others can read (a `--data` file outside `.singlet/`), the copy's directory is
/// its owner's alone and so is the copy; the copies earlier exports left when they were killed
/// (nobody holds them) are removed, a copy another export holds is not, and each export removes
/// its own.
#[tokio::test]
async fn the_exports_copy_is_its_owners_alone_and_no_abandoned_copy_stays() {
    let dir = scratch("snapshot-private");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.join("table.db");
    drop(dynoxide::Database::new(data.to_str().unwrap()).unwrap());
    // Left by exports killed before they removed their copy: one after holding it, one before.
    for (left, held) in [
        (".export-snapshot-killed", true),
        (".export-snapshot-early", false),
    ] {
        let left = dir.join(left);
        std::fs::create_dir(&left).unwrap();
        std::fs::write(left.join("snapshot.db"), "a whole copy of the table").unwrap();
        if held {
            std::fs::write(left.join("held"), "").unwrap();
        }
    }

    let first = take(&data).await.unwrap();
    let made = copies(&dir);
    assert_eq!(made.len(), 1, "the abandoned copies are removed: {made:?}");
    assert_eq!(mode(&made[0]), 0o700, "the copy's directory");
    assert_eq!(mode(&made[0].join("snapshot.db")), 0o600, "the copy");

    let second = take(&data).await.unwrap();
    assert_eq!(copies(&dir).len(), 2, "a copy another export holds stays");
    drop(first);
    drop(second);
    assert_eq!(
        copies(&dir),
        Vec::<PathBuf>::new(),
        "each export removes its own"
    );
}

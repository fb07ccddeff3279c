//! The repository's own files, for the tests that check them: every file with an extension
//! under a folder, build output and dependencies left out.

use std::path::{Path, PathBuf};

/// Folders never searched: build output, installed packages, version control.
const SKIPPED: [&str; 3] = ["target", "node_modules", ".git"];

/// The repository's root.
pub(crate) fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` whose name ends with `.{extension}`, in a stable order.
pub(crate) fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !SKIPPED.contains(&name) {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|e| e == extension) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

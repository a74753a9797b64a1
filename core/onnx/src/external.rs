//! External data files on disk, read under the rule onnxruntime applies: a model's
//! external initializers live inside the model's folder, so a model file from someone
//! else cannot make the importer read (and a later export write out) any other file.
//!
//! - [`resolve`] is the path rule: `location` is relative (no root, no drive), and the
//!   canonical path of `folder/location` (every `..` and symlink followed) lies inside
//!   the canonical folder and is a regular file (not a directory, device or FIFO).
//! - [`read`] applies it, then opens the file without blocking (a FIFO swapped in
//!   after the check cannot hang the read), checks the opened file is still a regular
//!   one, checks `offset + length` against its size, and reads only those bytes.
//!
//! The words are onnxruntime's where it has them ("external data path escapes model
//! directory", "absolute path not allowed"); the importer adds the tensor's name and
//! location.

use crate::ExternalRef;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

/// The file `location` names, resolved against the model's `folder` (`""` is the
/// current directory), or why it may not be read.
pub fn resolve(folder: &Path, location: &str) -> Result<PathBuf, String> {
    let rel = Path::new(location);
    if location.is_empty() {
        return Err("the location is empty".into());
    }
    if rel.has_root() || rel.components().any(|c| matches!(c, Component::Prefix(_))) {
        return Err("absolute path not allowed".into());
    }
    let folder = match folder.as_os_str().is_empty() {
        true => Path::new("."),
        false => folder,
    };
    let base = folder
        .canonicalize()
        .map_err(|e| format!("the model's folder {}: {e}", folder.display()))?;
    let path = base
        .join(rel)
        .canonicalize()
        .map_err(|e| format!("cannot open it: {e}"))?;
    if !path.starts_with(&base) {
        return Err(format!(
            "external data path escapes model directory ({} is outside {})",
            path.display(),
            base.display()
        ));
    }
    let meta = std::fs::metadata(&path).map_err(|e| format!("cannot open it: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    Ok(path)
}

/// Exactly `r.length` bytes from `r.offset` of the file `r.location` names inside
/// `folder` ([`resolve`]), or why not.
pub fn read(folder: &Path, r: &ExternalRef<'_>) -> Result<Vec<u8>, String> {
    let path = resolve(folder, r.location)?;
    let mut file = open_no_block(&path).map_err(|e| format!("cannot open it: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let size = meta.len();
    let end = r.offset.checked_add(r.length).filter(|&end| end <= size);
    let Some(end) = end else {
        return Err(format!(
            "bytes {}..{} are past the end of the file ({size} bytes)",
            r.offset,
            r.offset
                .checked_add(r.length)
                .map_or("?".into(), |e| e.to_string()),
        ));
    };
    // Not more than the file holds, as just checked; on a 32-bit host also addressable.
    let len =
        usize::try_from(end - r.offset).map_err(|_| format!("{} bytes do not fit in memory", r.length))?;
    let mut bytes = vec![0u8; len];
    file.seek(SeekFrom::Start(r.offset))
        .and_then(|_| file.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read bytes {}..{end}: {e}", r.offset))?;
    Ok(bytes)
}

/// Opens `path` for reading such that a FIFO does not block and a symlink planted at
/// its last component is not followed (the path is canonical, so it has none).
#[cfg(unix)]
fn open_no_block(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_block(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

#[cfg(test)]
mod tests {
    use super::{read, resolve};
    use crate::ExternalRef;
    use std::path::{Path, PathBuf};

    /// A fresh folder `model` with `w.bin` (16 bytes) in it, inside a fresh parent that
    /// also holds `secret.bin`.
    fn folder(tag: &str) -> (PathBuf, PathBuf) {
        let top = std::env::temp_dir().join(format!("torchlet-onnx-external-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        let model = top.join("model");
        std::fs::create_dir_all(model.join("sub")).unwrap();
        std::fs::write(model.join("w.bin"), (0u8..16).collect::<Vec<_>>()).unwrap();
        std::fs::write(top.join("secret.bin"), b"secret").unwrap();
        (top, model)
    }

    fn at(location: &str, offset: u64, length: u64) -> ExternalRef<'_> {
        ExternalRef {
            tensor: "t",
            location,
            offset,
            length,
        }
    }

    #[test]
    fn a_file_inside_the_folder_resolves_also_through_a_subfolder_and_back() {
        let (_top, model) = folder("inside");
        let want = model.join("w.bin").canonicalize().unwrap();
        assert_eq!(resolve(&model, "w.bin").unwrap(), want);
        assert_eq!(resolve(&model, "sub/../w.bin").unwrap(), want);
        assert_eq!(resolve(&model, "./w.bin").unwrap(), want);
        // The model's own file is a regular file inside its folder too.
        std::fs::write(model.join("model.onnx"), b"onnx").unwrap();
        assert!(resolve(&model, "model.onnx").is_ok());
    }

    #[test]
    fn an_empty_folder_is_the_current_directory() {
        let e = resolve(Path::new(""), "no-such-file-here.bin").unwrap_err();
        assert!(e.contains("cannot open"), "{e}");
    }

    #[test]
    fn absolute_paths_are_refused() {
        let (_top, model) = folder("absolute");
        let abs = model.join("w.bin");
        for loc in [abs.to_str().unwrap(), "/etc/passwd", "/proc/self/environ"] {
            let e = resolve(&model, loc).unwrap_err();
            assert_eq!(e, "absolute path not allowed", "{loc}");
        }
    }

    #[test]
    fn dot_dot_and_symlinks_leading_out_are_refused() {
        let (top, model) = folder("escape");
        let e = resolve(&model, "../secret.bin").unwrap_err();
        assert!(e.starts_with("external data path escapes model directory"), "{e}");
        let e = resolve(&model, "sub/../../secret.bin").unwrap_err();
        assert!(e.starts_with("external data path escapes model directory"), "{e}");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(top.join("secret.bin"), model.join("link.bin")).unwrap();
            let e = resolve(&model, "link.bin").unwrap_err();
            assert!(e.starts_with("external data path escapes model directory"), "{e}");
            std::os::unix::fs::symlink(&top, model.join("up")).unwrap();
            let e = resolve(&model, "up/secret.bin").unwrap_err();
            assert!(e.starts_with("external data path escapes model directory"), "{e}");
            // A symlink that stays inside is fine.
            std::os::unix::fs::symlink("w.bin", model.join("alias.bin")).unwrap();
            assert!(resolve(&model, "alias.bin").is_ok());
        }
    }

    #[test]
    fn directories_and_missing_files_are_refused() {
        let (_top, model) = folder("kinds");
        let e = resolve(&model, "sub").unwrap_err();
        assert!(e.ends_with("is not a regular file"), "{e}");
        let e = resolve(&model, "missing.bin").unwrap_err();
        assert!(e.contains("cannot open"), "{e}");
        assert_eq!(resolve(&model, "").unwrap_err(), "the location is empty");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (_top, model) = folder("fifo");
        let fifo = model.join("pipe.bin");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let e = read(&model, &at("pipe.bin", 0, 4)).unwrap_err();
        assert!(e.ends_with("is not a regular file"), "{e}");
    }

    #[test]
    fn only_the_declared_range_is_read_and_it_must_lie_inside_the_file() {
        let (_top, model) = folder("range");
        assert_eq!(
            read(&model, &at("w.bin", 4, 8)).unwrap(),
            (4u8..12).collect::<Vec<_>>()
        );
        assert_eq!(read(&model, &at("w.bin", 16, 0)).unwrap(), Vec::<u8>::new());
        let e = read(&model, &at("w.bin", 12, 8)).unwrap_err();
        assert_eq!(e, "bytes 12..20 are past the end of the file (16 bytes)");
        // A length that would need 4 EiB is refused by the size check, not allocated.
        let e = read(&model, &at("w.bin", 0, 1 << 62)).unwrap_err();
        assert!(e.contains("past the end"), "{e}");
        let e = read(&model, &at("w.bin", u64::MAX, 2)).unwrap_err();
        assert!(e.contains("..?"), "{e}");
    }
}

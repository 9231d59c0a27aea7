//! The formats a run's results go out in, behind one trait: the HTML page
//! ([`html`]), CSV ([`csv`]), iperf3's JSON document and event lines
//! ([`iperf3`]), OpenMetrics and Prometheus' text format ([`openmetrics`]),
//! Kubernetes YAML ([`yaml`]) and Prometheus alert rules ([`rules`]).
//!
//! A value that implements [`Export`] is a document ready to go out: it
//! names its format and media type, renders itself whole, and writes
//! itself to a file whole or not at all ([`write_whole`]). What a
//! document says (a report's sections, a mesh's objects and rules) is its
//! maker's; how it is written is here, once for every maker.
//!
//! Invariants: rendering never touches the disk; a file written here is
//! replaced by a rename, so a reader (a browser, Prometheus reloading its
//! rules, `kubectl apply -f`) sees the old document or the new one, never
//! half; nothing is written over a path that is not a regular file.

pub mod csv;
pub mod html;
pub mod iperf3;
pub mod openmetrics;
pub mod rules;
pub mod yaml;

use std::path::Path;

/// Why a document did not go out.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The document cannot be written in its format (a value YAML cannot
    /// hold, a rule with no name).
    #[error("{format}: {reason}")]
    Render {
        format: &'static str,
        reason: String,
    },
    /// The path is a directory, a device or a socket: a document is
    /// written only to a file of its own.
    #[error(
        "{path}: it exists and is not a regular file; netlab writes {format} only to a file of its own"
    )]
    NotAFile { path: String, format: &'static str },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A document in one of the formats a run's results go out in.
pub trait Export {
    /// The format's name, as errors say it (`CSV`, `OpenMetrics`).
    const FORMAT: &'static str;
    /// Its media type: an HTTP answer's `Content-Type`, a file's kind.
    const MEDIA_TYPE: &'static str;

    /// The document whole.
    fn render(&self) -> Result<String, ExportError>;

    /// Writes the document to `path` whole or not at all ([`write_whole`]).
    fn write_to(&self, path: &Path) -> Result<(), ExportError> {
        write_whole(path, Self::FORMAT, self.render()?.as_bytes())
    }
}

/// Writes `bytes` to `path` through a temporary file beside it, synced
/// and renamed over it: whole or not at all, and never over something
/// that is not a regular file (as root, a path of `/dev/full` would have
/// put a file where the device was).
pub fn write_whole(path: &Path, format: &'static str, bytes: &[u8]) -> Result<(), ExportError> {
    let failed = |source| ExportError::Write {
        path: path.display().to_string(),
        source,
    };
    if std::fs::symlink_metadata(path).is_ok_and(|meta| !meta.is_file()) {
        return Err(ExportError::NotAFile {
            path: path.display().to_string(),
            format,
        });
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
    std::io::Write::write_all(&mut file, bytes)
        .and_then(|()| file.as_file().sync_all())
        .map_err(failed)?;
    file.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Note(&'static str);

    impl Export for Note {
        const FORMAT: &'static str = "note";
        const MEDIA_TYPE: &'static str = "text/plain";
        fn render(&self) -> Result<String, ExportError> {
            Ok(self.0.to_string())
        }
    }

    #[test]
    fn a_document_replaces_its_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("note.txt");
        Note("first\n").write_to(&path).unwrap();
        Note("second\n").write_to(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_path_that_is_not_a_file_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let e = Note("x").write_to(dir.path()).unwrap_err();
        assert!(matches!(e, ExportError::NotAFile { .. }), "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(dir.path().is_dir());
        let missing = dir.path().join("no/such/dir/note.txt");
        let e = Note("x").write_to(&missing).unwrap_err();
        assert!(e.to_string().contains("no/such/dir"), "{e}");
    }
}

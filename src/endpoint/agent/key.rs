//! The pre-shared key of a controller and its agents: 32 random bytes, one
//! line of hex in a file only its owner may read.
//!
//! The same file goes to the controller and to every agent it may use
//! (`docs/DEPLOY.md`). The key never leaves the host in any form: the Noise
//! handshake ([`super::channel`]) mixes it in as its PSK, so a peer proves it
//! holds the key without sending it.

use std::fmt;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use thiserror::Error;

/// Bytes of a key (the Noise PSK length).
pub const KEY_LEN: usize = 32;
/// The most of a key file read (a key is one line of under 200 bytes).
const MAX_KEY_FILE: u64 = 4096;

const HEADER: &str =
    "# netlab agent key: keep it secret; the same file on the controller and its agents";

/// A pre-shared key. Its `Debug` form does not show the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

#[derive(Debug, Error)]
pub enum KeyError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write {path}: the directory {dir} does not exist (netlab does not create it)")]
    NoDirectory { path: String, dir: String },
    #[error("{0} exists; refusing to overwrite a key (remove it first if you mean to replace it)")]
    Exists(String),
    #[error(
        "{path} may be read by others (mode {mode:04o}); a key must be private: chmod 600 {path}"
    )]
    Exposed { path: String, mode: u32 },
    #[error("{path} is not a netlab key: expected one line of {} hex digits", KEY_LEN * 2)]
    Malformed { path: String },
    #[error("{0}")]
    NotAFile(String),
    #[error("cannot get random bytes from the kernel: {0}")]
    Random(String),
}

impl Key {
    /// A fresh key from the kernel's random source.
    pub fn generate() -> Result<Key, KeyError> {
        let mut bytes = [0u8; KEY_LEN];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(Key(bytes))
    }

    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Key {
        Key(bytes)
    }

    pub fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// The file's text: a comment line, then the key in hex.
    pub fn to_text(&self) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("{HEADER}\n{hex}\n")
    }

    /// Parses a key file's text (comment lines and blank lines are skipped).
    pub fn parse(text: &str) -> Option<Key> {
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        let hex = lines.next()?;
        if lines.next().is_some() || hex.len() != KEY_LEN * 2 {
            return None;
        }
        let mut bytes = [0u8; KEY_LEN];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Key(bytes))
    }

    /// Writes a new key to `path`, mode 0600, refusing to overwrite.
    pub fn write_new(&self, path: &Path) -> Result<(), KeyError> {
        let shown = path.display().to_string();
        crate::record::existing_parent(path).map_err(|dir| KeyError::NoDirectory {
            path: shown.clone(),
            dir,
        })?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::AlreadyExists => KeyError::Exists(shown.clone()),
                _ => KeyError::Io {
                    path: shown.clone(),
                    source,
                },
            })?;
        // The umask can only take bits away from 0600; set it anyway so
        // the mode is exactly what the key needs.
        let io = |source| KeyError::Io {
            path: shown.clone(),
            source,
        };
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io)?;
        file.write_all(self.to_text().as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)
    }

    /// Reads the key at `path`, refusing a file that others may read, or
    /// that is not a regular file.
    pub fn load(path: &Path) -> Result<Key, KeyError> {
        let shown = path.display().to_string();
        let io = |source| KeyError::Io {
            path: shown.clone(),
            source,
        };
        // A regular file, opened without waiting (a FIFO would block the
        // open for ever) and read no further than a key could be.
        let file = crate::record::files::open_regular(path, "a key").map_err(|e| match e {
            crate::record::files::FileError::Io { source, .. } => io(source),
            other => KeyError::NotAFile(other.to_string()),
        })?;
        let mode = file.metadata().map_err(io)?.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Exposed { path: shown, mode });
        }
        let text = std::io::read_to_string(file.take(MAX_KEY_FILE)).map_err(io)?;
        Key::parse(&text).ok_or(KeyError::Malformed { path: shown })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_key_loads_back_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.key");
        let key = Key::generate().unwrap();
        key.write_new(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(Key::load(&path).unwrap(), key);
        assert!(matches!(key.write_new(&path), Err(KeyError::Exists(_))));
        assert_eq!(
            Key::load(&path).unwrap(),
            key,
            "the refused write left it alone"
        );
    }

    #[test]
    fn two_keys_differ() {
        assert_ne!(Key::generate().unwrap(), Key::generate().unwrap());
    }

    #[test]
    fn exposed_and_malformed_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, Key::generate().unwrap().to_text()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = Key::load(&path).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
        for text in [
            "",
            "abc\n",
            &"zz".repeat(32),
            &format!("{}\n{}", "00".repeat(32), "00".repeat(32)),
        ] {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert!(
                matches!(Key::load(&path), Err(KeyError::Malformed { .. })),
                "{text:?}"
            );
        }
    }

    #[test]
    fn debug_hides_the_key() {
        let key = Key::from_bytes([0xab; KEY_LEN]);
        assert!(!format!("{key:?}").contains("ab"));
    }
}

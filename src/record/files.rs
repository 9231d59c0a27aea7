//! Files netlab reads that a user or another program wrote (records, a
//! mesh's manifest and results, inventories, corpora, keys): read under a
//! size limit that says so, only when they are regular files (a symlink to
//! `/dev/zero` or a FIFO is refused before a byte is read), and, for line
//! files, a line at a time: one bad line (not UTF-8, not JSON, longer than
//! [`MAX_LINE`]) costs that line, named by its number, and nothing else.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use thiserror::Error;

/// Largest records or results file read (a mesh of 1000 agents writes
/// about a million lines of under 1 KB).
pub const MAX_RECORDS_FILE: u64 = 2 << 30;
/// Largest line of a records or results file (the longest record netlab
/// writes, a profiled stream cell's, is under 100 KB).
pub const MAX_LINE: usize = 4 << 20;
/// Largest small file: a manifest, an inventory, a key.
pub const MAX_SMALL_FILE: u64 = 64 << 20;

#[derive(Debug, Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a regular file (it is {kind}): netlab reads {what} only from files")]
    NotAFile {
        path: String,
        kind: &'static str,
        what: &'static str,
    },
    #[error("{path} is {size} bytes; netlab reads at most {limit} bytes of {what}")]
    TooLarge {
        path: String,
        size: u64,
        limit: u64,
        what: &'static str,
    },
}

impl FileError {
    /// Whether the file is simply not there (a reader may treat that as empty).
    pub fn is_missing(&self) -> bool {
        matches!(self, FileError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Opens `path` (following symlinks) if it is a regular file, without
/// waiting: a FIFO's open(2) would block until something writes to it
/// (for ever, and deaf to SIGTERM's flag), so the open does not block
/// (`O_NONBLOCK`) and the type is checked on the descriptor before a byte
/// is read; the descriptor blocks again for the reads.
pub fn open_regular(path: &Path, what: &'static str) -> Result<File, FileError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| FileError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotAFile {
            path: path.display().to_string(),
            kind: kind_of(&meta),
            what,
        });
    }
    // SAFETY: fcntl on a descriptor this function owns.
    let cleared = unsafe {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if !cleared {
        return Err(io(std::io::Error::last_os_error()));
    }
    Ok(file)
}

/// The path that means standard input where a file is read whole or by
/// lines (records, corpora, a file to pace, a calibration): `-`.
pub const STDIN: &str = "-";

/// Whether `path` is [`STDIN`].
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// Standard input read under a size limit, and never for ever: each read
/// waits at most [`crate::measure::stop::POLL`] before looking at the stop
/// flag again, so SIGTERM ends a read from a pipe nobody writes to.
pub struct StdinInput {
    limit: u64,
    taken: u64,
    what: &'static str,
}

impl StdinInput {
    pub fn new(limit: u64, what: &'static str) -> Self {
        StdinInput {
            limit,
            taken: 0,
            what,
        }
    }
}

impl Read for StdinInput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        if buf.is_empty() {
            return Ok(0);
        }
        let stdin = std::io::stdin();
        loop {
            crate::measure::stop::check()?;
            let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
            let wait = PollTimeout::from(crate::measure::stop::POLL.as_millis() as u16);
            match poll(&mut fds, wait) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Ok(_) => break,
                Err(e) => return Err(e.into()),
            }
        }
        // One byte past the limit tells "exactly the limit" from "more".
        let room = self.limit.saturating_add(1).saturating_sub(self.taken);
        let take = buf
            .len()
            .min(usize::try_from(room).unwrap_or(usize::MAX).max(1));
        let n = stdin.lock().read(&mut buf[..take])?;
        self.taken += n as u64;
        if self.taken > self.limit {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!(
                    "standard input gave more than {} bytes; netlab reads at most that of {}",
                    self.limit, self.what
                ),
            ));
        }
        Ok(n)
    }
}

/// A file or standard input ([`STDIN`]), opened as [`open_bounded`]
/// opens a file.
pub enum Input {
    File(File),
    Stdin(StdinInput),
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Input::File(file) => file.read(buf),
            Input::Stdin(stdin) => stdin.read(buf),
        }
    }
}

/// [`open_bounded`], or standard input under the same limit for `-`.
pub fn open_input(path: &Path, limit: u64, what: &'static str) -> Result<Input, FileError> {
    if is_stdin(path) {
        return Ok(Input::Stdin(StdinInput::new(limit, what)));
    }
    open_bounded(path, limit, what).map(Input::File)
}

/// Opens `path` (following symlinks) if it is a regular file of at most
/// `limit` bytes; `what` names its content for the errors.
pub fn open_bounded(path: &Path, limit: u64, what: &'static str) -> Result<File, FileError> {
    let shown = || path.display().to_string();
    let io = |source| FileError::Io {
        path: shown(),
        source,
    };
    let file = open_regular(path, what)?;
    let meta = file.metadata().map_err(io)?;
    if meta.len() > limit {
        return Err(FileError::TooLarge {
            path: shown(),
            size: meta.len(),
            limit,
            what,
        });
    }
    Ok(file)
}

/// The whole of a regular file of at most `limit` bytes (it may not grow
/// past the limit while read).
pub fn read_bounded(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, FileError> {
    let input = open_input(path, limit, what)?;
    let mut bytes = Vec::new();
    input
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Io {
            path: shown(path),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.display().to_string(),
            size: bytes.len() as u64,
            limit,
            what,
        });
    }
    Ok(bytes)
}

/// [`read_bounded`] as text.
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, FileError> {
    let bytes = read_bounded(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| FileError::Io {
        path: path.display().to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        ),
    })
}

/// One line of a line file: its number (from 1) and its text, or why it
/// cannot be used.
pub type Line = (usize, Result<String, String>);

/// The lines of `reader`, each at most [`MAX_LINE`] bytes, a byte-order
/// mark before the first dropped, blank lines skipped. An I/O error ends
/// the lines with one naming it.
pub fn lines(reader: impl Read) -> impl Iterator<Item = Line> {
    let mut reader = BufReader::with_capacity(64 << 10, reader);
    let mut number = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        loop {
            if done {
                return None;
            }
            number += 1;
            let mut line = Vec::new();
            let mut too_long = false;
            loop {
                let buf = match reader.fill_buf() {
                    Ok(buf) => buf,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        done = true;
                        return Some((number, Err(format!("line {number}: {e}"))));
                    }
                };
                if buf.is_empty() {
                    done = true;
                    break;
                }
                let (chunk, ends) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (&buf[..i], Some(i + 1)),
                    None => (buf, None),
                };
                if !too_long {
                    if line.len() + chunk.len() > MAX_LINE {
                        too_long = true;
                        line = Vec::new();
                    } else {
                        line.extend_from_slice(chunk);
                    }
                }
                let used = ends.unwrap_or(buf.len());
                reader.consume(used);
                if ends.is_some() {
                    break;
                }
            }
            if too_long {
                return Some((
                    number,
                    Err(format!("line {number}: longer than {MAX_LINE} bytes")),
                ));
            }
            if number == 1 && line.starts_with("\u{feff}".as_bytes()) {
                line.drain(..3);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                if done {
                    return None;
                }
                continue;
            }
            return Some((
                number,
                String::from_utf8(line).map_err(|e| {
                    format!(
                        "line {number}: not UTF-8 (byte {})",
                        e.utf8_error().valid_up_to() + 1
                    )
                }),
            ));
        }
    })
}

/// Makes the output directory `dir` if it is missing, but only it: a
/// missing parent is a mistyped path, refused with its name, not a tree to
/// build. `flag` names the option that gave it.
pub fn make_out_dir(dir: &Path, flag: &str) -> Result<(), String> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(format!(
            "{flag} {}: {} does not exist (netlab makes only the last directory of the path)",
            dir.display(),
            parent.display()
        ));
    }
    std::fs::create_dir(dir).map_err(|e| format!("{flag} {}: cannot create it: {e}", dir.display()))
}

/// What was skipped, for a person: the first `shown` reasons and a count
/// of the rest.
pub fn skipped_summary(skipped: &[String], shown: usize) -> Vec<String> {
    let mut lines: Vec<String> = skipped.iter().take(shown).cloned().collect();
    if skipped.len() > shown {
        lines.push(format!("and {} more lines skipped", skipped.len() - shown));
    }
    lines
}

/// The lines of the records or results file at `path` (see [`lines`]),
/// refused whole only if it is not a regular file or is larger than
/// [`MAX_RECORDS_FILE`].
pub fn record_lines(
    path: &Path,
    what: &'static str,
) -> Result<impl Iterator<Item = Line>, FileError> {
    Ok(lines(open_input(path, MAX_RECORDS_FILE, what)?))
}

/// A path as errors show it: `-` is standard input.
fn shown(path: &Path) -> String {
    if is_stdin(path) {
        "standard input".into()
    } else {
        path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> Vec<Line> {
        lines(bytes).collect()
    }

    #[test]
    fn a_bad_line_costs_that_line_only() {
        let mut text = b"\xef\xbb\xbf{\"a\":1}\r\n\n  \nbad \xff byte\n".to_vec();
        text.extend(vec![b'x'; MAX_LINE + 10]);
        text.extend(b"\nlast");
        let got = all(&text);
        assert_eq!(got[0], (1, Ok("{\"a\":1}".to_string())));
        assert_eq!(got[1], (4, Err("line 4: not UTF-8 (byte 5)".to_string())));
        assert_eq!(
            got[2],
            (5, Err(format!("line 5: longer than {MAX_LINE} bytes")))
        );
        assert_eq!(got[3], (6, Ok("last".to_string())));
        assert_eq!(got.len(), 4);
        assert!(all(b"").is_empty());
        assert!(all(b"\n\n").is_empty());
    }

    #[test]
    fn a_fifo_with_no_writer_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path in a directory of our own.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // On a thread: were the open to block, the test fails rather than hangs.
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_bounded(&path, 1024, "a corpus").map(|_| ()));
        });
        let refused = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the open returned");
        let error = refused.expect_err("a FIFO is not a file");
        assert!(error.to_string().contains("a FIFO"), "{error}");
        // A writer that holds the FIFO open (so no end of file) changes nothing.
        assert!(
            open_regular(&fifo, "a key")
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
    }

    #[test]
    fn devices_and_large_files_are_refused_before_reading() {
        let zero = read_bounded(Path::new("/dev/zero"), 1 << 20, "a corpus");
        assert!(
            matches!(
                zero,
                Err(FileError::NotAFile {
                    kind: "a character device",
                    ..
                })
            ),
            "{zero:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(
            read_bounded(&link, 1 << 20, "a corpus"),
            Err(FileError::NotAFile { .. })
        ));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![0u8; 2000]).unwrap();
        let e = read_bounded(&big, 1000, "a manifest").unwrap_err();
        assert!(e.to_string().contains("2000 bytes"), "{e}");
        assert!(
            e.to_string().contains("at most 1000 bytes of a manifest"),
            "{e}"
        );
        assert_eq!(read_bounded(&big, 2000, "x").unwrap().len(), 2000);
        assert!(
            read_bounded(&dir.path().join("none"), 10, "x")
                .unwrap_err()
                .is_missing()
        );
    }

    #[test]
    fn only_the_last_directory_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("typo/out");
        let e = make_out_dir(&deep, "--out").unwrap_err();
        assert!(e.contains("typo does not exist"), "{e}");
        assert!(!deep.exists());
        make_out_dir(&dir.path().join("out"), "--out").unwrap();
        make_out_dir(&dir.path().join("out"), "--out").unwrap();
        assert!(dir.path().join("out").is_dir());
    }

    proptest::proptest! {
        #[test]
        fn lines_never_panic_and_keep_every_good_line(
            chunks in proptest::collection::vec(proptest::collection::vec(
                proptest::prelude::Strategy::prop_map(proptest::num::u8::ANY, |b| if b == b'\n' { b'a' } else { b }),
                0..40,
            ), 0..20)
        ) {
            let mut text = Vec::new();
            for c in &chunks {
                text.extend(c);
                text.push(b'\n');
            }
            let got = all(&text);
            let good = got.iter().filter(|(_, l)| l.is_ok()).count();
            let expected = chunks
                .iter()
                .enumerate()
                .filter(|(i, c)| {
                    let mut c = c.as_slice();
                    if *i == 0 && c.starts_with("\u{feff}".as_bytes()) {
                        c = &c[3..];
                    }
                    if c.last() == Some(&b'\r') {
                        c = &c[..c.len() - 1];
                    }
                    !c.iter().all(u8::is_ascii_whitespace) && std::str::from_utf8(c).is_ok()
                })
                .count();
            proptest::prop_assert_eq!(good, expected);
        }
    }
}

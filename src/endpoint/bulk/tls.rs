//! `--tls`: the stream in TLS 1.3 records (RFC 8446), made and taken by
//! rustls in user space on ring's ciphers ([`crate::endpoint::tls`]): the
//! sender's `write` strategy and the receiver's `read` with a record layer
//! between each and its socket.
//!
//! Invariants:
//! - the data path's system calls are its own `writev(2)`s and `read(2)`s,
//!   each counted, as the plain paths count theirs;
//! - the record layer is timed apart from them: the sender seals a batch
//!   of records (at least [`SEAL_BATCH`] bytes of plaintext, or what is
//!   left) between two clock reads before it hands the batch to the
//!   kernel; the receiver times each `process_new_packets`, the opening of
//!   what one read brought. Neither clock read falls inside a system call;
//! - the receiver verifies every plaintext byte and takes the end of the
//!   stream only from the sender's `close_notify` (RFC 8446 §6.1): a
//!   connection that ends without one is a truncated stream, an error.

use super::read::{ProgressTicker, ReadSpec, Received};
use super::schedule::Schedule;
use super::socket::{StreamError, check, io_err};
use super::types::TlsStats;
use super::write::SendTally;
use crate::endpoint::pattern::{AlignedBuf, Pattern};
use crate::endpoint::tls::{MAX_RECORD, TlsSpec, kernel_tls};
use rustls::Connection;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Plaintext the sender seals between two clock reads: the reads cost
/// tens of nanoseconds, sealing 64 KB tens of microseconds.
pub const SEAL_BATCH: usize = 64 * 1024;

/// The library that makes the records, as reports name it (a test checks
/// it against Cargo.toml).
pub const LIBRARY: &str = "rustls 0.23 on ring 0.17";

/// An end's TLS session once its handshake is done.
pub(super) struct Session {
    conn: Connection,
    stats: TlsStats,
}

impl Session {
    /// The sender's side: a client that trusts the run's certificate
    /// alone, for the address it connected to.
    pub(super) fn client(stream: &TcpStream, spec: &TlsSpec) -> Result<Session, StreamError> {
        let config = spec.client().map_err(|e| StreamError::Tls(e.to_string()))?;
        // The address connected to: the certificate must hold it.
        let name = rustls::pki_types::ServerName::IpAddress(
            stream
                .peer_addr()
                .map_err(io_err("reading the receiver's address"))?
                .ip()
                .into(),
        );
        let conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| StreamError::Tls(format!("starting the TLS client: {e}")))?;
        Session::handshake(stream, Connection::Client(conn), spec)
    }

    /// The receiver's side: the server of the run's certificate.
    pub(super) fn server(stream: &TcpStream, spec: &TlsSpec) -> Result<Session, StreamError> {
        let config = spec.server().map_err(|e| StreamError::Tls(e.to_string()))?;
        let conn = rustls::ServerConnection::new(config)
            .map_err(|e| StreamError::Tls(format!("starting the TLS server: {e}")))?;
        Session::handshake(stream, Connection::Server(conn), spec)
    }

    fn handshake(
        mut stream: &TcpStream,
        mut conn: Connection,
        spec: &TlsSpec,
    ) -> Result<Session, StreamError> {
        let record_bytes = spec.record.unwrap_or(MAX_RECORD);
        // The cipher alone on this core, before the handshake: a few
        // milliseconds outside the data path.
        let alone = crate::checksum::aead::single_core_rate(spec.cipher, record_bytes, 5);
        let start = Instant::now();
        while conn.is_handshaking() {
            conn.complete_io(&mut stream).map_err(handshake_failed)?;
        }
        while conn.wants_write() {
            conn.write_tls(&mut stream).map_err(handshake_failed)?;
        }
        let handshake_s = start.elapsed().as_secs_f64();
        conn.set_buffer_limit(None);
        let suite = conn
            .negotiated_cipher_suite()
            .map_or_else(|| "none".into(), |s| format!("{:?}", s.suite()));
        let version = conn
            .protocol_version()
            .map_or_else(|| "none".into(), |v| format!("{v:?}"));
        Ok(Session {
            conn,
            stats: TlsStats {
                suite,
                version,
                library: LIBRARY.into(),
                handshake_s,
                record_s: 0.0,
                wire_bytes: 0,
                record_bytes,
                cipher_alone: Some(alone),
                kernel_tls: kernel_tls(),
            },
        })
    }

    /// Seals the schedule's records and sends them, then `close_notify`.
    pub(super) fn send(
        &mut self,
        stream: &TcpStream,
        schedule: &mut Schedule,
        record: usize,
    ) -> Result<SendTally, StreamError> {
        let pattern = Pattern::new(record);
        let fd = stream.as_raw_fd();
        let mut tally = SendTally::default();
        let mut sealing = Duration::ZERO;
        let mut more = true;
        while more {
            let started = Instant::now();
            let mut batch = 0usize;
            while batch < SEAL_BATCH {
                let Some((offset, len)) = schedule.next() else {
                    more = false;
                    break;
                };
                self.conn
                    .writer()
                    .write_all(pattern.slice(offset, len))
                    .map_err(io_err("sealing records"))?;
                batch += len;
                tally.bytes += len as u64;
            }
            if batch > 0 {
                sealing += started.elapsed();
            }
            self.flush(fd, &mut tally.syscalls)?;
        }
        self.conn.send_close_notify();
        self.flush(fd, &mut tally.syscalls)?;
        self.stats.record_s = sealing.as_secs_f64();
        Ok(tally)
    }

    /// Hands every sealed record to the kernel.
    fn flush(&mut self, fd: RawFd, syscalls: &mut u64) -> Result<(), StreamError> {
        let mut socket = CountedSocket { fd, syscalls };
        while self.conn.wants_write() {
            let n = self
                .conn
                .write_tls(&mut socket)
                .map_err(io_err("writing records to the socket"))?;
            self.stats.wire_bytes += n as u64;
        }
        Ok(())
    }

    /// Reads, opens and verifies records until the sender's
    /// `close_notify`.
    pub(super) fn receive(
        &mut self,
        stream: &TcpStream,
        spec: ReadSpec,
        want_progress: bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Received, StreamError> {
        let mut raw_memory = AlignedBuf::zeroed(spec.buffer.max(1));
        let raw = raw_memory.as_mut_slice();
        let mut plain = vec![0u8; MAX_RECORD];
        let pattern = spec.verify.then(|| Pattern::new(plain.len()));
        let fd = stream.as_raw_fd();
        let (mut total, mut syscalls, mut first) = (0u64, 0u64, None);
        let mut opening = Duration::ZERO;
        let mut ticker = ProgressTicker::new(want_progress);
        loop {
            // Plaintext first: the handshake's last read may have
            // brought records of data already.
            let closed = loop {
                match self.conn.reader().read(&mut plain) {
                    Ok(0) => break true,
                    Ok(n) => {
                        if let Some(pattern) = &pattern {
                            pattern
                                .verify(total, &plain[..n])
                                .map_err(StreamError::Corrupt)?;
                        }
                        total += n as u64;
                        if total > spec.limit {
                            return Err(StreamError::Limit(spec.limit));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                    Err(e) => {
                        return Err(StreamError::Tls(format!("reading the plaintext: {e}")));
                    }
                }
            };
            if closed {
                break;
            }
            // SAFETY: raw is valid for its length.
            let ret = unsafe { libc::read(fd, raw.as_mut_ptr().cast(), raw.len()) };
            syscalls += 1;
            let n = match check(ret) {
                Ok(0) => return Err(StreamError::Tls(TRUNCATED.into())),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err("reading from the socket")(e)),
            };
            first.get_or_insert_with(Instant::now);
            self.stats.wire_bytes += n as u64;
            let mut input = &raw[..n];
            while !input.is_empty() {
                let taken = self
                    .conn
                    .read_tls(&mut input)
                    .map_err(|e| StreamError::Tls(format!("taking records in: {e}")))?;
                if taken == 0 {
                    // Past close_notify: nothing more is taken.
                    break;
                }
                let started = Instant::now();
                let opened = self.conn.process_new_packets();
                opening += started.elapsed();
                opened.map_err(|e| StreamError::Tls(format!("opening a record: {e}")))?;
                // Drain what it opened, so its buffer never fills.
                while let Ok(m) = self.conn.reader().read(&mut plain) {
                    if m == 0 {
                        break;
                    }
                    if let Some(pattern) = &pattern {
                        pattern
                            .verify(total, &plain[..m])
                            .map_err(StreamError::Corrupt)?;
                    }
                    total += m as u64;
                    if total > spec.limit {
                        return Err(StreamError::Limit(spec.limit));
                    }
                }
            }
            ticker.tick(total, progress);
        }
        self.stats.record_s = opening.as_secs_f64();
        Ok((total, syscalls, first))
    }

    pub(super) fn stats(self) -> TlsStats {
        self.stats
    }
}

const TRUNCATED: &str = "the sender's connection ended without TLS's close_notify: the stream may have been cut short (RFC 8446 §6.1)";

fn handshake_failed(e: io::Error) -> StreamError {
    StreamError::Tls(format!("the TLS handshake: {e}"))
}

/// The socket as rustls writes to it: each call one counted `writev(2)`.
struct CountedSocket<'a> {
    fd: RawFd,
    syscalls: &'a mut u64,
}

impl Write for CountedSocket<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let count = bufs.len().min(libc::UIO_MAXIOV as usize) as libc::c_int;
        loop {
            // SAFETY: IoSlice is ABI-compatible with iovec on Unix, and
            // each points at memory alive for the call.
            let ret = unsafe { libc::writev(self.fd, bufs.as_ptr().cast(), count) };
            *self.syscalls += 1;
            match check(ret) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_named_is_the_one_built() {
        let version = crate::endpoint::tls::manifest_version;
        assert_eq!(
            LIBRARY,
            format!("rustls {} on ring {}", version("rustls"), version("ring"))
        );
    }
}

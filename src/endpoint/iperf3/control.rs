//! The control connection to an iperf3 server: the cookie, the server's
//! state bytes read one at a time within the exchange's deadline, and the
//! JSON messages each way, framed as iperf3 frames them
//! ([`crate::wire::iperf3`]).

use super::types::ClientError;
use crate::wire::iperf3::{self, Expect, Results, State, Step};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A control connection and where it is in the test.
pub(super) struct Control {
    pub(super) socket: TcpStream,
    pub(super) addr: SocketAddr,
    /// The longest wait for any one answer.
    pub(super) timeout: Duration,
    /// The end of the whole exchange's allowance, however the server
    /// trickles its bytes.
    pub(super) deadline: Instant,
    pub(super) allowance: Duration,
    /// Set when the user asks to stop (SIGTERM, Ctrl-C): every wait looks
    /// at it at least every [`STOP_POLL`].
    pub(super) stop: Arc<AtomicBool>,
}

/// How often a wait on the server looks at the stop flag.
pub(super) const STOP_POLL: Duration = Duration::from_millis(200);

impl Control {
    pub(super) fn io(&self, what: &str) -> impl Fn(io::Error) -> ClientError + '_ {
        let what = what.to_string();
        move |e| ClientError::Io(self.addr, format!("{what}: {e}"))
    }

    /// The server's next state; `first` says what an unexpected answer
    /// to the cookie means.
    /// The wait for the next answer: the step's timeout, within the
    /// whole exchange's allowance.
    pub(super) fn next_wait(&mut self) -> Result<Instant, ClientError> {
        let now = Instant::now();
        if now >= self.deadline {
            return Err(self.overran());
        }
        Ok(self.deadline.min(now + self.timeout))
    }

    pub(super) fn overran(&self) -> ClientError {
        ClientError::Io(
            self.addr,
            format!(
                "the server held the exchange past its whole allowance of {:.0} s (the setup, the test and its results)",
                self.allowance.as_secs_f64()
            ),
        )
    }

    /// Reads into `buf` by `by`, looking at the stop flag as it waits:
    /// `Ok(n)` as read(2) gives it, or the error (`TimedOut` at `by`).
    pub(super) fn read_by(
        &mut self,
        buf: &mut [u8],
        by: Instant,
    ) -> Result<io::Result<usize>, ClientError> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(ClientError::Interrupted(self.addr));
            }
            let left = by.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Err(io::ErrorKind::TimedOut.into()));
            }
            self.socket
                .set_read_timeout(Some(left.min(STOP_POLL).max(Duration::from_millis(1))))
                .map_err(self.io("waiting for the server"))?;
            match self.socket.read(buf) {
                Err(e) if crate::endpoint::stall::nothing_came(&e) => {}
                done => return Ok(done),
            }
        }
    }

    /// Fills `buf` by `by` (one deadline however the bytes trickle).
    pub(super) fn fill_by(
        &mut self,
        buf: &mut [u8],
        by: Instant,
        what: &str,
    ) -> Result<(), ClientError> {
        let mut got = 0;
        while got < buf.len() {
            match self.read_by(&mut buf[got..], by)? {
                Ok(0) => {
                    return Err(ClientError::Io(
                        self.addr,
                        format!("{what}: the server closed the connection"),
                    ));
                }
                Ok(n) => got += n,
                Err(e) => return Err(ClientError::Io(self.addr, format!("{what}: {e}"))),
            }
        }
        Ok(())
    }

    pub(super) fn state(&mut self, first: bool) -> Result<State, ClientError> {
        let by = self.next_wait()?;
        let mut byte = [0u8; 1];
        let read = self.read_by(&mut byte, by)?;
        if read.is_err() && Instant::now() >= self.deadline {
            return Err(self.overran());
        }
        match read {
            Ok(0) => Err(if first {
                ClientError::NotIperf3(self.addr, "it closed the connection on the cookie".into())
            } else {
                ClientError::Io(self.addr, "the server closed the control connection".into())
            }),
            Ok(_) => match State::from_byte(byte[0]) {
                Ok(state) => Ok(state),
                Err(_) if first => Err(ClientError::NotIperf3(
                    self.addr,
                    format!(
                        "it answered the cookie with {:#04x} ({:?}), no iperf3 state",
                        byte[0],
                        byte[0] as char
                    ),
                )),
                Err(e) => Err(ClientError::Protocol(self.addr, e)),
            },
            Err(e)
                if first
                    && matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
            {
                Err(ClientError::NotIperf3(
                    self.addr,
                    "nothing answered the cookie (an iperf3 server asks for the parameters at once; iperf2 and others wait)".into(),
                ))
            }
            Err(e) => Err(ClientError::Io(
                self.addr,
                format!("reading the server's state: {e}"),
            )),
        }
    }

    /// A state the server sent while the test runs (it ends a test only
    /// by refusal: SERVER_TERMINATE, SERVER_ERROR), without waiting.
    pub(super) fn poll_state(&mut self) -> Result<Option<State>, ClientError> {
        use std::os::fd::AsRawFd;
        let mut byte = [0u8; 1];
        // One non-blocking receive: the socket itself stays blocking.
        let read = nix::sys::socket::recv(
            self.socket.as_raw_fd(),
            &mut byte,
            nix::sys::socket::MsgFlags::MSG_DONTWAIT,
        );
        match read {
            Ok(0) => Err(ClientError::Io(
                self.addr,
                "the server closed the control connection while the test ran".into(),
            )),
            Ok(_) => State::from_byte(byte[0])
                .map(Some)
                .map_err(|e| ClientError::Protocol(self.addr, e)),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => Ok(None),
            Err(e) => Err(ClientError::Io(
                self.addr,
                format!("reading the control connection: {e}"),
            )),
        }
    }

    /// The exchange's last step, while the client waits for `expect`
    /// (DISPLAY_RESULTS): the server's word, and IPERF_DONE.
    pub(super) fn display_results(&mut self, expect: Expect) -> Result<(), ClientError> {
        let said = self.state(false)?;
        match expect.step(said) {
            Ok(Step::Act(State::DisplayResults, _)) => self.send_state(State::IperfDone),
            Ok(Step::Act(other, _) | Step::Refusal(other)) => Err(self.refused(other)),
            Err(e) => Err(ClientError::Protocol(self.addr, e)),
        }
    }

    /// Writes a JSON frame ([`iperf3::frame`]); `what` names it.
    pub(super) fn send_frame(&mut self, frame: &[u8], what: &str) -> Result<(), ClientError> {
        self.socket
            .write_all(frame)
            .map_err(self.io(&format!("writing {what}")))
    }

    pub(super) fn send_state(&mut self, state: State) -> Result<(), ClientError> {
        self.socket
            .write_all(&[state.byte()])
            .map_err(self.io("writing a state"))
    }

    /// The server's results: one deadline for the whole frame, however
    /// its bytes trickle.
    pub(super) fn read_results(&mut self) -> Result<Results, ClientError> {
        let by = self.next_wait()?;
        let what = "reading the server's results";
        let mut header = [0u8; 4];
        self.fill_by(&mut header, by, what)?;
        let len = iperf3::frame_length(header).map_err(|e| ClientError::Protocol(self.addr, e))?;
        let mut text = vec![0u8; len];
        self.fill_by(&mut text, by, what)?;
        iperf3::parse_json(&text, "results").map_err(|e| ClientError::Protocol(self.addr, e))
    }

    /// What a refusal state means.
    pub(super) fn refused(&mut self, state: State) -> ClientError {
        match state {
            State::AccessDenied => ClientError::Busy(self.addr),
            State::ServerTerminate => ClientError::Terminated(self.addr),
            State::ServerError => {
                let mut numbers = [0u8; 8];
                let by = self.deadline.min(Instant::now() + self.timeout);
                match self.fill_by(&mut numbers, by, "reading a server error") {
                    Ok(()) => {
                        let i_errno = i32::from_be_bytes(numbers[..4].try_into().unwrap());
                        let errno = i32::from_be_bytes(numbers[4..].try_into().unwrap());
                        ClientError::Server {
                            addr: self.addr,
                            text: iperf3::server_error_text(i_errno),
                            errno,
                        }
                    }
                    Err(e) => e,
                }
            }
            other => ClientError::Io(self.addr, format!("the server sent {other:?} out of turn")),
        }
    }
}

//! `netlab login serve` over real sockets and ptys, for every relay design
//! and both protocols: echo, a 1 MB byte-exact transfer, window changes
//! reaching the command, bad peers, and teardown without leaked processes
//! or descriptors.

use crate::common;
use common::children_of;

use netlab::endpoint::login::client::Session;
use netlab::wire::telnet::{IAC, SB, SE, option};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RELAYS: [&str; 5] = ["fork", "epoll", "splice", "uring", "batch"];
const WAIT: Duration = Duration::from_secs(10);

struct Server {
    child: Child,
    addr: SocketAddr,
    log: tempfile::NamedTempFile,
}

impl Server {
    fn start(relay: &str, protocol: &str, command: &[&str]) -> Server {
        let mut args = vec![
            "--relay",
            relay,
            "--protocol",
            protocol,
            "--idle-timeout",
            "30",
            "--command",
        ];
        args.extend_from_slice(command);
        Server::spawn(&args)
    }

    /// `netlab login serve --port 0 ARGS`, its log kept in a file.
    fn spawn(args: &[&str]) -> Server {
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("netlab"))
            .args(["login", "serve", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        let port = common::port_it_printed(&mut child);
        Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log,
        }
    }

    fn session(&self, protocol: &str) -> Session {
        match protocol {
            "telnet" => Session::telnet(self.addr, false).unwrap(),
            _ => Session::rlogin(self.addr, "netlab").unwrap(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's children and descriptors at rest, taken after a first
    /// session has come and gone (so everything the server sets up lazily,
    /// like its epoll set after it prints the port, exists).
    fn baseline(&self, protocol: &str) -> (usize, usize) {
        let mut warmup = self.session(protocol);
        warmup.settle(Duration::from_millis(50)).unwrap();
        drop(warmup);
        let mut last = (usize::MAX, usize::MAX);
        let deadline = Instant::now() + WAIT;
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = (children_of(self.pid()).len(), self.fds());
            if now == last || Instant::now() > deadline {
                return now;
            }
            last = now;
        }
    }

    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .count()
    }

    /// SIGINT, a clean exit, and none of its sessions' processes left;
    /// returns the server's log.
    fn stop(mut self) -> String {
        let sessions = children_of(self.pid());
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid() as i32, libc::SIGINT) };
        assert!(self.child.wait().unwrap().success());
        std::thread::sleep(Duration::from_millis(100));
        for pid in sessions {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            assert!(stat.is_empty(), "process {pid} outlived the server: {stat}");
        }
        std::fs::read_to_string(self.log.path()).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until `f` holds (the server reaps and closes asynchronously).
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn echo_round_trip(session: &mut Session, text: &str) {
    session.type_bytes(format!("{text}\r").as_bytes()).unwrap();
    // The pty echoes the line, then cat writes it back.
    let want = format!("{text}\r\n{text}\r\n");
    assert!(
        session.wait_for(want.as_bytes(), WAIT).unwrap(),
        "no echo of {text:?}; got {:?}",
        String::from_utf8_lossy(&session.received)
    );
}

#[test]
fn every_design_echoes_both_protocols_and_cleans_up() {
    for relay in RELAYS {
        for protocol in ["telnet", "rlogin"] {
            let server = Server::start(relay, protocol, &["cat"]);
            let (idle_children, idle_fds) = server.baseline(protocol);
            let mut sessions: Vec<Session> = (0..3).map(|_| server.session(protocol)).collect();
            for (i, s) in sessions.iter_mut().enumerate() {
                echo_round_trip(s, &format!("{relay} {protocol} {i} \u{ff}"));
            }
            // A session costs the fork design a process, the others descriptors.
            if relay == "fork" {
                assert_eq!(
                    children_of(server.pid()).len(),
                    idle_children + 3,
                    "{relay}"
                );
            } else {
                assert!(server.fds() > idle_fds, "{relay}");
            }
            drop(sessions);
            eventually(&format!("{relay}/{protocol} sessions are gone"), || {
                children_of(server.pid()).len() == idle_children && server.fds() == idle_fds
            });
            server.stop();
        }
    }
}

/// 1 MiB holding every byte value (0xFF and bare CRs included).
fn every_byte_file() -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let data: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    file.write_all(&data).unwrap();
    file
}

#[test]
fn a_megabyte_of_output_arrives_byte_exact() {
    let file = every_byte_file();
    let want = std::fs::read(file.path()).unwrap();
    assert!(want.contains(&0xff) && want.contains(&b'\r'));
    // Raw output mode so the terminal does not turn LF into CR LF; the
    // sleep lets the client's negotiation land first.
    let script = format!("stty raw -echo; sleep 0.3; cat {}", file.path().display());
    for relay in RELAYS {
        for protocol in ["telnet", "rlogin"] {
            let server = Server::start(relay, protocol, &["sh", "-c", &script]);
            let mut session = server.session(protocol);
            assert!(
                session.read_to_close(Duration::from_secs(60)).unwrap(),
                "{relay}/{protocol}: no close"
            );
            assert_eq!(
                session.received.len(),
                want.len(),
                "{relay}/{protocol}: length"
            );
            assert!(session.received == want, "{relay}/{protocol}: bytes differ");
            let log = server.stop();
            // The splice design keeps rlogin output out of user space and
            // copies TELNET output (which needs IAC doubling).
            let spliced: u64 = log
                .split(" bytes spliced")
                .next()
                .and_then(|head| head.rsplit(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no splice count in the log: {log}"));
            match (relay, protocol) {
                ("splice", "rlogin") => assert!(spliced >= want.len() as u64, "{log}"),
                _ => assert_eq!(spliced, 0, "{relay}/{protocol}: {log}"),
            }
        }
    }
}

#[test]
fn window_changes_reach_the_command() {
    let script = "read x; stty size; read y; stty size; sleep 5";
    for relay in RELAYS {
        for protocol in ["telnet", "rlogin"] {
            let server = Server::start(relay, protocol, &["sh", "-c", script]);
            let mut session = server.session(protocol);
            // The server agrees to take sizes (NAWS, or rlogin's window
            // request) within a few round trips: waited for, up to WAIT,
            // as a fixed settle is not enough beside a CPU-bound job.
            let deadline = std::time::Instant::now() + WAIT;
            while !session.resize(50, 132).unwrap() && std::time::Instant::now() < deadline {
                session.settle(Duration::from_millis(50)).unwrap();
            }
            assert!(
                session.resize(50, 132).unwrap(),
                "{relay}/{protocol}: server took no sizes"
            );
            session.type_bytes(b"go\r").unwrap();
            assert!(
                session.wait_for(b"50 132", WAIT).unwrap(),
                "{relay}/{protocol}: {:?}",
                String::from_utf8_lossy(&session.received)
            );
            session.resize(33, 99).unwrap();
            session.type_bytes(b"again\r").unwrap();
            assert!(
                session.wait_for(b"33 99", WAIT).unwrap(),
                "{relay}/{protocol}: second change"
            );
            server.stop();
        }
    }
}

#[test]
fn bad_peers_end_only_their_own_session_and_leak_nothing() {
    for relay in RELAYS {
        let server = Server::start(relay, "telnet", &["cat"]);
        let (idle_children, idle_fds) = server.baseline("telnet");
        let mut good = server.session("telnet");
        echo_round_trip(&mut good, "before");
        let send = |bytes: &[u8]| {
            let mut c = TcpStream::connect(server.addr).unwrap();
            let _ = c.write_all(bytes);
            c
        };
        // Malformed option sequences, IAC SB without SE, a 1 MB subnegotiation.
        let mut bad = vec![
            send(&[IAC, 0xfb, IAC, 0xfd, IAC, IAC, IAC, 17, IAC]),
            send(&[IAC, SB, option::NAWS, 0, 80]),
        ];
        let mut huge = vec![IAC, SB, option::TERMINAL_TYPE];
        huge.extend(std::iter::repeat_n(b'x', 1 << 20));
        huge.extend([IAC, SE]);
        bad.push(send(&huge));
        // A client that vanishes mid-negotiation.
        drop(send(&[IAC, SB, option::TERMINAL_TYPE, 0, b'x']));
        echo_round_trip(&mut good, "during");
        drop(bad);
        echo_round_trip(&mut good, "after");
        drop(good);
        // At most the baseline: a baseline read while the warm-up session
        // was still being reaped (two equal readings 200 ms apart) is one
        // the idle server later goes below; a leak goes above it.
        eventually(&format!("{relay}: bad sessions are gone"), || {
            children_of(server.pid()).len() <= idle_children && server.fds() <= idle_fds
        });
        server.stop();

        // A command that exits at once ends its session cleanly.
        let server = Server::start(relay, "telnet", &["true"]);
        let (_, idle_fds) = server.baseline("telnet");
        let mut s = server.session("telnet");
        assert!(
            s.read_to_close(WAIT).unwrap(),
            "{relay}: session of `true` did not end"
        );
        eventually(
            &format!("{relay}: exited command's session is gone"),
            || server.fds() <= idle_fds && children_of(server.pid()).is_empty(),
        );
        server.stop();
    }
}

#[test]
fn rlogin_refuses_a_malformed_startup_and_serves_on() {
    for relay in RELAYS {
        let server = Server::start(relay, "rlogin", &["cat"]);
        let mut bad = TcpStream::connect(server.addr).unwrap();
        bad.write_all(b"root\0root\0xterm/9600\0").unwrap();
        let mut junk = Vec::new();
        bad.set_read_timeout(Some(WAIT)).unwrap();
        let _ = std::io::Read::read_to_end(&mut bad, &mut junk);
        assert!(
            junk.is_empty(),
            "{relay}: answered a startup without the NUL"
        );
        let mut good = server.session("rlogin");
        echo_round_trip(&mut good, "fine");
        server.stop();
    }
}

#[test]
fn refuses_a_remote_bind_without_the_flag() {
    let out = Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .args(["login", "serve", "--bind", "0.0.0.0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
}

#[test]
fn refuses_sessions_beyond_the_cap() {
    let server = Server::spawn(&["--relay", "epoll", "--max-sessions", "1"]);
    let mut first = server.session("telnet");
    echo_round_trip(&mut first, "one");
    let mut second = server.session("telnet");
    assert!(
        second.read_to_close(WAIT).unwrap(),
        "the second session was not refused"
    );
    echo_round_trip(&mut first, "still");
    server.stop();
}

#[test]
fn linemode_sessions_edit_and_echo_at_the_client() {
    for relay in RELAYS {
        let server = Server::spawn(&["--relay", relay, "--linemode"]);
        let mut session = Session::telnet(server.addr, true).unwrap();
        // The options are agreed in a few round trips: waited for, up to
        // WAIT (beside a CPU-bound job 300 ms once did not see them done).
        let deadline = std::time::Instant::now() + WAIT;
        let agreed = |session: &Session| {
            let state = session.telnet_state().unwrap();
            state.linemode() && !state.server_echoes()
        };
        while !agreed(&session) && std::time::Instant::now() < deadline {
            session.settle(Duration::from_millis(50)).unwrap();
        }
        assert!(agreed(&session), "{relay}: LINEMODE not agreed");
        // Anything the server still had to say about the options.
        session.settle(Duration::from_millis(100)).unwrap();
        // The client sends the whole line; the pty (cooked, echo off) hands
        // it to cat, whose copy is the only one that comes back.
        session.type_bytes(b"a whole line\r").unwrap();
        assert!(
            session.wait_for(b"a whole line\r\n", WAIT).unwrap(),
            "{relay}"
        );
        session.settle(Duration::from_millis(200)).unwrap();
        let copies = session
            .received
            .windows(12)
            .filter(|w| w == b"a whole line")
            .count();
        assert_eq!(copies, 1, "{relay}: the server echoed a LINEMODE line");
        server.stop();
    }
}

#[test]
fn idle_sessions_are_closed() {
    let servers: Vec<Server> = RELAYS
        .iter()
        .map(|relay| Server::spawn(&["--relay", relay, "--idle-timeout", "1"]))
        .collect();
    let mut sessions: Vec<Session> = servers.iter().map(|s| s.session("telnet")).collect();
    for (relay, session) in RELAYS.iter().zip(&mut sessions) {
        assert!(
            session.read_to_close(WAIT).unwrap(),
            "{relay}: idle session still open"
        );
    }
    for server in servers {
        server.stop();
    }
}

/// A hundred peers that pour random bytes in and read nothing: the echoes
/// back up (cat's output, then its input), so every relay meets full ptys
/// and full sockets at once. No design may freeze whole: a new session is
/// served, and SIGTERM ends the server within 10 s (the relays' 1 s tick
/// and their 5 s bound on ending sessions) with every session's process
/// reaped.
#[test]
fn a_flood_of_random_bytes_freezes_no_design_and_sigterm_ends_each() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    };
    for relay in RELAYS {
        let mut server = Server::start(relay, "telnet", &["cat"]);
        let mut flood = Vec::new();
        for _ in 0..100 {
            let mut c = TcpStream::connect(server.addr).unwrap();
            c.set_nonblocking(true).unwrap();
            let _ = c.write(&random(64 << 10));
            flood.push(c);
        }
        std::thread::sleep(Duration::from_millis(500));
        for c in &mut flood {
            let _ = c.write(&random(64 << 10));
        }
        let mut good = server.session("telnet");
        echo_round_trip(&mut good, &format!("{relay} during the flood"));
        let sessions = children_of(server.pid());
        let started = Instant::now();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) };
        let ended = loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > Duration::from_secs(10) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            ended.is_some(),
            "{relay}: SIGTERM did not end the server within 10 s; log: {}",
            std::fs::read_to_string(server.log.path()).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
        for pid in sessions {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            assert!(
                stat.is_empty() || stat.contains(") Z "),
                "{relay}: process {pid} outlived the server: {stat}"
            );
        }
        drop(flood);
    }
}

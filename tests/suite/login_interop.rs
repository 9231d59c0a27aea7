//! netlab's login servers and clients against real peers from Debian: the
//! `telnet` client (package telnet) and the `rlogin` client (rsh-redone-client)
//! driven through ptys against every relay design, and netlab's TELNET
//! client against inetutils telnetd (inetutils-telnetd, started per
//! connection by socat). `.ci/run` installs them; a missing one fails the
//! test with the package to install.

use crate::common;
use common::children_of;

use netlab::endpoint::login::client::Session;
use netlab::endpoint::login::pty::{self, Pty};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RELAYS: [&str; 5] = ["fork", "epoll", "splice", "uring", "batch"];
const WAIT: Duration = Duration::from_secs(10);

fn require(path: &str, package: &str) {
    assert!(
        std::path::Path::new(path).exists(),
        "{path} is missing: apt-get install {package}"
    );
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // Children first (socat forks per connection), then the process.
        for pid in children_of(self.0.id()) {
            // SAFETY: signalling a process we started (through socat).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(relay: &str, protocol: &str, command: &[&str]) -> (Killed, SocketAddr) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .args([
            "login",
            "serve",
            "--port",
            "0",
            "--relay",
            relay,
            "--protocol",
            protocol,
        ])
        .arg("--command")
        .args(command)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let port = common::port_it_printed(&mut child);
    (Killed(child), SocketAddr::from(([127, 0, 0, 1], port)))
}

/// Reads what the client program printed on its terminal until `needle`
/// appears or the wait runs out.
fn read_terminal_until(pty: &Pty, seen: &mut Vec<u8>, needle: &[u8]) -> bool {
    let mut master = std::fs::File::from(pty.master.try_clone().unwrap());
    let deadline = Instant::now() + WAIT;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if seen.windows(needle.len()).any(|w| w == needle) {
            return true;
        }
        let mut pfd = libc::pollfd {
            fd: pty.master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 100) } > 0 {
            match master.read(&mut buf) {
                Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
    }
    seen.windows(needle.len()).any(|w| w == needle)
}

fn type_into(pty: &Pty, bytes: &[u8]) {
    std::fs::File::from(pty.master.try_clone().unwrap())
        .write_all(bytes)
        .unwrap();
}

#[test]
fn debian_telnet_client_types_into_every_design() {
    require("/usr/bin/telnet", "telnet");
    for relay in RELAYS {
        let (_server, addr) = serve(relay, "telnet", &["cat"]);
        let client = pty::spawn(
            &["telnet".into(), "127.0.0.1".into(), addr.port().to_string()],
            24,
            80,
        )
        .unwrap();
        let mut seen = Vec::new();
        assert!(
            read_terminal_until(&client, &mut seen, b"Escape character"),
            "{relay}: telnet did not connect: {:?}",
            String::from_utf8_lossy(&seen)
        );
        // Give the negotiation a moment, then type a line.
        std::thread::sleep(Duration::from_millis(300));
        type_into(&client, b"typed by debian telnet\r");
        let want = b"typed by debian telnet\r\ntyped by debian telnet\r\n";
        assert!(
            read_terminal_until(&client, &mut seen, want),
            "{relay}: no echo: {:?}",
            String::from_utf8_lossy(&seen)
        );
    }
}

#[test]
fn debian_rlogin_client_logs_into_every_design_with_its_window_size() {
    require("/usr/bin/rlogin", "rsh-redone-client");
    // rlogin binds a reserved source port, which needs root.
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the rlogin client needs root (reserved ports)"
    );
    for relay in RELAYS {
        let (_server, addr) = serve(relay, "rlogin", &["sh", "-c", "read x; stty size; cat"]);
        // The client's terminal is 37 x 111: rlogin reports it when asked.
        let client = pty::spawn(
            &[
                "rlogin".into(),
                "-p".into(),
                addr.port().to_string(),
                "-l".into(),
                "netlab".into(),
                "127.0.0.1".into(),
            ],
            37,
            111,
        )
        .unwrap();
        let mut seen = Vec::new();
        // The size is read after a line is typed, so the window report has landed.
        std::thread::sleep(Duration::from_millis(300));
        type_into(&client, b"go\r");
        assert!(
            read_terminal_until(&client, &mut seen, b"37 111"),
            "{relay}: window size not seen: {:?}",
            String::from_utf8_lossy(&seen)
        );
        type_into(&client, b"hello rlogin\r");
        assert!(
            read_terminal_until(&client, &mut seen, b"hello rlogin\r\nhello rlogin\r\n"),
            "{relay}: no echo: {:?}",
            String::from_utf8_lossy(&seen)
        );
    }
}

#[test]
fn netlab_telnet_client_works_with_inetutils_telnetd() {
    require("/usr/sbin/telnetd", "inetutils-telnetd");
    require("/usr/bin/socat", "socat");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // socat accepts and, per connection, execs telnetd on the TCP socket
    // (`nofork`), as inetd would; telnetd runs /bin/cat instead of login.
    let socat = Killed(
        Command::new("socat")
            .arg(format!("TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork"))
            .arg("EXEC:/usr/sbin/telnetd -h -E /bin/cat,nofork")
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + WAIT;
    let mut session = loop {
        match Session::telnet(addr, false) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("socat never listened: {e}"),
        }
    };
    session.settle(Duration::from_millis(500)).unwrap();
    assert!(
        session.telnet_state().unwrap().server_echoes(),
        "telnetd did not take over echoing"
    );
    session.type_bytes(b"to inetutils\r").unwrap();
    assert!(
        session
            .wait_for(b"to inetutils\r\nto inetutils\r\n", WAIT)
            .unwrap(),
        "{:?}",
        String::from_utf8_lossy(&session.received)
    );
    // A window change reaches telnetd's pty (cat ignores it; no error).
    assert!(session.resize(40, 100).unwrap());
    session.type_bytes(b"after resize\r").unwrap();
    assert!(
        session
            .wait_for(b"after resize\r\nafter resize", WAIT)
            .unwrap()
    );
    drop(session);
    drop(socat);
}

//! `netlab login serve` over real sockets and ptys.

mod common;
use common::children_of;

use netlab::wire::telnet::{DO, IAC, SB, SE, WILL, negotiation, option};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn read_until(stream: &mut TcpStream, needle: &[u8]) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline && !got.windows(needle.len()).any(|w| w == needle) {
        if let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
    }
    got
}

#[test]
fn sessions_echo_through_cat_and_the_server_cleans_up() {
    let mut server = Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .args(["login", "serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().unwrap();
    let mut clients = Vec::new();
    for i in 0..3 {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let opening = read_until(&mut c, &negotiation(DO, option::TERMINAL_TYPE));
        assert!(
            opening
                .windows(3)
                .any(|w| w == negotiation(WILL, option::ECHO))
        );
        let mut reply = negotiation(DO, option::ECHO).to_vec();
        reply.extend(negotiation(WILL, option::NAWS));
        reply.extend([IAC, SB, option::NAWS, 0, 80, 0, 24, IAC, SE]);
        c.write_all(&reply).unwrap();
        let text = format!("line {i} \u{ff}\r\n");
        c.write_all(
            &text
                .as_bytes()
                .iter()
                .flat_map(|&b| if b == IAC { vec![IAC, IAC] } else { vec![b] })
                .collect::<Vec<u8>>(),
        )
        .unwrap();
        let want = format!("line {i} ");
        let got = read_until(&mut c, want.as_bytes());
        assert!(
            got.windows(want.len()).any(|w| w == want.as_bytes()),
            "{:?}",
            String::from_utf8_lossy(&got)
        );
        clients.push(c);
    }
    let sessions = children_of(server.id());
    assert_eq!(sessions.len(), 3, "a process per session");
    // A client that vanishes mid-negotiation ends only its own session.
    let mut vanisher = TcpStream::connect(("127.0.0.1", port)).unwrap();
    vanisher
        .write_all(&[IAC, SB, option::TERMINAL_TYPE, 0, b'x'])
        .unwrap();
    drop(vanisher);
    clients[0].write_all(b"still here\r\n").unwrap();
    assert!(!read_until(&mut clients[0], b"still here").is_empty());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(server.id() as i32, libc::SIGINT) };
    assert!(server.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(200));
    for pid in sessions {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(stat.is_empty(), "session {pid} outlived the server: {stat}");
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

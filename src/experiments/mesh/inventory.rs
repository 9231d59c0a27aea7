//! The agents a mesh runs between, from `--agents SPEC`:
//! - a list, `a:5310,b:5310` (the agent's port, 5310, when none is given);
//! - a file, one agent a line, `HOST[:PORT] [label=value ...]`, with `#`
//!   comments and blank lines;
//! - `dns:NAME[:PORT]`: every A and AAAA record of a name, as the system's
//!   resolver returns them (a Kubernetes headless Service gives one per
//!   ready pod); a name that begins with `_` (`_control._tcp.SERVICE`) is
//!   asked for its SRV records instead (RFC 2782), each a host and its
//!   port, from the nameservers of /etc/resolv.conf (over UDP, then TCP
//!   when the answer is truncated).
//!
//! Invariant: an inventory holds at least two agents, no address twice;
//! anything else is refused with the entry that is wrong.

use crate::controller::remote::resolve;
use crate::endpoint::agent::DEFAULT_PORT;
use crate::fleet::hosts::{Entry, entries_up_to};
use crate::wire::dns;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use thiserror::Error;

/// One agent of the mesh.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Agent {
    /// As the inventory named it (`HOST:PORT`, or the address a DNS
    /// record gave).
    pub name: String,
    pub addr: SocketAddr,
    /// From the inventory file (`zone=a rack=r1`); agents add their own in
    /// the handshake.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum InventoryError {
    #[error("--agents {spec}: {why}")]
    Entry { spec: String, why: String },
    #[error("--agents names {addr} twice: {first} and {second}")]
    Duplicate {
        addr: SocketAddr,
        first: String,
        second: String,
    },
    #[error("a mesh needs at least two agents; --agents {spec} gives {count}")]
    TooFew { spec: String, count: usize },
    #[error("--agents {spec} gives {count} agents; a mesh takes at most {MAX_AGENTS}")]
    TooMany { spec: String, count: usize },
}

/// The most agents one mesh takes: its pairs grow as the square (4096
/// agents are 16.8 million ordered pairs).
pub const MAX_AGENTS: usize = 4096;

/// Checks an inventory's invariant: 2 to [`MAX_AGENTS`] agents, no
/// address twice (`spec` names it in the error).
pub fn check(spec: &str, agents: &[Agent]) -> Result<(), InventoryError> {
    let mut seen: BTreeMap<SocketAddr, &str> = BTreeMap::new();
    for a in agents {
        if let Some(first) = seen.insert(a.addr, &a.name) {
            return Err(InventoryError::Duplicate {
                addr: a.addr,
                first: first.to_string(),
                second: a.name.clone(),
            });
        }
    }
    if agents.len() < 2 {
        return Err(InventoryError::TooFew {
            spec: spec.to_string(),
            count: agents.len(),
        });
    }
    if agents.len() > MAX_AGENTS {
        return Err(InventoryError::TooMany {
            spec: spec.to_string(),
            count: agents.len(),
        });
    }
    Ok(())
}

/// The inventory `spec` names.
pub fn parse(spec: &str) -> Result<Vec<Agent>, InventoryError> {
    let entry = |why: String| InventoryError::Entry {
        spec: spec.to_string(),
        why,
    };
    let agents = if let Some(name) = spec.strip_prefix("dns:") {
        from_dns(name).map_err(entry)?
    } else if std::path::Path::new(spec).is_file() {
        let text = crate::record::files::read_text(
            std::path::Path::new(spec),
            crate::record::files::MAX_SMALL_FILE,
            "an inventory",
        )
        .map_err(|e| entry(e.to_string()))?;
        from_file(&text).map_err(entry)?
    } else {
        spec.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|name| agent(name, BTreeMap::new()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(entry)?
    };
    check(spec, &agents)?;
    Ok(agents)
}

fn agent(name: &str, labels: BTreeMap<String, String>) -> Result<Agent, String> {
    Ok(Agent {
        name: name.to_string(),
        addr: resolve(name)?,
        labels,
    })
}

/// `HOST[:PORT] [label=value ...]` a line, each name resolved.
fn from_file(text: &str) -> Result<Vec<Agent>, String> {
    entries(text)?
        .into_iter()
        .map(|(line, (name, labels))| agent(&name, labels).map_err(|e| format!("line {line}: {e}")))
        .collect()
}

/// The entries of an inventory file, each with its line number, parsed
/// without resolving anything (what a fuzzer and the resolver both take).
pub fn entries(text: &str) -> Result<Vec<(usize, Entry)>, String> {
    entries_up_to(text, MAX_AGENTS)
}

/// Every address `NAME[:PORT]` resolves to, in the resolver's order made
/// stable (sorted), so a plan's seed means the same hosts each time.
fn from_dns(name: &str) -> Result<Vec<Agent>, String> {
    let (host, port) = match name.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') || host.ends_with(']') => (
            host.trim_matches(['[', ']']),
            port.parse::<u16>()
                .map_err(|_| format!("{port:?} is not a port"))?,
        ),
        _ => (name, DEFAULT_PORT),
    };
    if host.is_empty() {
        return Err("dns: needs a name".into());
    }
    if port == 0 {
        return Err(format!(
            "dns:{name}: port 0 is no agent's port (an agent listens on {DEFAULT_PORT} unless told otherwise)"
        ));
    }
    if host.starts_with('_') {
        return from_srv(host, &nameservers());
    }
    let mut addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    Ok(addrs
        .into_iter()
        .map(|addr| Agent {
            name: addr.to_string(),
            addr,
            labels: BTreeMap::new(),
        })
        .collect())
}

/// The nameservers of /etc/resolv.conf (the local one when it names none).
fn nameservers() -> Vec<SocketAddr> {
    let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let mut found: Vec<SocketAddr> = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("nameserver"))
        .filter_map(|ip| ip.trim().parse::<std::net::IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect();
    if found.is_empty() {
        found.push(SocketAddr::from(([127, 0, 0, 1], 53)));
    }
    found
}

/// How long one nameserver has to answer, each of two tries.
const DNS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// One question to `server`: over UDP, again over TCP if truncated.
fn ask(server: SocketAddr, name: &str, qtype: u16) -> Result<dns::Response, String> {
    let mut id = [0u8; 2];
    getrandom::fill(&mut id).map_err(|e| e.to_string())?;
    let id = u16::from_be_bytes(id);
    let query = dns::query(id, name, qtype).map_err(|e| e.to_string())?;
    let bind: SocketAddr = if server.is_ipv6() {
        "[::]:0".parse().expect("literal")
    } else {
        "0.0.0.0:0".parse().expect("literal")
    };
    let socket = std::net::UdpSocket::bind(bind).map_err(|e| e.to_string())?;
    socket.connect(server).map_err(|e| e.to_string())?;
    socket
        .set_read_timeout(Some(DNS_WAIT))
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 65_535];
    let mut answer = None;
    'tries: for _ in 0..2 {
        socket.send(&query).map_err(|e| e.to_string())?;
        let until = std::time::Instant::now() + DNS_WAIT;
        while std::time::Instant::now() < until {
            let Ok(n) = socket.recv(&mut buf) else { break };
            // Another query's answer, or not one at all: wait on.
            if let Ok(response) = dns::parse_response(&buf[..n])
                && response.id == id
            {
                answer = Some(response);
                break 'tries;
            }
        }
    }
    let response = answer.ok_or_else(|| {
        format!(
            "{server} did not answer within {} s, twice",
            DNS_WAIT.as_secs()
        )
    })?;
    if !response.truncated {
        return Ok(response);
    }
    // Too many records for a datagram: the same question over TCP, each
    // message behind its two-byte length (RFC 1035 4.2.2).
    use std::io::Write;
    let until = std::time::Instant::now() + DNS_WAIT;
    let mut stream =
        std::net::TcpStream::connect_timeout(&server, DNS_WAIT).map_err(|e| e.to_string())?;
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    stream
        .set_write_timeout(Some(DNS_WAIT))
        .map_err(|e| e.to_string())?;
    stream.write_all(&framed).map_err(|e| e.to_string())?;
    // One deadline for the whole answer: a server that trickles a byte at
    // a time gets no longer than one that sends nothing.
    let read_by = |stream: &mut std::net::TcpStream, buf: &mut [u8]| {
        crate::endpoint::waiting::fill_by(stream, buf, Some(until)).map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::TimedOut => {
                    format!("no whole answer within {} s", DNS_WAIT.as_secs())
                }
                std::io::ErrorKind::UnexpectedEof => {
                    "closed the connection inside its answer".into()
                }
                _ => e.to_string(),
            };
            format!("{server} over TCP: {why}")
        })
    };
    let mut len = [0u8; 2];
    read_by(&mut stream, &mut len)?;
    let mut message = vec![0u8; u16::from_be_bytes(len) as usize];
    read_by(&mut stream, &mut message)?;
    let response = dns::parse_response(&message).map_err(|e| format!("{server} over TCP: {e}"))?;
    if response.id != id {
        return Err(format!(
            "{server} over TCP answered another question (id {} for our {id})",
            response.id
        ));
    }
    Ok(response)
}

/// Every SRV record of `name`, each target resolved to an address: an
/// agent a record, named `TARGET:PORT`.
fn from_srv(name: &str, servers: &[SocketAddr]) -> Result<Vec<Agent>, String> {
    let mut last = String::from("no nameserver");
    for &server in servers {
        let response = match ask(server, name, dns::TYPE_SRV) {
            Ok(response) => response,
            Err(e) => {
                last = e;
                continue;
            }
        };
        match response.rcode {
            0 => {}
            3 => return Err(format!("{name}: no such name ({server} says NXDOMAIN)")),
            code => {
                last = format!("{server} answered with error code {code}");
                continue;
            }
        }
        let mut records: Vec<dns::Srv> = response
            .answers
            .into_iter()
            .filter_map(|r| match r.data {
                dns::RData::Srv(srv) if !srv.target.is_empty() => Some(srv),
                _ => None,
            })
            .collect();
        if records.is_empty() {
            return Err(format!("{name} has no SRV records"));
        }
        records
            .sort_by(|a, b| (a.priority, &a.target, a.port).cmp(&(b.priority, &b.target, b.port)));
        return records
            .into_iter()
            .map(|srv| {
                let addr = (srv.target.as_str(), srv.port)
                    .to_socket_addrs()
                    .map_err(|e| format!("{name}: cannot resolve its target {}: {e}", srv.target))?
                    .next()
                    .ok_or_else(|| {
                        format!("{name}: its target {} resolves to no address", srv.target)
                    })?;
                Ok(Agent {
                    name: format!("{}:{}", srv.target, srv.port),
                    addr,
                    labels: BTreeMap::new(),
                })
            })
            .collect();
    }
    Err(format!("cannot ask for {name}'s SRV records: {last}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::hosts::{MAX_LABEL_VALUE, entry_line};

    proptest::proptest! {
        #[test]
        fn inventory_lines_never_panic_and_round_trip(text in "(\\PC{0,30}\n){0,8}") {
            if let Ok(found) = entries(&text) {
                let written: Vec<String> = found.iter().map(|(_, e)| entry_line(e)).collect();
                let again: Vec<Entry> = entries(&written.join("\n")).unwrap().into_iter().map(|(_, e)| e).collect();
                let found: Vec<Entry> = found.into_iter().map(|(_, e)| e).collect();
                proptest::prop_assert_eq!(again, found);
            }
        }
    }

    #[test]
    fn an_inventory_is_bounded() {
        let text: String = (0..=MAX_AGENTS)
            .map(|i| format!("10.0.{}.{}\n", i / 250, i % 250))
            .collect();
        assert!(
            entries(&text)
                .unwrap_err()
                .contains("more than 4096 agents")
        );
        // A plan reads more, and is bounded too.
        assert_eq!(
            entries_up_to(&text, MAX_AGENTS + 1).unwrap().len(),
            MAX_AGENTS + 1
        );
        assert!(
            entries_up_to(&text, 10)
                .unwrap_err()
                .contains("more than 10 agents")
        );
    }

    #[test]
    fn a_list_a_file_and_a_name_give_agents() {
        let list = parse("127.0.0.1,127.0.0.2:6000").unwrap();
        assert_eq!(list[0].addr, "127.0.0.1:5310".parse().unwrap());
        assert_eq!(list[1].addr, "127.0.0.2:6000".parse().unwrap());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agents");
        std::fs::write(
            &file,
            "# rack one\n127.0.0.1 zone=a rack=r1\n\n127.0.0.2:5311 zone=a rack=r2 # spare\n",
        )
        .unwrap();
        let from_file = parse(file.to_str().unwrap()).unwrap();
        assert_eq!(from_file.len(), 2);
        assert_eq!(from_file[1].labels["rack"], "r2");
        assert_eq!(from_file[1].addr.port(), 5311);
        // localhost has 127.0.0.1 (and ::1 where configured): at least one.
        match parse("dns:localhost:5400") {
            Ok(agents) => assert!(agents.iter().all(|a| a.addr.port() == 5400)),
            Err(InventoryError::TooFew { count, .. }) => assert_eq!(count, 1),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn labels_the_reports_and_prometheus_cannot_show_are_refused_by_line() {
        let long = "x".repeat(MAX_LABEL_VALUE + 1);
        for (text, says) in [
            ("a rack=x rack=y\n", "line 1: label \"rack\" given twice"),
            ("a\nb ra\u{1}ck=x\n", "line 2: label name \"ra\\u{1}ck\""),
            ("a 9rack=x\n", "label name \"9rack\""),
            ("a rack=\u{1b}[31mred\n", "control characters"),
            (&format!("a rack={long}\n"), "longer than 256 bytes"),
        ] {
            let refused = entries(text).unwrap_err();
            assert!(refused.contains(says), "{text:?}: {refused}");
        }
        let found = entries("a topology.kubernetes.io/zone=z1 rack_2=r-2.b\n").unwrap();
        assert_eq!(found[0].1.1["topology.kubernetes.io/zone"], "z1");
        assert_eq!(found[0].1.1["rack_2"], "r-2.b");
    }

    #[test]
    fn duplicates_too_few_and_nonsense_are_refused_by_name() {
        assert_eq!(
            parse("127.0.0.1,127.0.0.1:5310").unwrap_err().to_string(),
            "--agents names 127.0.0.1:5310 twice: 127.0.0.1 and 127.0.0.1:5310"
        );
        assert_eq!(
            parse("127.0.0.1").unwrap_err().to_string(),
            "a mesh needs at least two agents; --agents 127.0.0.1 gives 1"
        );
        assert!(parse("").unwrap_err().to_string().contains("gives 0"));
        assert!(
            parse("dns:no-such-host.invalid")
                .unwrap_err()
                .to_string()
                .contains("no-such-host.invalid")
        );
        assert!(
            parse("dns::5310")
                .unwrap_err()
                .to_string()
                .contains("needs a name")
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agents");
        std::fs::write(&file, "127.0.0.1\n127.0.0.2 zone\n").unwrap();
        assert!(
            parse(file.to_str().unwrap())
                .unwrap_err()
                .to_string()
                .contains("line 2: \"zone\" is not label=value")
        );
    }

    /// A DNS server on loopback answering one SRV question with `answers`,
    /// truncated over UDP when `truncate`, whole over TCP.
    fn fake_server(answers: Vec<dns::Record>, truncate: bool) -> SocketAddr {
        // One port for both, as a nameserver has: a TCP port first, then
        // the same number for UDP (another one if that is taken).
        let (udp, tcp, addr) = loop {
            let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = tcp.local_addr().unwrap();
            if let Ok(udp) = std::net::UdpSocket::bind(addr) {
                break (udp, tcp, addr);
            }
        };
        let reply = move |query: &[u8], truncated: bool| {
            let id = u16::from_be_bytes([query[0], query[1]]);
            dns::emit_response(&dns::Response {
                id,
                truncated,
                rcode: 0,
                question: None,
                answers: if truncated { vec![] } else { answers.clone() },
            })
            .unwrap()
        };
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let (n, from) = udp.recv_from(&mut buf).unwrap();
            udp.send_to(&reply(&buf[..n], truncate), from).unwrap();
            if truncate {
                use std::io::{Read, Write};
                let (mut stream, _) = tcp.accept().unwrap();
                let mut len = [0u8; 2];
                stream.read_exact(&mut len).unwrap();
                let mut query = vec![0u8; u16::from_be_bytes(len) as usize];
                stream.read_exact(&mut query).unwrap();
                let answer = reply(&query, false);
                stream
                    .write_all(&(answer.len() as u16).to_be_bytes())
                    .unwrap();
                stream.write_all(&answer).unwrap();
            }
        });
        addr
    }

    fn srv(target: &str, port: u16, priority: u16) -> dns::Record {
        dns::Record {
            name: "_control._tcp.agents".into(),
            class: dns::CLASS_IN,
            ttl: 5,
            data: dns::RData::Srv(dns::Srv {
                priority,
                weight: 1,
                port,
                target: target.into(),
            }),
        }
    }

    #[test]
    fn srv_records_give_each_target_and_its_port_over_udp_or_tcp() {
        for truncate in [false, true] {
            let server = fake_server(
                vec![srv("localhost", 5400, 1), srv("127.0.0.1", 5311, 0)],
                truncate,
            );
            let agents = from_srv("_control._tcp.agents", &[server]).unwrap();
            let named: Vec<(&str, u16)> = agents
                .iter()
                .map(|a| (a.name.as_str(), a.addr.port()))
                .collect();
            assert_eq!(
                named,
                [("127.0.0.1:5311", 5311), ("localhost:5400", 5400)],
                "truncated {truncate}"
            );
        }
        let none = fake_server(vec![], false);
        assert!(
            from_srv("_x._tcp.agents", &[none])
                .unwrap_err()
                .contains("no SRV records")
        );
    }
}

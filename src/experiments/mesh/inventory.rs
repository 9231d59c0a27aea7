//! The agents a mesh runs between, from `--agents SPEC`:
//! - a list, `a:5310,b:5310` (the agent's port, 5310, when none is given);
//! - a file, one agent a line, `HOST[:PORT] [label=value ...]`, with `#`
//!   comments and blank lines;
//! - `dns:NAME[:PORT]`: every A and AAAA record of a name, as the system's
//!   resolver returns them (a Kubernetes headless Service gives one per
//!   ready pod).
//!
//! Invariant: an inventory holds at least two agents, no address twice;
//! anything else is refused with the entry that is wrong.

use crate::endpoint::agent::DEFAULT_PORT;
use crate::experiment::remote::resolve;
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
        let text = std::fs::read_to_string(spec).map_err(|e| entry(e.to_string()))?;
        from_file(&text).map_err(entry)?
    } else {
        spec.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|name| agent(name, BTreeMap::new()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(entry)?
    };
    let mut seen: BTreeMap<SocketAddr, &str> = BTreeMap::new();
    for a in &agents {
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
    Ok(agents)
}

fn agent(name: &str, labels: BTreeMap<String, String>) -> Result<Agent, String> {
    Ok(Agent {
        name: name.to_string(),
        addr: resolve(name)?,
        labels,
    })
}

/// `HOST[:PORT] [label=value ...]` a line.
fn from_file(text: &str) -> Result<Vec<Agent>, String> {
    let mut agents = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else {
            continue;
        };
        let labels = words
            .map(|w| {
                w.split_once('=')
                    .filter(|(k, _)| !k.is_empty())
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .ok_or_else(|| format!("line {}: {w:?} is not label=value", i + 1))
            })
            .collect::<Result<_, _>>()?;
        agents.push(agent(name, labels).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(agents)
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(parse("dns::5310").unwrap_err().to_string().contains("needs a name"));
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
}

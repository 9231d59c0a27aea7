//! Shared Ethernet segments: bridges in a namespace of their own, each
//! port a host. A port is either a TAP device (a host that lives in user
//! space, which opens the TAP itself) or a veth pair whose other end is
//! `eth0` of a namespace of its own (a real Linux host). A router is a
//! namespace with a port on two segments.
//!
//! Invariants: every namespace is named `netlab-PID-SEQ-ROLE` (so
//! `netlab testbed clean` finds those of a controller that died); deleting
//! the namespaces deletes every bridge, TAP and veth with them, on drop,
//! on error part-way and on Ctrl-C (the caller's drop); IPv6 is off in all
//! of them, so nothing speaks on the wire but what the run sends; nothing
//! is created outside them.

use super::netns::{NAMESPACE_PREFIX, Runner, TestbedError, has_net_admin};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

static SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// A Linux host on a segment, as built.
#[derive(Debug, Clone, PartialEq)]
pub struct LinuxHost {
    pub name: String,
    pub netns: String,
    /// Its port on the bridge, in the segment's namespace.
    pub port: String,
}

/// The segments' namespace, its bridges and the hosts on them.
pub struct Segments {
    runner: Runner,
    namespaces: Vec<String>,
    pub wire: String,
    pub bridges: Vec<String>,
    pub linux: Vec<LinuxHost>,
    pub taps: Vec<String>,
    stem: String,
}

impl Segments {
    /// The namespace of `bridges` bridges, each up, no STP, no address.
    pub fn create(bridges: usize, verbose: bool) -> Result<Segments, TestbedError> {
        if !has_net_admin() {
            return Err(TestbedError::NoCapability);
        }
        let runner = Runner { verbose };
        let stem = format!(
            "{NAMESPACE_PREFIX}{}-{}",
            std::process::id(),
            // Above the two-namespace testbeds' numbers, so never the same name.
            1_000_000 + SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        let wire = format!("{stem}-w");
        let mut segments = Segments {
            runner,
            namespaces: Vec::new(),
            wire: wire.clone(),
            bridges: Vec::new(),
            linux: Vec::new(),
            taps: Vec::new(),
            stem,
        };
        segments.namespace(&wire)?;
        for b in 0..bridges {
            let name = format!("br{b}");
            let w = wire.as_str();
            runner.run(
                "ip",
                &[
                    "-n",
                    w,
                    "link",
                    "add",
                    &name,
                    "type",
                    "bridge",
                    "stp_state",
                    "0",
                ],
            )?;
            runner.run("ip", &["-n", w, "link", "set", &name, "up"])?;
            segments.bridges.push(name);
        }
        Ok(segments)
    }

    fn namespace(&mut self, name: &str) -> Result<(), TestbedError> {
        self.runner.run("ip", &["netns", "add", name])?;
        self.namespaces.push(name.to_string());
        self.runner.run(
            "ip",
            &[
                "netns",
                "exec",
                name,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ],
        )?;
        self.runner
            .run("ip", &["-n", name, "link", "set", "lo", "up"])?;
        Ok(())
    }

    /// `/run/netns/NAME` of the segments' namespace.
    pub fn wire_path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.wire)
    }

    /// A TAP port on bridge `bridge`, for a host in user space; returns its
    /// name (in the segments' namespace).
    pub fn add_tap(&mut self, bridge: usize) -> Result<String, TestbedError> {
        let name = format!("tap{}", self.taps.len());
        let w = self.wire.as_str();
        self.runner.run(
            "ip",
            &["-n", w, "tuntap", "add", "dev", &name, "mode", "tap"],
        )?;
        self.runner.run(
            "ip",
            &[
                "-n",
                w,
                "link",
                "set",
                &name,
                "master",
                &self.bridges[bridge],
                "up",
            ],
        )?;
        self.taps.push(name.clone());
        Ok(name)
    }

    /// A Linux host on bridge `bridge` (or on several, for a router):
    /// its namespace, `eth0` (`eth1`...) with each address, and IPv4
    /// forwarding as asked.
    pub fn add_linux(
        &mut self,
        role: &str,
        ports: &[(usize, Ipv4Addr, u8, Ipv4Addr)],
        forwarding: bool,
    ) -> Result<LinuxHost, TestbedError> {
        let netns = format!("{}-{role}", self.stem);
        self.namespace(&netns)?;
        let mut first_port = String::new();
        for (k, (bridge, addr, prefix, brd)) in ports.iter().enumerate() {
            let port = format!("p{}{k}", role);
            let eth = format!("eth{k}");
            let w = self.wire.clone();
            self.runner.run(
                "ip",
                &[
                    "-n", &w, "link", "add", &port, "type", "veth", "peer", "name", &eth, "netns",
                    &netns,
                ],
            )?;
            self.runner.run(
                "ip",
                &[
                    "-n",
                    &w,
                    "link",
                    "set",
                    &port,
                    "master",
                    &self.bridges[*bridge],
                    "up",
                ],
            )?;
            let cidr = format!("{addr}/{prefix}");
            let brd = brd.to_string();
            self.runner.run(
                "ip",
                &["-n", &netns, "addr", "add", &cidr, "brd", &brd, "dev", &eth],
            )?;
            self.runner
                .run("ip", &["-n", &netns, "link", "set", &eth, "up"])?;
            if k == 0 {
                first_port = port;
            }
        }
        let value = format!("net.ipv4.ip_forward={}", u8::from(forwarding));
        self.runner
            .run("ip", &["netns", "exec", &netns, "sysctl", "-qw", &value])?;
        let host = LinuxHost {
            name: role.to_string(),
            netns,
            port: first_port,
        };
        self.linux.push(host.clone());
        Ok(host)
    }

    /// A file of `/proc/net` as the host in `netns` sees it.
    pub fn proc_net(&self, netns: &str, file: &str) -> Result<String, TestbedError> {
        let path = format!("/proc/net/{file}");
        self.runner
            .run("ip", &["netns", "exec", netns, "cat", &path])
    }

    /// A port's counter (`rx_packets`...) in the segments' namespace: what
    /// the host on that port put on the wire is the port's `rx_*`.
    pub fn port_counter(&self, port: &str, counter: &str) -> Result<u64, TestbedError> {
        let path = format!("/sys/class/net/{port}/statistics/{counter}");
        let text = self
            .runner
            .run("ip", &["netns", "exec", &self.wire, "cat", &path])?;
        Ok(text.trim().parse().unwrap_or(0))
    }

    /// Deletes every namespace now (also done on drop).
    pub fn teardown(&mut self) {
        for name in self.namespaces.drain(..).rev() {
            if let Err(e) = self.runner.run("ip", &["netns", "del", &name]) {
                eprintln!("netlab: cleaning up namespace {name}: {e}");
            }
        }
    }
}

impl Drop for Segments {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// A counter of `/proc/net/snmp` (or `netstat`): `group` ("Ip", "IpExt"),
/// `field` ("ForwDatagrams"), from the two-line table the kernel writes.
pub fn snmp_counter(text: &str, group: &str, field: &str) -> Option<u64> {
    let prefix = format!("{group}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let names = lines.next()?;
    let values = lines.next()?;
    let at = names.split_whitespace().position(|n| n == field)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_counters_are_read_by_name() {
        let text = "Ip: Forwarding DefaultTTL InReceives ForwDatagrams\nIp: 1 64 12 0\nIcmp: InMsgs\nIcmp: 3\n";
        assert_eq!(snmp_counter(text, "Ip", "InReceives"), Some(12));
        assert_eq!(snmp_counter(text, "Ip", "ForwDatagrams"), Some(0));
        assert_eq!(snmp_counter(text, "Ip", "Nope"), None);
        assert_eq!(snmp_counter(text, "Tcp", "InSegs"), None);
    }
}

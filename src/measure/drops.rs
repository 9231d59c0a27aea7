//! Where the kernel dropped packets and why: the `skb:kfree_skb`
//! tracepoint, which since Linux 5.17 carries the drop's reason (`enum
//! skb_drop_reason`) and the function that dropped it (`location`).
//!
//! A watch runs in a tracefs instance of its own (`instances/netlab-PID-N`),
//! so it neither reads nor clears anybody else's trace buffer; tracefs is
//! mounted on a private directory when the machine has not mounted it. The
//! tracepoint sees every namespace: a count is the host's, which on a run's
//! own namespaces is the run's.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

static SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// A running watch.
pub struct DropWatch {
    instance: PathBuf,
    /// The directory tracefs was mounted on for this watch, if it was.
    mounted: Option<PathBuf>,
}

/// Drops of one kind: the function, the reason, how many.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Drops {
    pub function: String,
    pub reason: String,
    pub count: u64,
}

fn tracefs() -> io::Result<(PathBuf, Option<PathBuf>)> {
    for root in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(root).join("instances").is_dir() {
            return Ok((PathBuf::from(root), None));
        }
    }
    let dir = std::env::temp_dir().join(format!("netlab-tracefs-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    let status = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev"])
        .arg(&dir)
        .status()?;
    if !status.success() {
        let _ = fs::remove_dir(&dir);
        return Err(io::Error::other("tracefs cannot be mounted here"));
    }
    Ok((dir.clone(), Some(dir)))
}

impl DropWatch {
    /// Starts counting drops (needs root and a kernel with tracefs).
    pub fn start() -> io::Result<DropWatch> {
        let (root, mounted) = tracefs()?;
        let instance = root.join("instances").join(format!(
            "netlab-{}-{}",
            std::process::id(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        ));
        let watch = DropWatch { instance, mounted };
        fs::create_dir(&watch.instance)?;
        let event = watch.instance.join("events/skb/kfree_skb");
        if !event.is_dir() {
            return Err(io::Error::other(
                "this kernel has no skb:kfree_skb tracepoint",
            ));
        }
        fs::write(event.join("enable"), "1")?;
        Ok(watch)
    }

    /// Stops and counts IPv4 drops by function and reason.
    pub fn finish(self) -> io::Result<Vec<Drops>> {
        let _ = fs::write(self.instance.join("events/skb/kfree_skb/enable"), "0");
        let text = fs::read_to_string(self.instance.join("trace"))?;
        Ok(count_ipv4(&text))
    }
}

impl Drop for DropWatch {
    fn drop(&mut self) {
        let _ = fs::write(self.instance.join("events/skb/kfree_skb/enable"), "0");
        let _ = fs::remove_dir(&self.instance);
        if let Some(dir) = self.mounted.take() {
            let _ = std::process::Command::new("umount").arg(&dir).status();
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// The IPv4 (protocol 2048) drops in a trace, by function and reason.
pub fn count_ipv4(trace: &str) -> Vec<Drops> {
    let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
    for line in trace.lines().filter(|l| l.contains("kfree_skb:")) {
        if !line.contains("protocol=2048 ") {
            continue;
        }
        let Some(location) = line.split("location=").nth(1) else {
            continue;
        };
        let function = location
            .split(['+', ' '])
            .next()
            .unwrap_or_default()
            .to_string();
        let reason = line
            .split("reason: ")
            .nth(1)
            .unwrap_or("?")
            .trim()
            .to_string();
        *counts.entry((function, reason)).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|((function, reason), count)| Drops {
            function,
            reason,
            count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_counted_by_function_and_reason() {
        let trace = "# tracer: nop\n\
            python3-2193 [001] ..s1. 546.436803: kfree_skb: skbaddr=0000000094d1c1c8 rx_sk=0000000000000000 protocol=2048 location=ip_forward+0x2c0/0x730 reason: NOT_SPECIFIED\n\
            python3-2193 [001] ..s1. 546.436822: kfree_skb: skbaddr=0000000094d1c1c8 rx_sk=0000000000000000 protocol=2048 location=ip_forward+0x2c0/0x730 reason: NOT_SPECIFIED\n\
            python3-2239 [000] ..s1. 546.922846: kfree_skb: skbaddr=00000000cb57f51d rx_sk=0000000000000000 protocol=2048 location=ip_rcv_core+0x22c/0x350 reason: OTHERHOST\n\
            x-1 [000] ..s1. 1.0: kfree_skb: skbaddr=0 rx_sk=0 protocol=34525 location=ip6_rcv_core+0x1/0x2 reason: IPV6DISABLED\n";
        assert_eq!(
            count_ipv4(trace),
            vec![
                Drops {
                    function: "ip_forward".into(),
                    reason: "NOT_SPECIFIED".into(),
                    count: 2
                },
                Drops {
                    function: "ip_rcv_core".into(),
                    reason: "OTHERHOST".into(),
                    count: 1
                },
            ]
        );
    }
}

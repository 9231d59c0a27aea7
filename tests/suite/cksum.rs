//! The checksum variants against checksums the kernel computed, and the
//! `netlab cksum` command.

use assert_cmd::Command;
use netlab::checksum;
use netlab::testbed::emulator::{TunSide, open_tun};
use std::os::fd::AsRawFd;
use std::process::Command as Process;

/// A namespace with a TUN device, deleted on drop.
struct TunNamespace {
    name: String,
}

impl Drop for TunNamespace {
    fn drop(&mut self) {
        let _ = Process::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn ip(args: &[&str]) {
    let status = Process::new("ip").args(args).status().expect("ip runs");
    assert!(status.success(), "ip {args:?}");
}

#[test]
fn variants_verify_checksums_the_kernel_computed() {
    assert!(
        netlab::testbed::netns::has_net_admin(),
        "this test needs root (CAP_NET_ADMIN)"
    );
    let ns = TunNamespace {
        name: format!("netlab-{}-90-a", std::process::id()),
    };
    ip(&["netns", "add", &ns.name]);
    ip(&[
        "-n", &ns.name, "tuntap", "add", "dev", "nlbck0", "mode", "tun",
    ]);
    ip(&[
        "-n",
        &ns.name,
        "link",
        "set",
        "nlbck0",
        "addrgenmode",
        "none",
    ]);
    ip(&[
        "-n",
        &ns.name,
        "addr",
        "add",
        "198.18.7.1/30",
        "dev",
        "nlbck0",
    ]);
    ip(&["-n", &ns.name, "link", "set", "nlbck0", "up"]);
    let tun = open_tun(
        &TunSide {
            netns: format!("/run/netns/{}", ns.name).into(),
            interface: "nlbck0".into(),
        },
        false,
    )
    .expect("TUN device opens");
    // A UDP datagram from inside the namespace towards the far end of the
    // TUN link: the kernel fills in the IPv4 and UDP checksums (a TUN device
    // without offloads takes only complete packets). The device's carrier
    // comes up when the file opens, but the kernel starts its queue only
    // when link-watch runs (up to a second later, more on a busy host), and
    // drops what is sent before: so the datagram is sent again until one
    // arrives.
    let send = || {
        let status = Process::new("ip")
            .args([
                "netns",
                "exec",
                &ns.name,
                "bash",
                "-c",
                "echo -n 'netlab checks the sum!' > /dev/udp/198.18.7.2/9",
            ])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let mut packet = vec![0u8; 2048];
    let mut got = None;
    'sending: for _ in 0..20 {
        send();
        for _ in 0..10 {
            // SAFETY: packet is valid for its length.
            let n =
                unsafe { libc::read(tun.as_raw_fd(), packet.as_mut_ptr().cast(), packet.len()) };
            if n > 28 && packet[0] >> 4 == 4 && packet[9] == 17 {
                got = Some(n as usize);
                break 'sending;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let len = got.expect("the kernel wrote the UDP datagram into the TUN device");
    let packet = &packet[..len];
    let ihl = usize::from(packet[0] & 0x0f) * 4;
    // The IPv4 header, checksum field included, sums to zero.
    for (name, f) in checksum::VARIANTS {
        assert_eq!(f(&packet[..ihl]), 0, "{name}: IPv4 header");
    }
    // UDP: pseudo-header (RFC 768) plus the datagram, checksum included, sums to zero.
    let udp = &packet[ihl..];
    assert_ne!(
        u16::from_be_bytes([udp[6], udp[7]]),
        0,
        "the kernel filled the UDP checksum"
    );
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&packet[12..20]);
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(udp);
    for (name, f) in checksum::VARIANTS {
        assert_eq!(f(&pseudo), 0, "{name}: UDP");
    }
    // And recomputing with the field zeroed gives the kernel's value.
    let kernel = u16::from_be_bytes([udp[6], udp[7]]);
    let at = 12 + 6;
    pseudo[at] = 0;
    pseudo[at + 1] = 0;
    assert_eq!(checksum::simd(&pseudo), kernel);
}

#[test]
fn cksum_measures_and_refuses_bad_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let doc = crate::common::run_json(
        &crate::common::words("cksum --sizes 1408,4096 --batches 2 --cold-pool 8M"),
        &dir.path().join("r.jsonl"),
    );
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 2);
    let rows = records[0]["result"]["rows"].as_array().unwrap();
    // Hot and cold: the read sweep, 3 checksums, 3 fused copies, 6 copies
    // (rep movsb since 2026-11-24), 3 AEADs sealing and opening (#65).
    assert_eq!(rows.len(), 2 * (13 + 6));
    for kind in ["seal", "open"] {
        assert_eq!(
            rows.iter().filter(|r| r["kind"] == kind).count(),
            2 * 3,
            "{kind}"
        );
    }
    assert!(records[0]["result"].get("openssl").is_none());
    assert!(rows.iter().all(|r| r["gb_s"].as_f64().unwrap() > 0.0));
    // The caches are a fact of the measuring host, kept with the record
    // (sysfs lists them on every Linux this runs on).
    let caches = records[0]["host"]["caches"].as_str().unwrap();
    assert!(caches.starts_with("L1d "), "{caches}");
    assert_eq!(doc["caches"], records[0]["host"]["caches"]);
    for (sizes, message) in [
        ("0", "greater than zero"),
        ("4Q", "unknown size suffix"),
        ("1e9", "not a whole number"),
        ("1000G", "only"),
    ] {
        let assert = Command::cargo_bin("netlab")
            .unwrap()
            .args(["cksum", "--sizes", sizes, "--out"])
            .arg(dir.path().join("r.jsonl"))
            .assert()
            .code(1);
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
        assert!(stderr.contains(message), "{sizes}: {stderr}");
    }
}

#[test]
fn cksum_times_the_aeads_beside_openssl_speed_and_refuses_unknown_ciphers() {
    let dir = tempfile::tempdir().unwrap();
    let doc = crate::common::run_json(
        &crate::common::words(
            "cksum --sizes 16384 --batches 2 --cold-pool 8M --ciphers aes-128-gcm,chacha20-poly1305 --openssl",
        ),
        &dir.path().join("r.jsonl"),
    );
    let result = &doc["records"][0]["result"];
    let rows = result["rows"].as_array().unwrap();
    let seal = rows
        .iter()
        .find(|r| r["variant"] == "seal-aes-128-gcm" && r["cold"] == false)
        .expect("the AES-128-GCM seal is timed");
    assert!(seal["gb_s"].as_f64().unwrap() > 0.0);
    assert!(
        !rows.iter().any(|r| r["variant"] == "seal-aes-256-gcm"),
        "only the ciphers asked for"
    );
    // The real openssl on this host, for both ciphers both ways.
    let baseline = &result["openssl"];
    assert!(baseline["problem"].is_null(), "{baseline}");
    assert!(
        baseline["version"].as_str().unwrap().starts_with("OpenSSL"),
        "{baseline}"
    );
    let b = baseline["rows"].as_array().unwrap();
    assert_eq!(b.len(), 4, "{baseline}");
    for row in b {
        let ns = row["ns_per_kb"].as_f64().unwrap();
        // Any AEAD on a machine that runs this suite seals a KB in between
        // a nanosecond and a millisecond: a parse gone wrong is far outside.
        assert!((1.0..1e6).contains(&ns), "{row}");
    }
    for (args, message) in [
        ("--ciphers rc4", "unknown cipher \"rc4\""),
        ("--ciphers aes-128-gcm,des", "unknown cipher \"des\""),
        ("--ciphers none --openssl", "--openssl times ciphers"),
    ] {
        let assert = Command::cargo_bin("netlab")
            .unwrap()
            .args(["cksum", "--sizes", "64"])
            .args(args.split(' '))
            .arg("--out")
            .arg(dir.path().join("bad.jsonl"))
            .assert()
            .failure();
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
        // One line says it all (clap adds its pointer to --help below).
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(message), "{args}: {stderr}");
    }
    assert!(!dir.path().join("bad.jsonl").exists());
}

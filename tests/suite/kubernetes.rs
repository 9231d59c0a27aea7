//! `netlab mesh manifests` against Kubernetes' own OpenAPI schemas, offline:
//! PyPI's kubernetes-validate (which carries the schemas of Kubernetes 1.25
//! to 1.37), installed by scripts/test into the user's cache and linked from
//! target/tmp/kubernetes-validate.
//! The default manifests are also kept as deploy/kubernetes/netlab.yaml, a
//! golden copy: a change to them is a change to that file, seen in review.
//! Without the validator the test fails naming what to run; it never skips.

use crate::common::words;
use base64::Engine;
use netlab::endpoint::agent::key::Key;
use std::path::{Path, PathBuf};
use std::process::Command;

fn netlab(args: &[&str]) -> String {
    let out = Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "netlab {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn validator() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/tmp/kubernetes-validate/bin/kubernetes-validate");
    assert!(
        path.exists(),
        "{} is missing: scripts/test installs it (python3 -m venv target/tmp/kubernetes-validate && target/tmp/kubernetes-validate/bin/pip install kubernetes-validate)",
        path.display()
    );
    path
}

/// Validates `yaml` strictly (no property the schema lacks) against
/// `version`'s schemas; returns the validator's account.
fn validate(yaml: &str, version: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("netlab.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(validator())
        .args(["--strict", "-k", version])
        .arg(&file)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "Kubernetes {version}: {said}");
    said
}

#[test]
fn the_manifests_are_the_golden_copy_and_kubernetes_schemas_accept_them() {
    let yaml = netlab(&words(
        "mesh manifests --image ghcr.io/example/netlab:0.1.0",
    ));
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/netlab.yaml");
    assert_eq!(
        yaml,
        std::fs::read_to_string(&golden).unwrap(),
        "the manifests changed: regenerate {} with `netlab mesh manifests --image ghcr.io/example/netlab:0.1.0` and review the difference",
        golden.display()
    );
    for version in ["1.25.0", "1.37.0"] {
        let said = validate(&yaml, version);
        for object in [
            "namespace/netlab",
            "daemonset/netlab-agent",
            "service/netlab-agents",
            "job/netlab-mesh",
        ] {
            assert!(
                said.contains(&format!("passed for resource {object}")),
                "{said}"
            );
        }
    }

    // The continuous controller as a Deployment, its metrics port scraped,
    // the agents' too: its own golden copy, the same schemas.
    let continuous = netlab(&words(
        "mesh manifests --image ghcr.io/example/netlab:0.1.0 --continuous --stream-every 1h",
    ));
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/netlab-continuous.yaml");
    assert_eq!(
        continuous,
        std::fs::read_to_string(&golden).unwrap(),
        "the manifests changed: regenerate {} with `netlab mesh manifests --image ghcr.io/example/netlab:0.1.0 --continuous --stream-every 1h` and review the difference",
        golden.display()
    );
    for version in ["1.25.0", "1.37.0"] {
        let said = validate(&continuous, version);
        for object in [
            "daemonset/netlab-agent",
            "deployment/netlab-mesh-continuous",
        ] {
            assert!(
                said.contains(&format!("passed for resource {object}")),
                "{said}"
            );
        }
    }
    for expected in [
        "prometheus.io/port: '9464'",
        "prometheus.io/port: '9465'",
        "- --every\n        - 30s",
        "- --metrics\n        - 0.0.0.0:9464",
        "type: Recreate",
    ] {
        assert!(continuous.contains(expected), "{expected}: {continuous}");
    }
    assert!(!continuous.contains("kind: Job"));

    // A sampled fleet (#64): agents probing their own peers from the
    // Service's DNS, a watching controller; both scraped, both valid.
    let sampled = netlab(&words(
        "mesh manifests --image ghcr.io/example/netlab:0.1.0 --sampled --every 60s --probe-rate 100",
    ));
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/netlab-sampled.yaml");
    assert_eq!(
        sampled,
        std::fs::read_to_string(&golden).unwrap(),
        "the manifests changed: regenerate {} with `netlab mesh manifests --image ghcr.io/example/netlab:0.1.0 --sampled --every 60s --probe-rate 100` and review the difference",
        golden.display()
    );
    for version in ["1.25.0", "1.37.0"] {
        let said = validate(&sampled, version);
        for object in ["daemonset/netlab-agent", "deployment/netlab-mesh-watch"] {
            assert!(
                said.contains(&format!("passed for resource {object}")),
                "{said}"
            );
        }
    }
    for expected in [
        "prometheus.io/port: '9464'",
        "prometheus.io/port: '9465'",
        "- --probe-peers\n        - dns:netlab-agents.netlab.svc.cluster.local:5310",
        "- --probe-rate\n        - '100'",
        "value: $(POD_IP):5310",
        "protocol: UDP",
        "- watch\n",
    ] {
        assert!(sampled.contains(expected), "{expected}: {sampled}");
    }
    assert!(!sampled.contains("kind: Job"));
    // --passes goes into the Job's arguments.
    let passes = netlab(&words(
        "mesh manifests --image ghcr.io/example/netlab:0.1.0 --passes 16",
    ));
    assert!(passes.contains("- --passes\n        - '16'"), "{passes}");
    validate(&passes, "1.25.0");

    // With a key, the pod network and a schedule: a Secret holding that
    // key, no host network, a CronJob.
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("agent.key");
    let key = Key::generate().unwrap();
    key.write_new(&key_path).unwrap();
    let yaml = netlab(&[
        "mesh",
        "manifests",
        "--namespace",
        "mesh-a",
        "--image",
        "registry.local/netlab:dev",
        "--pod-network",
        "--key",
        key_path.to_str().unwrap(),
        "--schedule",
        "30 2 * * *",
    ]);
    for version in ["1.25.0", "1.37.0"] {
        let said = validate(&yaml, version);
        for object in [
            "secret/netlab-key",
            "cronjob/netlab-mesh",
            "daemonset/netlab-agent",
        ] {
            assert!(
                said.contains(&format!("passed for resource {object}")),
                "{said}"
            );
        }
    }
    assert!(!yaml.contains("hostNetwork"));
    let data = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("agent.key: "))
        .expect("the Secret's key");
    let text = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    assert_eq!(Key::parse(&String::from_utf8(text).unwrap()), Some(key));
    assert!(yaml.contains("dns:netlab-agents.mesh-a.svc.cluster.local:5310"));

    // Bad input is named.
    let out = Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .args(["mesh", "manifests", "--image", "x", "--namespace", "Bad_NS"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--namespace \"Bad_NS\""));
}

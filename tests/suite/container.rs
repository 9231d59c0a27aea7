//! The image of `deploy/kubernetes/`, built and run as a cluster would run
//! it, with Debian's podman (runc, `--cgroup-manager=cgroupfs`: crun
//! refuses this host's hybrid cgroups): a base image imported from a
//! debootstrap rootfs (no registry is reachable here), the netlab binary
//! this test suite built copied in by `Dockerfile.prebuilt`; four agent
//! containers on a podman network, all under one network alias, as a
//! headless Service gives them one name; the controller in a container of
//! its own, as the Job runs it (`--agents dns:NAME`, its run directory in
//! /results), finding the agents by the network's DNS (aardvark-dns). Every
//! container runs as the manifests run it: no capability, a read-only root
//! filesystem, no privilege escalation, and explicit `nofile` and `nproc`
//! limits at or below the host's. The matrix must be complete.
//!
//! Root is needed; without podman, runc or debootstrap it fails saying so
//! (scripts/test installs them). Everything it makes (containers, the
//! network, the images) is removed at its end; the debootstrap rootfs is
//! kept as a tarball in target/tmp for the next run.

use netlab::endpoint::agent::key::Key;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const AGENTS: usize = 4;

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(["--cgroup-manager=cgroupfs", "--runtime=runc"])
        .args(args)
        .output()
        .expect("podman runs (scripts/test installs podman and runc)")
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the test made, removed on drop whatever happened.
struct Made {
    containers: Vec<String>,
    network: Option<String>,
    images: Vec<String>,
}

impl Drop for Made {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = podman(&["rm", "-f", "-t", "2", c]);
        }
        if let Some(n) = &self.network {
            let _ = podman(&["network", "rm", "-f", n]);
        }
        for i in &self.images {
            let _ = podman(&["rmi", "-f", i]);
        }
    }
}

/// A Debian bookworm minbase rootfs as a tarball, made by debootstrap once
/// and kept in target/tmp.
fn base_tarball() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let tarball = dir.join("netlab-base-bookworm.tar");
    if tarball.exists() {
        return tarball;
    }
    let rootfs = tempfile::tempdir_in(&dir).unwrap();
    let out = Command::new("debootstrap")
        .args(["--variant=minbase", "bookworm"])
        .arg(rootfs.path())
        .arg("http://deb.debian.org/debian")
        .output()
        .expect("debootstrap runs (scripts/test installs it)");
    ok(&out, "debootstrap --variant=minbase bookworm");
    let partial = dir.join("netlab-base-bookworm.tar.partial");
    let out = Command::new("tar")
        .arg("-C")
        .arg(rootfs.path())
        .arg("-cf")
        .arg(&partial)
        .arg(".")
        .output()
        .unwrap();
    ok(&out, "tar of the rootfs");
    std::fs::rename(&partial, &tarball).unwrap();
    tarball
}

/// A limit for the containers: at or below the host's hard limit.
fn at_most_host(resource: nix::sys::resource::Resource, wanted: u64) -> u64 {
    let (_, hard) = nix::sys::resource::getrlimit(resource).unwrap();
    wanted.min(hard)
}

#[test]
fn the_image_runs_agents_and_a_controller_that_finds_them_by_dns() {
    assert!(
        netlab::testbed::netns::has_net_admin(),
        "the container test needs root"
    );
    for tool in ["/usr/bin/podman", "/usr/sbin/runc", "/usr/sbin/debootstrap"] {
        assert!(
            Path::new(tool).exists() || Path::new(&tool.replace("/sbin/", "/bin/")).exists(),
            "the container test needs {tool} (scripts/test installs podman, runc and debootstrap)"
        );
    }
    let tag = std::process::id();
    let mut made = Made {
        containers: Vec::new(),
        network: None,
        images: Vec::new(),
    };
    // The base, imported from the rootfs; the image, from the binary.
    let base = format!("localhost/netlab-test-base:{tag}");
    let out = podman(&["import", base_tarball().to_str().unwrap(), &base]);
    made.images.push(base.clone());
    ok(&out, "podman import");
    let context = tempfile::tempdir().unwrap();
    let binary = context.path().join("netlab");
    std::fs::copy(assert_cmd::cargo::cargo_bin("netlab"), &binary).unwrap();
    ok(
        &Command::new("strip").arg(&binary).output().unwrap(),
        "strip",
    );
    let image = format!("localhost/netlab-test:{tag}");
    let dockerfile =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/Dockerfile.prebuilt");
    let started = Instant::now();
    let out = podman(&[
        "build",
        "--build-arg",
        &format!("BASE={base}"),
        "-f",
        dockerfile.to_str().unwrap(),
        "-t",
        &image,
        context.path().to_str().unwrap(),
    ]);
    made.images.push(image.clone());
    ok(&out, "podman build");
    let built_s = started.elapsed().as_secs_f64();
    let size = ok(
        &podman(&["image", "inspect", "--format", "{{.Size}}", &image]),
        "podman image inspect",
    );
    eprintln!(
        "image {image}: {} bytes, built in {built_s:.1} s (the binary {} bytes stripped)",
        size.trim(),
        std::fs::metadata(&binary).unwrap().len()
    );

    let network = format!("netlab-test-{tag}");
    ok(
        &podman(&["network", "create", &network]),
        "podman network create",
    );
    made.network = Some(network.clone());
    let keys = tempfile::tempdir().unwrap();
    Key::generate()
        .unwrap()
        .write_new(&keys.path().join("agent.key"))
        .unwrap();
    let volume = format!("{}:/etc/netlab:ro", keys.path().display());
    let nofile = at_most_host(nix::sys::resource::Resource::RLIMIT_NOFILE, 4096);
    let nproc = at_most_host(nix::sys::resource::Resource::RLIMIT_NPROC, 4096);
    let limits = [
        "--ulimit".to_string(),
        format!("nofile={nofile}:{nofile}"),
        "--ulimit".to_string(),
        format!("nproc={nproc}:{nproc}"),
    ];
    // As the manifests run them: no capability, read-only, no escalation.
    let confined = [
        "--cap-drop=ALL",
        "--read-only",
        "--security-opt=no-new-privileges",
    ];
    for i in 0..AGENTS {
        let name = format!("netlab-test-{tag}-agent{i}");
        let mut args = vec![
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            &network,
            "--network-alias",
            "netlab-agents",
            "-v",
            &volume,
        ];
        args.extend(limits.iter().map(String::as_str));
        args.extend(confined);
        args.extend([
            image.as_str(),
            "agent",
            "serve",
            "--listen",
            "0.0.0.0:5310",
            "--key",
            "/etc/netlab/agent.key",
        ]);
        let out = podman(&args);
        made.containers.push(name.clone());
        ok(&out, &format!("podman run {name}"));
    }
    for name in made.containers.clone() {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let logs = podman(&["logs", &name]);
            if String::from_utf8_lossy(&logs.stderr).contains("listening on") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not start: {}",
                String::from_utf8_lossy(&logs.stderr)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // The controller as the Job runs it: the agents by one DNS name, its
    // run directory in /results, the summary as JSON on stdout.
    let controller = format!("netlab-test-{tag}-mesh");
    let mut args = vec![
        "run",
        "--name",
        &controller,
        "--network",
        &network,
        "-v",
        &volume,
        "--tmpfs",
        "/results",
        "--workdir",
        "/results",
    ];
    args.extend(limits.iter().map(String::as_str));
    args.extend(confined);
    args.extend([
        image.as_str(),
        "mesh",
        "--agents",
        "dns:netlab-agents:5310",
        "--key",
        "/etc/netlab/agent.key",
        "--tests",
        "stream,rtt,loss",
        "--duration",
        "1s",
        "--json",
    ]);
    let out = podman(&args);
    made.containers.push(controller);
    let summary: Value = serde_json::from_str(&ok(&out, "the controller's container"))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // Every ordered pair, every test: the complete matrix.
    let want = AGENTS * (AGENTS - 1) * 3;
    assert_eq!(
        summary["measured"].as_u64(),
        Some(want as u64),
        "{summary}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(summary["failed"], 0, "{summary}");
    assert!(summary["lost"].as_array().unwrap().is_empty(), "{summary}");
}

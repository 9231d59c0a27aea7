//! Real login servers beside netlab's own, started by the serving endpoint
//! of a login-load or terminal-output cell ([`super::host`]) in its own
//! namespace: inetutils telnetd started per connection by socat as inetd
//! would, and OpenSSH's sshd with a throwaway host key, a throwaway client
//! key and a key-only test user, all created here.
//!
//! Guarded runs (through an agent): the port comes from the agent's data
//! ports, socat serves only the named peer (`range=`), and sshd lets the
//! test user in only from it (`AllowUsers user@peer`). A real client speaks
//! its protocol from the first byte, so these ports take no run token
//! (netlab's own servers do: [`super::conn::SessionConfig::admits`]).
//!
//! Invariant: [`Program::stop`] (also on drop) stops the root (SIGTERM, then
//! SIGKILL after 5 s), kills by PID every descendant noted before, waits
//! for them, and only then removes the test user, the privilege-separation
//! directory (if this created it) and the key files.

use crate::endpoint::guard::bind_first;
use crate::endpoint::protocol::DataGuard;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What an OpenSSH client needs to log in to a cell's sshd: the test user,
/// its throwaway private key, the server's host key line, and the command
/// its session runs. Sent to the typing end over the control channel (a
/// pipe, or an agent's encrypted channel); valid for one cell.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SshAccess {
    pub user: String,
    /// The client's private key, OpenSSH format.
    pub client_key: String,
    /// The server's `known_hosts` line.
    pub known_hosts: String,
    /// What the session runs.
    pub command: String,
}

impl SshAccess {
    /// Writes the key and known_hosts into `dir` and returns the arguments
    /// of an OpenSSH client session to `server` running the command on a pty.
    pub fn argv(&self, dir: &Path, server: SocketAddr) -> io::Result<Vec<String>> {
        use std::os::unix::fs::OpenOptionsExt;
        let key = dir.join("client_key");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key)?;
        io::Write::write_all(&mut file, self.client_key.as_bytes())?;
        let known_hosts = dir.join("known_hosts");
        std::fs::write(&known_hosts, format!("{}\n", self.known_hosts.trim_end()))?;
        let mut argv: Vec<String> = ["ssh", "-F", "/dev/null", "-tt", "-i"]
            .map(String::from)
            .to_vec();
        argv.push(key.display().to_string());
        argv.extend(["-p".to_string(), server.port().to_string()]);
        for option in [
            "BatchMode=yes".to_string(),
            "IdentitiesOnly=yes".to_string(),
            "StrictHostKeyChecking=yes".to_string(),
            format!("UserKnownHostsFile={}", known_hosts.display()),
            "GlobalKnownHostsFile=/dev/null".to_string(),
            "LogLevel=ERROR".to_string(),
        ] {
            argv.extend(["-o".to_string(), option]);
        }
        argv.push(format!("{}@{}", self.user, server.ip()));
        argv.push(self.command.clone());
        Ok(argv)
    }
}

fn refused(message: impl Into<String>) -> io::Error {
    io::Error::other(message.into())
}

/// A real server's process, stopped with everything it needed on drop.
pub struct Program {
    child: Child,
    pub port: u16,
    what: &'static str,
    /// A file the server runs (telnetd's command).
    _script: Option<tempfile::TempPath>,
    sshd: Option<SshdSetup>,
    stopped: bool,
}

impl Program {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server and every process of its tree, then removes what
    /// it needed.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        // socat and sshd leave their per-connection children running when
        // they stop: note every descendant now, kill what is left after.
        let descendants = descendants(self.child.id());
        if let Ok(None) = self.child.try_wait() {
            // SIGTERM, not SIGINT: an endpoint ignores SIGINT (the
            // terminal's Ctrl-C is the controller's), and its children
            // inherit that.
            // SAFETY: signalling our own child by PID.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // The test user can only be removed once its processes are gone.
        kill_and_wait(&descendants);
        drop(self.sshd.take());
    }

    fn wait_listening(&mut self, addr: Ipv4Addr, log: &Path) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !listening(self.child.id(), addr, self.port) {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                return Err(refused(format!(
                    "{} exited ({status}) before it listened: {}",
                    self.what,
                    log.trim()
                )));
            }
            if Instant::now() > deadline {
                return Err(refused(format!(
                    "{} never listened on {addr}:{}",
                    self.what, self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Kills `pids` (processes of netlab's own servers and test users) by PID
/// and waits up to 5 s for them to be gone.
fn kill_and_wait(pids: &[u32]) {
    for &pid in pids {
        // SAFETY: a process netlab's server or test user runs, by PID.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids
        .iter()
        .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every descendant of `root` (not `root` itself).
pub fn descendants(root: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                    for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                        found.push(child);
                        stack.push(child);
                    }
                }
            }
        }
    }
    found
}

/// Whether process `pid`'s namespace has a socket listening on `addr`:`port`
/// (from its `/proc/PID/net/tcp`, so a probe connection, which the server
/// would serve and count, is not needed).
fn listening(pid: u32, addr: Ipv4Addr, port: u16) -> bool {
    let want = format!(
        "{:08X}:{port:04X} 00000000:0000 0A",
        u32::from_le_bytes(addr.octets())
    );
    std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).is_ok_and(|t| t.contains(&want))
}

/// A port free on `addr` now: the kernel's pick, or the first free one of
/// the guard's data ports.
fn free_port(addr: Ipv4Addr, guard: Option<&DataGuard>) -> io::Result<u16> {
    let listener = bind_first(SocketAddr::from((addr, 0)), guard, TcpListener::bind)?;
    Ok(listener.local_addr()?.port())
}

/// inetutils telnetd behind socat, running `command` through a script
/// (telnetd's -E takes one word). For LINEMODE, telnetd's `-l` offers it.
pub fn telnetd(
    linemode: bool,
    command: &str,
    addr: Ipv4Addr,
    guard: Option<&DataGuard>,
    log: &Path,
) -> io::Result<Program> {
    const TELNETD: &str = "/usr/sbin/telnetd";
    if !Path::new(TELNETD).exists() {
        return Err(refused(format!(
            "{TELNETD} is missing (apt-get install inetutils-telnetd)"
        )));
    }
    let script = tempfile::Builder::new()
        .prefix("netlab-telnetd-command")
        .tempfile()?;
    std::fs::write(script.path(), format!("#!/bin/sh\n{command}\n"))?;
    std::fs::set_permissions(
        script.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let script = script.into_temp_path();
    let port = free_port(addr, guard)?;
    let range = guard.map_or(String::new(), |g| format!(",range={}/32", g.peer));
    let child = Command::new("socat")
        .arg(format!(
            "TCP-LISTEN:{port},bind={addr},reuseaddr,fork,backlog=1024{range}"
        ))
        .arg(format!(
            "EXEC:{TELNETD} -h{} -E {},nofork",
            if linemode { " -l" } else { "" },
            script.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::options().append(true).open(log)?)
        .spawn()
        .map_err(|e| {
            refused(format!(
                "cannot start socat for telnetd (apt-get install socat): {e}"
            ))
        })?;
    let mut program = Program {
        child,
        port,
        what: "socat (for telnetd)",
        _script: Some(script),
        sshd: None,
        stopped: false,
    };
    program.wait_listening(addr, log)?;
    Ok(program)
}

/// What sshd needs that netlab creates: keys, config, a test user, maybe
/// the privilege-separation directory. Removed on drop, user first.
struct SshdSetup {
    dir: tempfile::TempDir,
    user: String,
    made_privsep_dir: bool,
}

impl Drop for SshdSetup {
    fn drop(&mut self) {
        if let Err(e) = run_tool("userdel", &[&self.user]) {
            eprintln!("warning: could not remove the test user {}: {e}", self.user);
        }
        if self.made_privsep_dir {
            let _ = std::fs::remove_dir(PRIVSEP_DIR);
        }
    }
}

const SSHD: &str = "/usr/sbin/sshd";
const PRIVSEP_DIR: &str = "/run/sshd";
/// Test users are named this, then the PID of the process that made them.
pub const SSH_USER_PREFIX: &str = "netlab-ssh-";

fn run_tool(program: &str, args: &[&str]) -> io::Result<()> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| refused(format!("cannot run {program}: {e}")))?;
    if !out.status.success() {
        return Err(refused(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn utf8(path: &Path) -> io::Result<&str> {
    path.to_str()
        .ok_or_else(|| refused("a temporary path is not UTF-8"))
}

/// OpenSSH's sshd on a throwaway ed25519 host key, public-key
/// authentication only, for one test user whose only key is a throwaway
/// client key; no PAM, no password, no forwarding, no MOTD. Returns the
/// server and what a client needs (its `command` left empty).
pub fn sshd(
    max_sessions: usize,
    addr: Ipv4Addr,
    guard: Option<&DataGuard>,
    log: &Path,
) -> io::Result<(Program, SshAccess)> {
    if !Path::new(SSHD).exists() {
        return Err(refused(format!(
            "{SSHD} is missing (apt-get install openssh-server)"
        )));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(refused(
            "sshd cells need root: netlab creates and removes a test user for them",
        ));
    }
    let dir = tempfile::Builder::new().prefix("netlab-sshd").tempdir()?;
    let path = |name: &str| dir.path().join(name);
    // The test user's home: readable by it (sshd drops to the user to read
    // authorized_keys).
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    for key in ["host_key", "client_key"] {
        run_tool(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "netlab",
                "-f",
                utf8(&path(key))?,
            ],
        )?;
    }
    let user = format!("{SSH_USER_PREFIX}{}", std::process::id());
    // '*' as the password: no password logs in, yet the account is not
    // "locked" ('!'), which sshd without PAM would refuse.
    run_tool(
        "useradd",
        &[
            "--no-create-home",
            "--home-dir",
            utf8(dir.path())?,
            "--shell",
            "/bin/sh",
            "--password",
            "*",
            "--user-group",
            &user,
        ],
    )?;
    let made_privsep_dir = !Path::new(PRIVSEP_DIR).exists();
    let setup = SshdSetup {
        dir,
        user,
        made_privsep_dir,
    };
    if made_privsep_dir {
        std::fs::create_dir(PRIVSEP_DIR)?;
        std::fs::set_permissions(
            PRIVSEP_DIR,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
    }
    let path = |name: &str| setup.dir.path().join(name);
    std::fs::copy(path("client_key.pub"), path("authorized_keys"))?;
    let port = free_port(addr, guard)?;
    let host_public = std::fs::read_to_string(path("host_key.pub"))?;
    let host_public: Vec<&str> = host_public.split_whitespace().take(2).collect();
    let allow = match guard {
        Some(g) => format!("{}@{}", setup.user, g.peer),
        None => setup.user.clone(),
    };
    let config = format!(
        "Port {port}\n\
         ListenAddress {addr}\n\
         HostKey {host_key}\n\
         PidFile none\n\
         AuthorizedKeysFile {keys}\n\
         AllowUsers {allow}\n\
         PubkeyAuthentication yes\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         UsePAM no\n\
         StrictModes no\n\
         PermitRootLogin no\n\
         X11Forwarding no\n\
         AllowTcpForwarding no\n\
         PrintMotd no\n\
         PrintLastLog no\n\
         UseDNS no\n\
         MaxStartups {startups}\n\
         LogLevel INFO\n",
        host_key = path("host_key").display(),
        keys = path("authorized_keys").display(),
        // Every simulated user logs in at once: no random early drops.
        startups = max_sessions.max(10) + 16,
    );
    std::fs::write(path("sshd_config"), config)?;
    let access = SshAccess {
        user: setup.user.clone(),
        client_key: std::fs::read_to_string(path("client_key"))?,
        known_hosts: format!("[{addr}]:{port} {}", host_public.join(" ")),
        command: String::new(),
    };
    // -D: stay in the foreground (a child of this endpoint); -e: log to stderr.
    let child = Command::new(SSHD)
        .args(["-D", "-e", "-f"])
        .arg(path("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::options().append(true).open(log)?)
        .spawn()
        .map_err(|e| refused(format!("cannot start sshd: {e}")))?;
    let mut program = Program {
        child,
        port,
        what: "sshd",
        _script: None,
        sshd: Some(setup),
        stopped: false,
    };
    program.wait_listening(addr, log)?;
    Ok((program, access))
}

/// Whether `pid` is a netlab endpoint process (`netlab endpoint ...`).
fn is_endpoint(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        let mut args = cmdline.split(|&b| b == 0);
        let program = args.next().unwrap_or_default();
        String::from_utf8_lossy(program).ends_with("netlab") && args.next() == Some(b"endpoint")
    })
}

/// Removes what sshd cells of a killed netlab left behind (`netlab
/// testbed clean`): the orphaned sshd (its config lies in a `netlab-sshd`
/// directory, removed with it, and its parent is gone), every process of a
/// test user named [`SSH_USER_PREFIX`]PID whose PID no longer runs, then
/// those users. Processes are killed by PID; returns what was done, a line
/// each ("stopped orphaned sshd PID", "removed test user NAME").
pub fn remove_stale_ssh_users() -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(passwd) = std::fs::read_to_string("/etc/passwd") else {
        return removed;
    };
    // (name, uid, home): the home is the directory of keys and config.
    let stale: Vec<(String, u32, String)> = passwd
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let pid = fields.first()?.strip_prefix(SSH_USER_PREFIX)?;
            if crate::testbed::netlab_runs(pid.parse().ok()?) {
                return None;
            }
            Some((
                fields[0].to_string(),
                fields.get(2)?.parse().ok()?,
                fields.get(5)?.to_string(),
            ))
        })
        .collect();
    let mut victims = Vec::new();
    let mut dirs: Vec<std::path::PathBuf> = stale.iter().map(|(_, _, home)| home.into()).collect();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u32>().ok())
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        // Orphaned: the endpoint that started it is gone, so its parent is
        // init or whatever subreaper took it (a container's init, a CI
        // runner's), never a netlab endpoint.
        let orphaned_sshd = cmdline.contains(SSHD)
            && cmdline.contains("/netlab-sshd")
            && field("PPid:").is_some_and(|parent| !is_endpoint(parent));
        let of_stale_user =
            field("Uid:").is_some_and(|uid| stale.iter().any(|(_, u, _)| *u == uid));
        if orphaned_sshd {
            // Its key and config directory goes with it.
            if let Some(dir) = cmdline
                .split(|c: char| c == '\0' || c.is_whitespace())
                .find(|w| w.ends_with("/sshd_config"))
                .and_then(|config| Path::new(config).parent())
            {
                dirs.push(dir.to_path_buf());
            }
            removed.push(format!("stopped orphaned sshd {pid}"));
        }
        if orphaned_sshd || of_stale_user {
            victims.push(pid);
        }
    }
    kill_and_wait(&victims);
    for (name, _, _) in stale {
        if run_tool("userdel", &[&name]).is_ok() {
            removed.push(format!("removed test user {name}"));
        }
    }
    // Only netlab's own throwaway directories.
    for dir in dirs {
        if dir.starts_with(std::env::temp_dir())
            && dir
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("netlab-sshd"))
        {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ssh_client_gets_its_key_private_and_the_host_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let access = SshAccess {
            user: "netlab-ssh-1".into(),
            client_key: "KEY\n".into(),
            known_hosts: "[10.0.0.2]:5311 ssh-ed25519 AAAA".into(),
            command: "cat".into(),
        };
        let argv = access
            .argv(dir.path(), "10.0.0.2:5311".parse().unwrap())
            .unwrap();
        let mode = std::fs::metadata(dir.path().join("client_key"))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        assert_eq!(argv.last().unwrap(), "cat");
        assert!(argv.contains(&"netlab-ssh-1@10.0.0.2".to_string()));
        assert!(argv.contains(&"StrictHostKeyChecking=yes".to_string()));
        let known = std::fs::read_to_string(dir.path().join("known_hosts")).unwrap();
        assert_eq!(known, "[10.0.0.2]:5311 ssh-ed25519 AAAA\n");
    }
}

//! The servers a login-load or terminal-output cell runs against, and the
//! session dialects their clients speak: netlab's own server in one of its
//! relay designs (an endpoint process started by the launcher and driven
//! over the control channel: `LoginServe`, `Stop`), inetutils telnetd
//! started per connection by socat as inetd would, and OpenSSH's sshd with
//! a throwaway host key, a throwaway client key and a key-only test user,
//! all created here and removed when the server is dropped.
//!
//! Every server runs in the cell's placement: on 127.0.0.1, or inside the
//! server-side network namespace of a netns testbed (entered with
//! `setns(2)` between fork and exec) on that side's address.
//!
//! Invariant: everything started here is stopped by PID when the
//! [`ServerProcess`] drops (the root with `Stop` or SIGINT, then every descendant
//! noted before it, with SIGKILL), and only then are the test user, the
//! privilege-separation directory (if this created it) and the key files
//! removed.

use super::CellError;
use super::endpoints::EndpointProcess;
use super::launcher::{End, Launcher};
use crate::endpoint::login::protocol::Protocol;
use crate::endpoint::login::server::LoginServeSpec;
use crate::endpoint::login::server::Relay;
use crate::endpoint::protocol::{Command as Control, Reply};
pub use crate::record::login::{Dialect, Target};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

impl Target {
    /// netlab's design, or None for a real server.
    pub fn relay(self) -> Option<Relay> {
        match self {
            Target::Fork => Some(Relay::Fork),
            Target::Epoll => Some(Relay::Epoll),
            Target::Splice => Some(Relay::Splice),
            Target::Uring => Some(Relay::Uring),
            Target::Batch => Some(Relay::Batch),
            Target::Telnetd | Target::Sshd => None,
        }
    }

    pub fn of(relay: Relay) -> Target {
        match relay {
            Relay::Fork => Target::Fork,
            Relay::Epoll => Target::Epoll,
            Relay::Splice => Target::Splice,
            Relay::Uring => Target::Uring,
            Relay::Batch => Target::Batch,
        }
    }

    /// Whether this server speaks `dialect`, and if not, why.
    pub fn speaks(self, dialect: Dialect) -> Result<(), String> {
        match (self, dialect) {
            (Target::Sshd, Dialect::Ssh) => Ok(()),
            (Target::Sshd, other) => Err(format!(
                "sshd speaks SSH only, not {}; its cells use --protocol ssh",
                other.name()
            )),
            (_, Dialect::Ssh) => Err(format!(
                "{} does not speak SSH; OpenSSH does (--relay sshd)",
                self.name()
            )),
            (Target::Telnetd, Dialect::Rlogin) => {
                Err("telnetd speaks TELNET only; use --protocol telnet".into())
            }
            _ => Ok(()),
        }
    }
}

impl Target {
    /// The dialect a cell of this server speaks when `asked` is asked:
    /// sshd's cells speak SSH whatever else is asked.
    pub fn dialect_for(self, asked: Dialect) -> Dialect {
        if self == Target::Sshd {
            Dialect::Ssh
        } else {
            asked
        }
    }
}

impl Dialect {
    /// The protocol netlab's server speaks for this dialect (None for SSH).
    pub fn protocol(self) -> Option<Protocol> {
        match self {
            Dialect::Telnet | Dialect::TelnetLinemode => Some(Protocol::Telnet),
            Dialect::Rlogin => Some(Protocol::Rlogin),
            Dialect::Ssh => None,
        }
    }
}

/// Where a server runs: this process's own network namespace on 127.0.0.1,
/// or a testbed namespace on that side's address.
#[derive(Debug, Clone)]
pub struct Site {
    /// Places the serving end (and starts netlab's own server there).
    launcher: Launcher,
}

impl Site {
    /// The serving end of a cell the launcher places.
    pub fn serving_end(launcher: &Launcher) -> Site {
        Site {
            launcher: launcher.clone(),
        }
    }

    /// The address the server listens on.
    fn addr(&self) -> Result<Ipv4Addr, CellError> {
        // The servers and their /proc probes are IPv4 only; loopback and
        // netns sites are IPv4 (agents are not yet taken for login and output).
        match self.launcher.address(End::To) {
            IpAddr::V4(v4) => Ok(v4),
            IpAddr::V6(v6) => Err(CellError::Refused(format!(
                "login servers listen on IPv4 only, not {v6}"
            ))),
        }
    }

    /// Makes `command` start inside this site's namespace.
    fn enter(&self, command: &mut Command) -> Result<(), CellError> {
        if let Some(path) = &self.launcher.netns(End::To) {
            let ns = std::fs::File::open(path).map_err(|e| {
                CellError::io(format!("cannot open namespace {}", path.display()), e)
            })?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&ns);
            // SAFETY: setns is async-signal-safe; `ns` outlives the spawn
            // (the closure owns it) and the descriptor is only read.
            unsafe {
                command.pre_exec(move || {
                    let _keep = &ns;
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        Ok(())
    }
}

/// Enters the network namespace at `path` on the calling thread only (a
/// thread of its own that opens the clients of a netns cell).
pub fn enter_on_this_thread(path: &Path) -> std::io::Result<()> {
    let ns = std::fs::File::open(path)?;
    // SAFETY: a valid namespace descriptor; only this thread moves.
    if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&ns), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The process at the root of a server's tree.
enum Root {
    /// netlab's own design, an endpoint driven over the control channel.
    Endpoint(EndpointProcess),
    /// A real server's program (socat running telnetd, sshd).
    Program(Child),
}

/// A running server; stopped, with everything it needed, on drop.
pub struct ServerProcess {
    root: Root,
    log: tempfile::NamedTempFile,
    pub addr: SocketAddrV4,
    /// A file the server runs (telnetd's command), removed with the server.
    _script: Option<tempfile::TempPath>,
    sshd: Option<SshdSetup>,
}

impl ServerProcess {
    /// The root process (the server, socat or sshd): its tree holds every
    /// session and command of the cell.
    pub fn pid(&self) -> u32 {
        match &self.root {
            Root::Endpoint(endpoint) => endpoint.pid(),
            Root::Program(child) => child.id(),
        }
    }

    /// The arguments of an OpenSSH client session to this server running
    /// `command` on a pty (sshd only).
    pub fn ssh_argv(&self, command: &str) -> Option<Vec<String>> {
        let setup = self.sshd.as_ref()?;
        let dir = setup.dir.path();
        let mut argv: Vec<String> = ["ssh", "-F", "/dev/null", "-tt", "-i"]
            .map(String::from)
            .to_vec();
        argv.push(dir.join("client_key").display().to_string());
        argv.extend(["-p".to_string(), self.addr.port().to_string()]);
        for option in [
            "BatchMode=yes".to_string(),
            "IdentitiesOnly=yes".to_string(),
            "StrictHostKeyChecking=yes".to_string(),
            format!("UserKnownHostsFile={}", dir.join("known_hosts").display()),
            "GlobalKnownHostsFile=/dev/null".to_string(),
            "LogLevel=ERROR".to_string(),
        ] {
            argv.extend(["-o".to_string(), option]);
        }
        argv.push(format!("{}@{}", setup.user, self.addr.ip()));
        argv.push(command.to_string());
        Some(argv)
    }

    /// A directory the server's sessions can read (sshd's user is not
    /// root): files a command needs are copied here.
    pub fn readable_dir(&self) -> Option<&Path> {
        self.sshd.as_ref().map(|s| s.dir.path())
    }

    /// Why sessions ended early, from the server's log: each distinct
    /// reason with how many sessions it ended.
    pub fn session_endings(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for line in text.lines() {
            if let Some((_, why)) = line.split_once("session ended: ") {
                let why = why.split(" (").next().unwrap_or(why).to_string();
                *counts.entry(why).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .map(|(why, n)| format!("{n} x {why}"))
            .collect()
    }

    /// The server's log so far (for errors).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    fn stop_root(&mut self) {
        match &mut self.root {
            Root::Endpoint(endpoint) => {
                // It ends every session before it answers; dropping it after
                // kills it if it did not.
                endpoint.wait_through_interrupt();
                if endpoint.send(&Control::Stop).is_ok() {
                    let _ = endpoint.recv(Some(Duration::from_secs(10)), "stopping", &mut |_| {});
                }
                endpoint.finish();
            }
            Root::Program(child) => {
                if let Ok(None) = child.try_wait() {
                    // SAFETY: signalling our own child by PID.
                    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
                    let deadline = Instant::now() + Duration::from_secs(5);
                    while Instant::now() < deadline {
                        if let Ok(Some(_)) = child.try_wait() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // socat and sshd leave their per-connection children running when
        // they stop: note every descendant now and kill what is left, by
        // PID, after.
        let descendants = descendants(self.pid());
        self.stop_root();
        for &pid in &descendants {
            // SAFETY: a process this cell started (directly or through its server).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        // The test user can only be removed once its processes are gone.
        let deadline = Instant::now() + Duration::from_secs(5);
        while descendants
            .iter()
            .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(self.sshd.take());
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

fn wait_listening(server: &mut ServerProcess, what: &str) -> Result<(), CellError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !listening(server.pid(), *server.addr.ip(), server.addr.port()) {
        if let Root::Program(child) = &mut server.root
            && let Ok(Some(status)) = child.try_wait()
        {
            refuse!(
                "{what} exited ({status}) before it listened: {}",
                server.log_text().trim()
            );
        }
        if Instant::now() > deadline {
            refuse!("{what} never listened on {}", server.addr);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A port free in the site's namespace: a fresh testbed namespace has every
/// port free; on loopback the kernel picks one.
fn free_port(site: &Site) -> Result<u16, CellError> {
    if site.launcher.netns(End::To).is_some() {
        return Ok(2323);
    }
    Ok(std::net::TcpListener::bind((site.addr()?, 0))?
        .local_addr()?
        .port())
}

/// How a server is started.
#[derive(Debug, Clone)]
pub struct ServerSpec<'a> {
    pub target: Target,
    pub dialect: Dialect,
    /// The shell command each session runs (for sshd the client names
    /// it: see [`ServerProcess::ssh_argv`]).
    pub command: &'a str,
    /// Most sessions at once.
    pub max_sessions: usize,
    /// TCP_NODELAY on netlab's sessions (telnetd cannot; sshd sets it on
    /// interactive sessions itself).
    pub nodelay: bool,
}

/// Starts the server `spec` names in `site`.
pub fn start(spec: &ServerSpec, site: &Site) -> Result<ServerProcess, CellError> {
    let ServerSpec {
        target,
        dialect,
        command,
        max_sessions,
        nodelay,
    } = *spec;
    target.speaks(dialect).map_err(CellError::Refused)?;
    match target.relay() {
        Some(relay) => start_netlab(relay, dialect, command, max_sessions, nodelay, site),
        None if target == Target::Telnetd => start_telnetd(dialect, command, site),
        None => start_sshd(max_sessions, site),
    }
}

fn start_netlab(
    relay: Relay,
    dialect: Dialect,
    command: &str,
    max_sessions: usize,
    nodelay: bool,
    site: &Site,
) -> Result<ServerProcess, CellError> {
    let protocol = dialect.protocol().expect("checked by speaks");
    let log = tempfile::NamedTempFile::new()?;
    let mut endpoint = site
        .launcher
        .spawn_logged("login server", End::To, log.reopen()?)?;
    endpoint.send(&Control::LoginServe(LoginServeSpec {
        bind: SocketAddr::from((site.addr()?, 0)),
        relay,
        protocol: protocol.name().to_string(),
        linemode: dialect.linemode(),
        nodelay,
        max_sessions,
        idle_timeout_s: 3600,
        command: ["sh", "-c", command].map(String::from).to_vec(),
    }))?;
    let port = match endpoint.recv(Some(Duration::from_secs(10)), "starting", &mut |_| {})? {
        Reply::LoginServing { port } => port,
        other => return Err(endpoint.unexpected("starting", &other).into()),
    };
    Ok(ServerProcess {
        root: Root::Endpoint(endpoint),
        log,
        addr: SocketAddrV4::new(site.addr()?, port),
        _script: None,
        sshd: None,
    })
}

/// inetutils telnetd behind socat, running `command` through a script
/// (telnetd's -E takes one word). For LINEMODE, telnetd's `-l` offers it.
fn start_telnetd(dialect: Dialect, command: &str, site: &Site) -> Result<ServerProcess, CellError> {
    const TELNETD: &str = "/usr/sbin/telnetd";
    if !Path::new(TELNETD).exists() {
        refuse!("{TELNETD} is missing (apt-get install inetutils-telnetd)");
    }
    let log = tempfile::NamedTempFile::new()?;
    let script = tempfile::Builder::new()
        .prefix("netlab-telnetd-command")
        .tempfile()?;
    std::fs::write(script.path(), format!("#!/bin/sh\n{command}\n"))?;
    std::fs::set_permissions(
        script.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let script = script.into_temp_path();
    let port = free_port(site)?;
    let linemode = if dialect.linemode() { " -l" } else { "" };
    let mut cmd = Command::new("socat");
    cmd.arg(format!(
        "TCP-LISTEN:{port},bind={},reuseaddr,fork,backlog=1024",
        site.addr()?
    ))
    .arg(format!(
        "EXEC:{TELNETD} -h{linemode} -E {},nofork",
        script.display()
    ))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(log.reopen()?);
    site.enter(&mut cmd)?;
    let child = cmd
        .spawn()
        .map_err(|e| CellError::io("cannot start socat for telnetd (apt-get install socat)", e))?;
    let mut server = ServerProcess {
        root: Root::Program(child),
        log,
        addr: SocketAddrV4::new(site.addr()?, port),
        _script: Some(script),
        sshd: None,
    };
    wait_listening(&mut server, "socat (for telnetd)")?;
    Ok(server)
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
        let removed = Command::new("userdel")
            .arg(&self.user)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        if let Ok(out) = removed
            && !out.status.success()
        {
            eprintln!(
                "warning: could not remove the test user {}: {}",
                self.user,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if self.made_privsep_dir {
            let _ = std::fs::remove_dir(PRIVSEP_DIR);
        }
    }
}

const SSHD: &str = "/usr/sbin/sshd";
const PRIVSEP_DIR: &str = "/run/sshd";
/// Test users are named this, then this process's PID.
pub const SSH_USER_PREFIX: &str = "netlab-ssh-";

fn run_tool(program: &str, args: &[&str]) -> Result<(), CellError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CellError::io(format!("cannot run {program}"), e))?;
    if !out.status.success() {
        refuse!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// OpenSSH's sshd on a throwaway ed25519 host key, public-key
/// authentication only, for one test user whose only key is a throwaway
/// client key; no PAM, no password, no forwarding, no MOTD.
fn start_sshd(max_sessions: usize, site: &Site) -> Result<ServerProcess, CellError> {
    if !Path::new(SSHD).exists() {
        refuse!("{SSHD} is missing (apt-get install openssh-server)");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        refuse!("sshd cells need root: netlab creates and removes a test user for them");
    }
    let dir = tempfile::Builder::new().prefix("netlab-sshd").tempdir()?;
    let path = |name: &str| dir.path().join(name);
    // The test user's home: readable by it (sshd drops to the user to read
    // authorized_keys, and the session's command reads files copied here).
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
                path(key)
                    .to_str()
                    .ok_or_else(|| CellError::Refused("a temporary path is not UTF-8".into()))?,
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
            dir.path()
                .to_str()
                .ok_or_else(|| CellError::Refused("a temporary path is not UTF-8".into()))?,
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
    let port = free_port(site)?;
    let host_public = std::fs::read_to_string(path("host_key.pub"))?;
    let host_public: Vec<&str> = host_public.split_whitespace().take(2).collect();
    std::fs::write(
        path("known_hosts"),
        format!("[{}]:{port} {}\n", site.addr()?, host_public.join(" ")),
    )?;
    let config = format!(
        "Port {port}\n\
         ListenAddress {addr}\n\
         HostKey {host_key}\n\
         PidFile none\n\
         AuthorizedKeysFile {keys}\n\
         AllowUsers {user}\n\
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
        addr = site.addr()?,
        host_key = path("host_key").display(),
        keys = path("authorized_keys").display(),
        user = setup.user,
        // Every simulated user logs in at once: no random early drops.
        startups = max_sessions.max(10) + 16,
    );
    std::fs::write(path("sshd_config"), config)?;
    let log = tempfile::NamedTempFile::new()?;
    let mut cmd = Command::new(SSHD);
    // -D: stay in the foreground (a child of netlab); -e: log to stderr.
    cmd.args(["-D", "-e", "-f"])
        .arg(path("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen()?);
    site.enter(&mut cmd)?;
    let child = cmd
        .spawn()
        .map_err(|e| CellError::io("cannot start sshd", e))?;
    let mut server = ServerProcess {
        root: Root::Program(child),
        log,
        addr: SocketAddrV4::new(site.addr()?, port),
        _script: None,
        sshd: Some(setup),
    };
    wait_listening(&mut server, "sshd")?;
    Ok(server)
}

/// Removes what sshd cells of a killed netlab left behind (`netlab
/// testbed clean`): the orphaned sshd (its config lies in a `netlab-sshd`
/// directory, removed with it, and its parent is gone), every process of a
/// test user named
/// [`SSH_USER_PREFIX`]PID whose PID no longer runs, then those users.
/// Processes are killed by PID; returns what was done, a line each
/// ("stopped orphaned sshd PID", "removed test user NAME").
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
            if pid.parse::<u32>().is_err() || Path::new(&format!("/proc/{pid}")).exists() {
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
        let orphaned_sshd =
            cmdline.contains(SSHD) && cmdline.contains("/netlab-sshd") && field("PPid:") == Some(1);
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
        }
        if orphaned_sshd {
            removed.push(format!("stopped orphaned sshd {pid}"));
        }
        if orphaned_sshd || of_stale_user {
            victims.push(pid);
        }
    }
    for &pid in &victims {
        // SAFETY: a process of netlab's own sshd or test user, by PID.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while victims
        .iter()
        .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
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
    fn servers_speak_their_own_dialects_only() {
        assert!(Target::Epoll.speaks(Dialect::Rlogin).is_ok());
        assert!(Target::Epoll.speaks(Dialect::TelnetLinemode).is_ok());
        assert!(Target::Telnetd.speaks(Dialect::Telnet).is_ok());
        assert!(Target::Telnetd.speaks(Dialect::Rlogin).is_err());
        assert!(Target::Sshd.speaks(Dialect::Ssh).is_ok());
        assert!(Target::Sshd.speaks(Dialect::Telnet).is_err());
        assert!(Target::Fork.speaks(Dialect::Ssh).is_err());
    }

    #[test]
    fn dialect_names_round_trip_through_serde() {
        for d in [
            Dialect::Telnet,
            Dialect::TelnetLinemode,
            Dialect::Rlogin,
            Dialect::Ssh,
        ] {
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{}\"", d.name()));
        }
    }
}

//! `netlab login serve`: a TELNET server on ptys. So far one relay design,
//! `fork`: a process per session blocking in poll over socket and pty, as
//! the classic telnetd/rlogind were (the `epoll`, `splice` and `uring`
//! designs and rlogin are still to come, see the issue).

use super::Output;
use crate::endpoint::login::relay_poll::telnet_session;
use crate::experiment::endpoints::interrupted;
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::process::Child;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct LoginArgs {
    #[command(subcommand)]
    pub command: LoginCommand,
}

#[derive(Debug, Subcommand)]
pub enum LoginCommand {
    /// Serve TELNET sessions, each running a command on its own pty.
    Serve(ServeArgs),
    /// Internal: one session on the socket inherited as fd 3.
    #[command(hide = true)]
    Session {
        #[arg(long)]
        linemode: bool,
        #[arg(long)]
        idle_s: u64,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Protocol (rlogin is not built yet).
    #[arg(long, default_value = "telnet", value_parser = ["telnet"])]
    pub protocol: String,
    /// Relay design (the others are not built yet).
    #[arg(long, default_value = "fork", value_parser = ["fork"])]
    pub relay: String,
    /// Port; 0 picks a free one and prints it.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to bind; anything but loopback needs --allow-remote.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Allow a non-loopback bind (TELNET is unencrypted and the command runs as this user).
    #[arg(long)]
    pub allow_remote: bool,
    /// Ask clients for LINEMODE (they edit and echo lines locally).
    #[arg(long)]
    pub linemode: bool,
    /// Most sessions at once; more are refused.
    #[arg(long, default_value_t = 256)]
    pub max_sessions: usize,
    /// Close sessions without input for this many seconds.
    #[arg(long, default_value_t = 300)]
    pub idle_timeout: u64,
    /// The command each session runs (default `cat`, not a shell).
    #[arg(long, num_args = 1.., default_values = ["cat"])]
    pub command: Vec<String>,
}

pub fn run(args: LoginArgs, out: &mut Output) -> anyhow::Result<()> {
    match args.command {
        LoginCommand::Serve(serve_args) => serve(serve_args, out),
        LoginCommand::Session {
            linemode,
            idle_s,
            command,
        } => {
            // SAFETY: fd 3 is the socket the server passed us, and only we own it.
            let socket = unsafe { TcpStream::from_raw_fd(3) };
            let report = telnet_session(socket, &command, linemode, Duration::from_secs(idle_s))?;
            eprintln!(
                "netlab login session {}: ended: {} ({} bytes in, {} out)",
                std::process::id(),
                report.ended,
                report.bytes_from_client,
                report.bytes_to_client
            );
            Ok(())
        }
    }
}

fn serve(args: ServeArgs, out: &mut Output) -> anyhow::Result<()> {
    if !args.bind.is_loopback() {
        if !args.allow_remote {
            bail!(
                "refusing to bind {} (not loopback) without --allow-remote: TELNET carries no encryption and the command runs as this user",
                args.bind
            );
        }
        eprintln!(
            "netlab login serve: warning: serving unencrypted TELNET on {}",
            args.bind
        );
    }
    let listener = TcpListener::bind(SocketAddr::new(args.bind, args.port))
        .with_context(|| format!("cannot bind {}:{}", args.bind, args.port))?;
    listener.set_nonblocking(true)?;
    out.text(&format!("{}\n", listener.local_addr()?.port()))?;
    let exe = std::env::current_exe()?;
    let mut sessions: Vec<Child> = Vec::new();
    while !interrupted() {
        sessions.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        let (socket, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut pfd = libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, 100) };
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if sessions.len() >= args.max_sessions {
            eprintln!(
                "netlab login serve: {peer}: refused, {} sessions already",
                sessions.len()
            );
            continue;
        }
        socket.set_nonblocking(false)?;
        let fd = socket.as_raw_fd();
        let mut command = std::process::Command::new(&exe);
        command
            .args([
                "login",
                "session",
                "--idle-s",
                &args.idle_timeout.to_string(),
            ])
            .args(args.linemode.then_some("--linemode"))
            .arg("--")
            .args(&args.command);
        // SAFETY: async-signal-safe calls only, between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        match command.spawn() {
            Ok(child) => sessions.push(child),
            Err(e) => eprintln!("netlab login serve: {peer}: cannot start a session: {e}"),
        }
        drop(socket);
    }
    // Stop every session we started, by PID, and reap them.
    for mut child in sessions {
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(())
}

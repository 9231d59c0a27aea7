//! The programs that run at each end of an experiment.
//!
//! The binary re-executes itself as `netlab endpoint` (a hidden subcommand):
//! it reads [`protocol::Command`]s framed by [`crate::wire::control`] on
//! stdin and answers with [`protocol::Reply`]s on stdout; diagnostics go to
//! stderr. One endpoint process serves one role for one run, so its rusage is
//! that role's alone. The same loop will serve a namespace (started with
//! `ip netns exec`) and a remote agent (over TCP instead of a pipe).

pub mod agent;
pub mod guard;
pub mod login;
pub mod pattern;
pub mod pin;
pub mod protocol;
pub mod rpc;

use crate::experiments::cksum::role as cksum;
use crate::experiments::stream::{role as stream, udp};
use crate::wire::control::{FrameReader, write_frame};
use protocol::{Command, Reply};
use std::io::{Read, Write};

/// What the endpoint holds between set-up and `Go` (or `Stop`).
enum State {
    Idle,
    Receiver(stream::Receiver),
    Sender(stream::Sender),
    UdpReceiver(udp::UdpReceiver),
    UdpSender(udp::UdpSender),
    Emulator(crate::testbed::emulator::Emulator),
    Capture(crate::testbed::capture::Capture),
    RpcServer(rpc::server::Running),
    LoginHost(Box<login::host::Host>),
}

/// Serves commands from `input`, replying on `output`, until `Exit` or end
/// of input. Errors of the data path are replied as `Failed`; only a broken
/// control channel is returned as an error.
pub fn serve<R: Read, W: Write>(input: R, mut output: W) -> std::io::Result<()> {
    let mut reader = FrameReader::new(input);
    write_frame(
        &mut output,
        &Reply::Ready {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
    )?;
    let mut state = State::Idle;
    while let Some(command) = reader.next_message::<Command>()? {
        let reply = match (command, std::mem::replace(&mut state, State::Idle)) {
            (Command::Exit, _) => break,
            (Command::StreamReceive(spec), _) if spec.udp => {
                let bind = spec.bind;
                match udp::UdpReceiver::bind(spec) {
                    Ok(receiver) => {
                        let addr = receiver.local_addr()?;
                        state = State::UdpReceiver(receiver);
                        Reply::Listening { addr }
                    }
                    Err(e) => failed(format_args!("binding UDP {bind}: {e}")),
                }
            }
            (Command::StreamSend(spec), _) if spec.udp.is_some() => {
                let pace = spec.udp.expect("checked");
                let to = spec.connect;
                match udp::UdpSender::connect(spec, pace) {
                    Ok(sender) => {
                        let local = sender.local_addr()?;
                        state = State::UdpSender(sender);
                        Reply::Connected { local }
                    }
                    Err(e) => failed(format_args!("UDP socket to {to}: {e}")),
                }
            }
            (Command::StreamReceive(spec), _) => match stream::Receiver::listen(spec) {
                Ok(receiver) => {
                    let addr = receiver.local_addr()?;
                    state = State::Receiver(receiver);
                    Reply::Listening { addr }
                }
                Err(e) => failed(e),
            },
            (Command::StreamSend(spec), _) => match stream::Sender::connect(spec) {
                Ok(sender) => {
                    let local = sender.local_addr()?;
                    state = State::Sender(sender);
                    Reply::Connected { local }
                }
                Err(e) => failed(e),
            },
            (Command::Go, State::Receiver(receiver)) => {
                let mut progress_error = None;
                let result = receiver.run(&mut |bytes| {
                    if let Err(e) = write_frame(&mut output, &Reply::Progress { bytes }) {
                        progress_error.get_or_insert(e);
                    }
                });
                if let Some(e) = progress_error {
                    return Err(e);
                }
                result.map_or_else(failed, |r| Reply::Done(Box::new(r)))
            }
            (Command::Go, State::UdpReceiver(receiver)) => receiver.run().map_or_else(
                |e| failed(format_args!("receiving UDP: {e}")),
                |r| Reply::Done(Box::new(r)),
            ),
            (Command::Go, State::UdpSender(sender)) => sender.run().map_or_else(
                |e| failed(format_args!("sending UDP: {e}")),
                |r| Reply::Done(Box::new(r)),
            ),
            (Command::Go, State::Sender(sender)) => {
                fault_injection_point();
                let mut interval_error = None;
                let result = sender.run(&mut |sample| {
                    if let Err(e) = write_frame(&mut output, &Reply::Interval(sample.clone())) {
                        interval_error.get_or_insert(e);
                    }
                });
                if let Some(e) = interval_error {
                    return Err(e);
                }
                result.map_or_else(failed, |r| Reply::Done(Box::new(r)))
            }
            (Command::Emulate(spec), _) => match crate::testbed::emulator::Emulator::start(spec) {
                Ok(emulator) => {
                    state = State::Emulator(emulator);
                    Reply::Emulating
                }
                Err(e) => failed(format_args!("starting the wire emulator: {e}")),
            },
            (Command::Capture(spec), _) => {
                let interface = spec.interface.clone();
                match crate::testbed::capture::Capture::start(spec) {
                    Ok(capture) => {
                        state = State::Capture(capture);
                        Reply::Capturing
                    }
                    Err(e) => failed(format_args!("capturing on {interface}: {e}")),
                }
            }
            (
                Command::RpcServe {
                    bind,
                    options,
                    guard,
                },
                _,
            ) => {
                match rpc::server::Server::bind_guarded(bind, options, guard)
                    .and_then(|s| s.start())
                {
                    Ok(running) => {
                        let port = running.port();
                        state = State::RpcServer(running);
                        Reply::RpcServing { port }
                    }
                    Err(e) => failed(format_args!("RPC server on {bind}: {e}")),
                }
            }
            (Command::HostServe(spec), _) => {
                let target = spec.target.name();
                match login::host::Host::start(spec) {
                    Ok((host, serving)) => {
                        state = State::LoginHost(Box::new(host));
                        Reply::HostServing(Box::new(serving))
                    }
                    Err(e) => failed(format_args!("starting {target}: {e}")),
                }
            }
            (Command::WindowOpen, State::LoginHost(mut host)) => {
                let reply = host
                    .open_window()
                    .map_or_else(failed, |()| Reply::WindowOpened);
                state = State::LoginHost(host);
                reply
            }
            (Command::WindowClose, State::LoginHost(mut host)) => {
                let reply = host
                    .close_window()
                    .map_or_else(failed, |w| Reply::HostWindow(Box::new(w)));
                state = State::LoginHost(host);
                reply
            }
            (Command::Type(spec), _) => {
                let mut edge = |open, awaits| window_edge(&mut reader, &mut output, open, awaits);
                login::clients::type_load(&spec, &mut edge)
                    .map_or_else(failed, |r| Reply::Typed(Box::new(r)))
            }
            (Command::Terminal(spec), _) => {
                let mut edge = |open, awaits| window_edge(&mut reader, &mut output, open, awaits);
                login::clients::terminal(&spec, &mut edge)
                    .map_or_else(failed, |r| Reply::TerminalDone(Box::new(r)))
            }
            (Command::Cksum(spec), _) => Reply::CksumDone(Box::new(cksum::measure(&spec))),
            (Command::RpcClient(spec), _) => {
                rpc::run_client(&spec).map_or_else(failed, |r| Reply::RpcClientDone(Box::new(r)))
            }
            (Command::Stop, State::RpcServer(running)) => {
                Reply::RpcServerDone(Box::new(running.stop()))
            }
            (Command::Stop, State::LoginHost(host)) => host
                .stop()
                .map_or_else(failed, |r| Reply::HostDone(Box::new(r))),
            (Command::Stop, State::Emulator(emulator)) => emulator
                .stop()
                .map_or_else(failed, |r| Reply::EmulatorDone(Box::new(r))),
            (Command::Stop, State::Capture(capture)) => capture
                .stop()
                .map_or_else(failed, |r| Reply::CaptureDone(Box::new(r))),
            (Command::Stop, _) => Reply::Failed {
                message: "Stop with nothing running".into(),
            },
            (Command::Go, _) => Reply::Failed {
                message: "Go before any set-up command".into(),
            },
            (Command::WindowOpen | Command::WindowClose, _) => Reply::Failed {
                message: "a window with no server running".into(),
            },
            (Command::Proceed, _) => Reply::Failed {
                message: "Proceed with no window edge waiting".into(),
            },
        };
        write_frame(&mut output, &reply)?;
    }
    Ok(())
}

/// Tells the controller a window edge came; when `awaits`, waits for its
/// `Proceed` (the controller samples the serving host meanwhile).
fn window_edge<R: Read, W: Write>(
    reader: &mut FrameReader<R>,
    output: &mut W,
    open: bool,
    awaits: bool,
) -> std::io::Result<()> {
    write_frame(output, &Reply::Window { open, awaits })?;
    if !awaits {
        return Ok(());
    }
    match reader.next_message::<Command>()? {
        Some(Command::Proceed) => Ok(()),
        Some(other) => Err(std::io::Error::other(format!(
            "expected Proceed at the window's edge, got {other:?}"
        ))),
        None => Err(std::io::Error::other("the controller left mid-window")),
    }
}

fn failed(error: impl std::fmt::Display) -> Reply {
    Reply::Failed {
        message: error.to_string(),
    }
}

/// Test hook: `NETLAB_FAULT=sender-abort` makes a sender die by SIGABRT as it
/// starts, so tests can check how the controller handles an endpoint that
/// dies mid-run. Documented in docs/ARCHITECTURE.md; never set in normal use.
fn fault_injection_point() {
    if std::env::var("NETLAB_FAULT").as_deref() == Ok("sender-abort") {
        std::process::abort();
    }
}

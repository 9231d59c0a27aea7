//! Pseudo-terminals: the device a remote-login server puts between the
//! network and the command it runs (`posix_openpt`, the slave made the
//! child's controlling terminal in a new session).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// A command running on a pty; the master side is ours.
pub struct Pty {
    pub master: OwnedFd,
    pub child: Child,
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Sets the terminal size the child sees (TIOCSWINSZ; the kernel sends it SIGWINCH).
pub fn set_window(master: &OwnedFd, rows: u16, cols: u16) -> io::Result<()> {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize.
    check(unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) })?;
    Ok(())
}

/// Turns the terminal's echo on or off (LINEMODE sessions echo at the client).
pub fn set_echo(master: &OwnedFd, echo: bool) -> io::Result<()> {
    // SAFETY: termios is plain data; tcgetattr fills it.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    check(unsafe { libc::tcgetattr(master.as_raw_fd(), &mut t) })?;
    if echo {
        t.c_lflag |= libc::ECHO;
    } else {
        t.c_lflag &= !libc::ECHO;
    }
    // SAFETY: t came from tcgetattr.
    check(unsafe { libc::tcsetattr(master.as_raw_fd(), libc::TCSANOW, &t) })?;
    Ok(())
}

/// Sets the line speed the child sees (`stty speed`): rlogin's startup
/// names the client terminal's speed. Speeds termios cannot express are
/// rounded down to the nearest one it can.
pub fn set_speed(master: &OwnedFd, bits_per_second: u32) -> io::Result<()> {
    const SPEEDS: [(u32, libc::speed_t); 16] = [
        (50, libc::B50),
        (75, libc::B75),
        (110, libc::B110),
        (134, libc::B134),
        (150, libc::B150),
        (200, libc::B200),
        (300, libc::B300),
        (600, libc::B600),
        (1200, libc::B1200),
        (2400, libc::B2400),
        (4800, libc::B4800),
        (9600, libc::B9600),
        (19200, libc::B19200),
        (38400, libc::B38400),
        (57600, libc::B57600),
        (115200, libc::B115200),
    ];
    let speed = SPEEDS
        .iter()
        .rev()
        .find(|(bps, _)| *bps <= bits_per_second)
        .map_or(libc::B50, |(_, s)| *s);
    // SAFETY: termios is plain data; tcgetattr fills it.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    check(unsafe { libc::tcgetattr(master.as_raw_fd(), &mut t) })?;
    // SAFETY: t came from tcgetattr.
    unsafe {
        libc::cfsetispeed(&mut t, speed);
        libc::cfsetospeed(&mut t, speed);
    }
    check(unsafe { libc::tcsetattr(master.as_raw_fd(), libc::TCSANOW, &t) })?;
    Ok(())
}

/// Opens a pty of `rows` x `cols` and runs `command` on it.
pub fn spawn(command: &[String], rows: u16, cols: u16) -> io::Result<Pty> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| io::Error::other("empty command"))?;
    // SAFETY: posix_openpt returns a new descriptor or -1.
    let master =
        check(unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) })?;
    // SAFETY: the descriptor is ours.
    let master = unsafe { OwnedFd::from_raw_fd(master) };
    // SAFETY: grantpt/unlockpt/ptsname_r on a valid master.
    check(unsafe { libc::grantpt(master.as_raw_fd()) })?;
    check(unsafe { libc::unlockpt(master.as_raw_fd()) })?;
    let mut name = [0 as libc::c_char; 128];
    let rc = unsafe { libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: ptsname_r wrote a NUL-terminated path.
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    set_window(&master, rows, cols)?;
    let slave = File::options().read(true).write(true).open(&path)?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave))
        .env(
            "TERM",
            std::env::var("TERM").unwrap_or_else(|_| "vt100".into()),
        );
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            // stdin is the slave now: make it the controlling terminal.
            if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = crate::measure::stop::default_sigint(&mut cmd).spawn()?;
    Ok(Pty { master, child })
}

impl Drop for Pty {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    fn read_until(master: &OwnedFd, needle: &str) -> String {
        let mut file = File::from(master.try_clone().unwrap());
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while Instant::now() < deadline {
            let mut pfd = libc::pollfd {
                fd: master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 100) } > 0 {
                match file.read(&mut buf) {
                    Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                    _ => break,
                }
            }
            if String::from_utf8_lossy(&got).contains(needle) {
                break;
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    #[test]
    fn cat_on_a_pty_echoes_and_repeats() {
        let pty = spawn(&["cat".into()], 24, 80).unwrap();
        let mut w = File::from(pty.master.try_clone().unwrap());
        w.write_all(b"hello\n").unwrap();
        // The terminal echoes the line, then cat writes it back.
        let out = read_until(&pty.master, "hello\r\nhello\r\n");
        assert!(out.contains("hello\r\nhello\r\n"), "{out:?}");
    }

    #[test]
    fn a_typed_ctrl_c_interrupts_the_command_though_its_endpoint_ignores_sigint() {
        // As an endpoint does, for the moment of the spawn: the command
        // would inherit the ignored SIGINT without `default_sigint`.
        // SAFETY: swapping one signal's disposition and restoring it.
        let before = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
        let spawned = spawn(&["cat".into()], 24, 80);
        unsafe { libc::signal(libc::SIGINT, before) };
        let mut pty = spawned.unwrap();
        File::from(pty.master.try_clone().unwrap())
            .write_all(b"\x03")
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(status) = pty.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "cat ignored the typed ^C");
            std::thread::sleep(Duration::from_millis(20));
        };
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    }

    #[test]
    fn the_child_sees_the_window_size_and_echo_can_be_turned_off() {
        let pty = spawn(
            &["sh".into(), "-c".into(), "stty size; sleep 5".into()],
            40,
            100,
        )
        .unwrap();
        let out = read_until(&pty.master, "40 100");
        assert!(out.contains("40 100"), "{out:?}");
        set_window(&pty.master, 50, 132).unwrap();
        set_echo(&pty.master, false).unwrap();
        let child = spawn(&["cat".into()], 24, 80).unwrap();
        set_echo(&child.master, false).unwrap();
        File::from(child.master.try_clone().unwrap())
            .write_all(b"x\n")
            .unwrap();
        let out = read_until(&child.master, "x\r\n");
        assert_eq!(
            out.matches('x').count(),
            1,
            "no echo, only cat's copy: {out:?}"
        );
    }
}

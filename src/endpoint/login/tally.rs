//! Pty transfers counted across every process of a server: a read from or
//! a write into a pty master (or a splice out of it) that moved bytes, the
//! unit the 1989 login model charges (`model::sunos35`). The count lives
//! in one shared page (a memfd): the serving process maps it when a netlab
//! server starts, the fork design hands it to each session process as a
//! descriptor, and the serving end reads it at a window's two edges.
//!
//! Invariant: counting is one relaxed atomic add, and a process that has
//! no page counts nothing (a session started by hand, a test).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// This process's counter and the descriptor of its page.
struct Page {
    counter: &'static AtomicU64,
    fd: OwnedFd,
}

static PAGE: OnceLock<Page> = OnceLock::new();

/// Maps `fd`'s first 8 bytes, shared, as a counter.
fn map(fd: OwnedFd) -> io::Result<Page> {
    // SAFETY: a shared mapping of 8 bytes of a file we hold open; it is
    // never unmapped (the counter lives as long as the process), and
    // every process touches it only through atomic operations.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            8,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: page-aligned, 8 bytes, valid for the process's life (above).
    let counter = unsafe { &*(address as *const AtomicU64) };
    Ok(Page { counter, fd })
}

/// Makes this process's page if it has none: a serving process calls it
/// before its server starts.
pub fn share() -> io::Result<()> {
    if PAGE.get().is_some() {
        return Ok(());
    }
    let fd = nix::sys::memfd::memfd_create(
        c"netlab-pty-transfers",
        nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
    )?;
    nix::unistd::ftruncate(&fd, 8)?;
    let page = map(fd)?;
    let _ = PAGE.set(page);
    Ok(())
}

/// The page's descriptor, to hand to a session process.
pub fn descriptor() -> Option<BorrowedFd<'static>> {
    PAGE.get().map(|p| {
        use std::os::fd::AsFd;
        p.fd.as_fd()
    })
}

/// Counts into the page at descriptor `fd`, inherited from the server.
pub fn adopt(fd: i32) -> io::Result<()> {
    // SAFETY: the caller names a descriptor it inherited and owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let page = map(owned)?;
    let _ = PAGE.set(page);
    Ok(())
}

/// One pty transfer.
pub fn pty_transfer() {
    if let Some(page) = PAGE.get() {
        page.counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Transfers so far by every process sharing the page (None: no page).
pub fn total() -> Option<u64> {
    PAGE.get().map(|p| p.counter.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_process_counts_into_the_parent_s_page() {
        share().unwrap();
        let before = total().unwrap();
        pty_transfer();
        assert_eq!(total().unwrap(), before + 1);
        // A forked child adds through its own mapping of the same page.
        // SAFETY: the child only does an atomic add and _exit.
        match unsafe { libc::fork() } {
            0 => {
                for _ in 0..5 {
                    pty_transfer();
                }
                unsafe { libc::_exit(0) };
            }
            pid if pid > 0 => {
                let mut status = 0;
                // SAFETY: waiting for our own child by PID.
                unsafe { libc::waitpid(pid, &mut status, 0) };
            }
            _ => panic!("fork failed: {}", io::Error::last_os_error()),
        }
        assert!(total().unwrap() >= before + 6);
    }
}

//! The wire view: every frame on one end of the link, captured with an
//! `AF_PACKET` socket bound to the interface (inside its namespace: the
//! capture runs in an endpoint process placed there).
//!
//! Outgoing frames are seen as the device transmits them (after the qdisc,
//! so tbf's pacing is visible), incoming ones as the device receives them.
//! Each frame's kernel timestamp (`SO_TIMESTAMPNS`), length and direction
//! are kept for [`crate::analysis::capture::summarize`]; with a pcap path the
//! first `snaplen` bytes of each are also written in pcap format (nanosecond
//! timestamps, Ethernet or raw-IP link type as the device is), which
//! tcpdump, tshark and Wireshark read. The socket's drop count
//! (`PACKET_STATISTICS`) is reported: a capture that could not keep up says so.

use crate::analysis::capture::{WireEvent, summarize};
use crate::measure::ifstat::InterfaceCounters;
use crate::record::testbed::{CaptureReport, TimelineEvent};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use serde::{Deserialize, Serialize};
use std::io::{self, BufWriter};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureSpec {
    pub interface: String,
    pub pcap: Option<PathBuf>,
    /// Bytes of each frame kept in the pcap (headers: 128 is plenty).
    pub snaplen: u32,
    /// The link's rate, for the burst and idle analysis.
    pub rate_bps: Option<u64>,
    /// Keep only IPv4 TCP frames to or from this port, and record each as a
    /// [`TimelineEvent`] (on loopback each packet is kept once, not twice).
    #[serde(default)]
    pub port: Option<u16>,
}

/// Events kept for analysis (16 bytes each).
const MAX_EVENTS: usize = 4_000_000;
const ETH_P_ALL: u16 = 0x0003;
const PACKET_OUTGOING: u8 = 4;
const ARPHRD_ETHER: u16 = 1;
const ARPHRD_LOOPBACK: u16 = 772;

/// A running capture.
pub struct Capture {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<io::Result<Captured>>,
    fd: Arc<OwnedFd>,
    spec: CaptureSpec,
    counters_before: Option<InterfaceCounters>,
    link_type: &'static str,
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A raw packet socket bound to interface `ifindex`, every protocol,
/// with kernel timestamps and (best effort) a 16 MB receive buffer.
fn packet_socket(ifindex: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket creation.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            i32::from(ETH_P_ALL.to_be()),
        )
    })?;
    // SAFETY: fd was just created and is ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = ETH_P_ALL.to_be();
    addr.sll_ifindex = ifindex as i32;
    // SAFETY: addr is a valid sockaddr_ll of the given size.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    })?;
    let one: libc::c_int = 1;
    let big: libc::c_int = 16 << 20;
    // SAFETY: int-valued socket options.
    unsafe {
        check(libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            4,
        ))?;
        // Best effort: a bigger buffer only lowers the chance of drops.
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&big as *const libc::c_int).cast(),
            4,
        );
    }
    Ok(fd)
}

impl Capture {
    pub fn start(spec: CaptureSpec) -> io::Result<Capture> {
        let name = std::ffi::CString::new(spec.interface.clone())
            .map_err(|_| io::Error::other("interface name contains NUL"))?;
        // SAFETY: a valid C string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::other(format!(
                "no interface {} in this namespace",
                spec.interface
            )));
        }
        let fd = packet_socket(ifindex)?;
        let mut ifr = [0u8; 40];
        ifr[..spec.interface.len()].copy_from_slice(spec.interface.as_bytes());
        // SAFETY: SIOCGIFHWADDR fills a struct ifreq (40 bytes).
        check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, ifr.as_mut_ptr()) })?;
        let hatype = u16::from_ne_bytes([ifr[16], ifr[17]]);
        let (link_type, datalink, link_header) = match hatype {
            ARPHRD_ETHER => ("ethernet", DataLink::ETHERNET, 14),
            // Loopback frames carry an all-zero Ethernet header.
            ARPHRD_LOOPBACK => ("loopback", DataLink::ETHERNET, 14),
            _ => ("raw_ip", DataLink::RAW, 0),
        };
        let filter = spec.port.map(|port| Filter {
            port,
            link_header,
            loopback: hatype == ARPHRD_LOOPBACK,
        });
        let writer = match &spec.pcap {
            Some(path) => {
                let file = std::fs::File::create(path)?;
                let header = PcapHeader {
                    snaplen: spec.snaplen,
                    datalink,
                    ts_resolution: TsResolution::NanoSecond,
                    endianness: pcap_file::Endianness::native(),
                    ..Default::default()
                };
                Some(
                    PcapWriter::with_header(BufWriter::new(file), header)
                        .map_err(|e| io::Error::other(e.to_string()))?,
                )
            }
            None => None,
        };
        let counters_before = InterfaceCounters::read(&spec.interface);
        let fd = Arc::new(fd);
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_fd, thread_stop, snaplen) = (fd.clone(), stop.clone(), spec.snaplen);
        let thread = std::thread::Builder::new()
            .name("capture".into())
            .spawn(move || capture_loop(&thread_fd, &thread_stop, snaplen, filter, writer))?;
        Ok(Capture {
            stop,
            thread,
            fd,
            spec,
            counters_before,
            link_type,
        })
    }

    /// Stops after draining what the socket holds, and summarises.
    pub fn stop(self) -> io::Result<CaptureReport> {
        // Let frames already sent reach the socket.
        std::thread::sleep(Duration::from_millis(20));
        self.stop.store(true, Ordering::Relaxed);
        let Captured {
            events,
            captured,
            truncated,
            timeline,
        } = self
            .thread
            .join()
            .map_err(|_| io::Error::other("capture thread panicked"))??;
        let counters_after = InterfaceCounters::read(&self.spec.interface);
        let mut stats = [0u32; 2];
        let mut len = 8 as libc::socklen_t;
        // SAFETY: PACKET_STATISTICS fills struct tpacket_stats (two u32s).
        unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                stats.as_mut_ptr().cast(),
                &mut len,
            )
        };
        Ok(CaptureReport {
            wire: summarize(&events, self.spec.rate_bps),
            captured,
            kernel_drops: u64::from(stats[1]),
            interface: match (counters_after, self.counters_before) {
                (Some(a), Some(b)) => Some(a.since(&b)),
                _ => None,
            },
            pcap: self.spec.pcap,
            link_type: self.link_type.into(),
            truncated,
            timeline,
        })
    }
}

type Writer = PcapWriter<BufWriter<std::fs::File>>;

/// A port filter and how to find the IP header in a frame.
#[derive(Clone, Copy)]
struct Filter {
    port: u16,
    link_header: usize,
    /// On `lo` each packet is seen leaving and arriving: keep one copy.
    loopback: bool,
}

/// What the capture thread collected.
struct Captured {
    events: Vec<WireEvent>,
    captured: u64,
    truncated: bool,
    timeline: Vec<TimelineEvent>,
}

fn capture_loop(
    fd: &OwnedFd,
    stop: &AtomicBool,
    snaplen: u32,
    filter: Option<Filter>,
    mut writer: Option<Writer>,
) -> io::Result<Captured> {
    let mut events = Vec::new();
    let mut timeline = Vec::new();
    let mut captured = 0u64;
    let mut truncated = false;
    let mut buf = vec![0u8; snaplen.max(64) as usize];
    let mut control = [0u64; 16];
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, if stopping { 0 } else { 50 }) };
        if ready <= 0 {
            if stopping {
                break;
            }
            continue;
        }
        // SAFETY: plain data.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all pointers below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: msg describes valid buffers.
        let n = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut msg,
                libc::MSG_TRUNC | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => continue,
                _ => return Err(e),
            }
        }
        let len = n as u32;
        let mut stamp = None;
        // SAFETY: walking the control messages the kernel wrote.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET
                    && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
                {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    stamp = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        let stamp = stamp.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
        });
        if let Some(f) = filter {
            let kept = (n as usize).min(buf.len());
            let segment = crate::wire::tcpseg::parse(&buf[..kept], f.link_header)
                .filter(|s| s.src_port == f.port || s.dst_port == f.port);
            let duplicate = f.loopback && from.sll_pkttype != PACKET_OUTGOING;
            match segment {
                Some(s) if !duplicate => {
                    if timeline.len() < MAX_EVENTS {
                        timeline.push(TimelineEvent {
                            t_ns: stamp.as_nanos() as u64,
                            src_port: s.src_port,
                            dst_port: s.dst_port,
                            payload: s.payload,
                            flags: s.flags,
                        });
                    }
                }
                _ => continue,
            }
        }
        captured += 1;
        if events.len() < MAX_EVENTS {
            events.push(WireEvent {
                t_ns: stamp.as_nanos() as u64,
                len,
                outgoing: from.sll_pkttype == PACKET_OUTGOING,
            });
        } else {
            truncated = true;
        }
        if let Some(w) = writer.as_mut() {
            let kept = (len as usize).min(buf.len());
            w.write_packet(&PcapPacket::new(stamp, len, &buf[..kept]))
                .map_err(|e| io::Error::other(e.to_string()))?;
        }
    }
    if let Some(w) = writer {
        use std::io::Write;
        w.into_writer().flush()?;
    }
    Ok(Captured {
        events,
        captured,
        truncated,
        timeline,
    })
}

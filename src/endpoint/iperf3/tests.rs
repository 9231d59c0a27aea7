use super::streams::UdpCount;
use super::types::*;
use super::*;
use crate::wire::iperf3::COOKIE_SIZE;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;

#[test]
fn a_receiver_counts_gaps_late_arrivals_and_jitter_as_iperf3_does() {
    let mut c = UdpCount::default();
    // 1, 2, then 5: two missing.
    c.received(1, 0.0, 0.010);
    c.received(2, 0.001, 0.011);
    c.received(5, 0.004, 0.014);
    assert_eq!((c.packets, c.lost), (5, 2));
    // 3 arrives late: one fewer lost, the highest stays 5.
    c.received(3, 0.002, 0.020);
    assert_eq!((c.packets, c.lost), (5, 1));
    // Transit 10 ms three times, then 18 ms: jitter moves 1/16 of 8 ms.
    assert!((c.jitter_s - 0.008 / 16.0).abs() < 1e-9, "{c:?}");
}

#[test]
fn the_parameters_say_tcp_or_udp_as_iperf3_does() {
    let mut spec = Iperf3Spec {
        server: "127.0.0.1:5201".parse().unwrap(),
        parallel: 2,
        reverse: true,
        bidir: false,
        duration: Duration::from_secs(3),
        bytes: None,
        len: 131_072,
        udp_bps: None,
        timeout: Duration::from_secs(1),
        interval: None,
    };
    let tcp = spec.params();
    assert_eq!(
        (tcp.tcp, tcp.udp, tcp.time, tcp.parallel),
        (Some(true), None, 3, 2)
    );
    assert_eq!(tcp.reverse, Some(true));
    spec.udp_bps = Some(10_000_000);
    spec.bytes = Some(1 << 20);
    let udp = spec.params();
    assert_eq!(
        (udp.tcp, udp.udp, udp.bandwidth),
        (None, Some(true), Some(10_000_000))
    );
    // By bytes, iperf3 sends time 0.
    assert_eq!((udp.time, udp.num), (0, 1 << 20));
}

/// A hostile iperf3 server on loopback: it takes the cookie on the
/// control connection, then `script` plays it; data connections are
/// accepted, read to their end and counted.
fn hostile(script: impl FnOnce(&mut TcpStream) + Send + 'static) -> (SocketAddr, Arc<AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let data = Arc::new(AtomicU64::new(0));
    let count = data.clone();
    std::thread::spawn(move || {
        let (mut control, _) = listener.accept().unwrap();
        let mut cookie = [0u8; COOKIE_SIZE];
        control.read_exact(&mut cookie).unwrap();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::Relaxed);
                std::thread::spawn(move || io::copy(&mut &conn, &mut io::sink()));
            }
        });
        script(&mut control);
    });
    (addr, data)
}

fn say(control: &mut TcpStream, state: State) -> io::Result<()> {
    control.write_all(&[state.byte()])
}

/// Reads one JSON frame (the client's parameters or results).
fn take_frame(control: &mut TcpStream) {
    let mut header = [0u8; 4];
    control.read_exact(&mut header).unwrap();
    let mut text = vec![0u8; u32::from_be_bytes(header) as usize];
    control.read_exact(&mut text).unwrap();
}

/// A stock server's part up to the client's TEST_END: the parameters
/// taken, the streams made, the test started and run.
fn run_a_test(control: &mut TcpStream) {
    say(control, State::ParamExchange).unwrap();
    take_frame(control);
    say(control, State::CreateStreams).unwrap();
    say(control, State::TestStart).unwrap();
    say(control, State::TestRunning).unwrap();
    let mut end = [0u8; 1];
    control.read_exact(&mut end).unwrap();
    assert_eq!(end[0], State::TestEnd.byte());
}

fn spec_for(server: SocketAddr) -> Iperf3Spec {
    Iperf3Spec {
        server,
        parallel: 1,
        reverse: false,
        bidir: false,
        duration: Duration::from_secs(1),
        bytes: None,
        len: 16 * 1024,
        udp_bps: None,
        timeout: Duration::from_secs(1),
        interval: None,
    }
}

#[test]
fn create_streams_again_opens_no_more_streams() {
    let (addr, data) = hostile(|control| {
        say(control, State::ParamExchange).unwrap();
        take_frame(control);
        // As often as the client listens.
        for _ in 0..200 {
            if say(control, State::CreateStreams).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let error = run(&spec_for(addr), &mut |_| {}, &Arc::default()).expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("CreateStreams where iperf3's exchange has TestStart next"),
        "{error}"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        data.load(Ordering::Relaxed),
        1,
        "one stream asked, one opened"
    );
}

#[test]
fn a_second_test_running_ends_the_test_marked_incomplete() {
    let (addr, _) = hostile(|control| {
        run_a_test(control);
        let _ = say(control, State::TestRunning);
        std::thread::sleep(Duration::from_millis(500));
    });
    let test = run(&spec_for(addr), &mut |_| {}, &Arc::default()).expect("netlab's own counts");
    let why = test.incomplete.expect("marked incomplete");
    assert!(why.contains("TestRunning where"), "{why}");
    assert!(test.streams[0].bytes > 0);
}

#[test]
fn results_that_trickle_meet_one_deadline() {
    let (addr, _) = hostile(|control| {
        run_a_test(control);
        say(control, State::ExchangeResults).unwrap();
        take_frame(control);
        // A 1 KB frame announced, its bytes one every 300 ms: each read
        // within the step's timeout (1 s), the whole never.
        let _ = control.write_all(&1024u32.to_be_bytes());
        while control.write_all(b" ").is_ok() {
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let test = run(&spec_for(addr), &mut |_| {}, &Arc::default()).expect("netlab's own counts");
    let why = test.incomplete.expect("marked incomplete");
    assert!(why.contains("reading the server's results"), "{why}");
    assert!(why.contains("timed out"), "{why}");
}

#[test]
fn states_each_late_but_in_time_meet_the_whole_allowance() {
    let (addr, _) = hostile(|control| {
        let late = |control: &mut TcpStream, state| {
            std::thread::sleep(Duration::from_millis(900));
            say(control, state)
        };
        late(control, State::ParamExchange).unwrap();
        take_frame(control);
        late(control, State::CreateStreams).unwrap();
        late(control, State::TestStart).unwrap();
        late(control, State::TestRunning).unwrap();
        let mut end = [0u8; 1];
        control.read_exact(&mut end).unwrap();
        let _ = late(control, State::ExchangeResults);
        std::thread::sleep(Duration::from_secs(2));
    });
    // The whole exchange may take the test (1 s) and four steps (1 s
    // each): 0.9 s before each of five states is past it.
    let test = run(&spec_for(addr), &mut |_| {}, &Arc::default()).expect("netlab's own counts");
    let why = test.incomplete.expect("marked incomplete");
    assert!(why.contains("whole allowance of 5 s"), "{why}");
}

//! The verdict over constructed evidence, one mechanism a test.

use super::*;

fn side(cpu_s: f64) -> SideEvidence {
    SideEvidence {
        wall_s: 2.0,
        cpu_s,
        syscalls: 1000,
        ..SideEvidence::default()
    }
}

fn tcp(busy_s: f64, rwnd_s: f64, sndbuf_s: f64) -> SenderTcp {
    SenderTcp {
        srtt_us: 40_500,
        min_rtt_us: Some(40_000),
        snd_mss: 1448,
        // 40 Mbit/s over 40.5 ms: the fixture's flow, window-bound.
        snd_cwnd: 150,
        total_retrans: 0,
        data_segs_out: Some(10_000),
        busy_us: Some((busy_s * 1e6) as u64),
        rwnd_limited_us: Some((rwnd_s * 1e6) as u64),
        sndbuf_limited_us: Some((sndbuf_s * 1e6) as u64),
        congestion_control: Some("cubic".into()),
        // Past slow start: a loss-based control that once set its
        // threshold.
        snd_ssthresh: Some(120),
        ..SenderTcp::default()
    }
}

fn flow(tcp: SenderTcp) -> FlowEvidence {
    FlowEvidence {
        bytes: 10_000_000,
        record: 128 * 1024,
        sender: side(0.1),
        receiver: side(0.1),
        tcp: Some(tcp),
        path: PathEvidence::default(),
        paced_bps: None,
        ..FlowEvidence::default()
    }
}

fn primary(flow: &FlowEvidence) -> Factor {
    judge(flow).primary().unwrap().factor
}

#[test]
fn a_full_link_is_named_with_its_rate() {
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.bytes = 11_500_000; // 46 Mbit/s over 2 s
    f.path = PathEvidence {
        rate_bps: Some(50_000_000),
        rate_source: "the emulated link".into(),
        overhead: 1.04,
        wire_busy_s: Some(1.9),
        ..PathEvidence::default()
    };
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::Link, "{v:?}");
    assert!(
        v.headline().contains("the link is full: 46.0 of 48.1"),
        "{}",
        v.headline()
    );
}

#[test]
fn a_stalled_receive_window_is_the_receiver_unless_its_cpu_is_full() {
    let mut f = flow(tcp(2.0, 1.5, 0.0));
    f.receiver.socket_buffer = Some(65536);
    f.receiver.buffer_set = true;
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::ReceiveWindow, "{v:?}");
    assert!(v.primary().unwrap().fix.contains("--rcvbuf"));
    f.receiver.cpu_s = 1.95;
    assert_eq!(primary(&f), Factor::ReceiverCpu);
}

#[test]
fn a_side_that_spent_its_cpu_budget_is_cpu_bound_though_its_core_was_mostly_idle() {
    // The receiver ran 30% of the run on a 30% budget and waited the
    // rest (its run delay includes the throttled time): its budget,
    // not contention, held the flow; the sender saw a full window.
    let mut f = flow(tcp(2.0, 1.5, 0.0));
    f.receiver.cpu_s = 0.6;
    f.receiver.run_delay_s = Some(1.3);
    assert_eq!(primary(&f), Factor::CpuContention, "unbudgeted: it waited");
    f.receiver.cpu_budget = Some(0.3);
    f.receiver.throttled_s = Some(1.2);
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::ReceiverCpu, "{v:?}");
    assert!(first.fix.contains("30.0% of one CPU"), "{}", first.fix);
    assert!(first.fix.contains("--receiver-cpu"), "{}", first.fix);
    assert!((first.evidence["receiver_throttled_share"] - 0.6).abs() < 1e-9);
    // A sender on a budget it does not reach is not held by it.
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.sender.cpu_budget = Some(0.5);
    f.sender.cpu_s = 0.2;
    assert_ne!(primary(&f), Factor::SenderCpu);
    // One that reaches it is, with nothing in flight between its slices.
    let mut f = flow(tcp(0.7, 0.0, 0.0));
    f.sender.cpu_budget = Some(0.3);
    f.sender.cpu_s = 0.59;
    f.sender.throttled_s = Some(1.3);
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::SenderCpu, "{v:?}");
    assert!(v.primary().unwrap().fix.contains("--sender-cpu"));
}

#[test]
fn a_throttled_budget_is_named_though_a_busy_host_saturated_the_other_side() {
    // Seen beside a CPU-bound job: the sender on a 20% budget, throttled
    // 40% of the run, reached 75% of it (the job took its slices too),
    // while the receiver's core was saturated: the cgroup's count names
    // the sender's budget, not the receiver.
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.sender.cpu_budget = Some(0.2);
    f.sender.cpu_s = 0.3;
    f.sender.throttled_s = Some(0.8);
    f.receiver.cpu_s = 1.8;
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::SenderCpu, "{v:?}");
    assert!(v.primary().unwrap().fix.contains("--sender-cpu"));
    // Without the throttling the saturated receiver is the limit.
    f.sender.throttled_s = Some(0.05);
    assert_eq!(primary(&f), Factor::ReceiverCpu);
}

#[test]
fn round_trips_stretched_by_a_side_short_of_cpu_are_its_evidence_not_a_queue() {
    let mut t = tcp(2.0, 1.8, 0.0);
    t.min_rtt_us = Some(20);
    t.srtt_us = 2_000;
    let mut f = flow(t);
    f.receiver.cpu_s = 1.95;
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::ReceiverCpu);
    assert!(
        v.limits.iter().all(|l| l.factor != Factor::QueueingDelay),
        "{v:?}"
    );
    assert!(v.primary().unwrap().evidence.contains_key("queueing_ms"));
    // With the receiver's CPU to spare, the same delay is a queue.
    f.receiver.cpu_s = 0.1;
    let v = judge(&f);
    assert!(
        v.limits.iter().any(|l| l.factor == Factor::QueueingDelay),
        "{v:?}"
    );
}

fn counters(pairs: &[(&str, u64)]) -> Option<BTreeMap<String, u64>> {
    let mut all: BTreeMap<String, u64> = RECEIVE_QUEUE
        .iter()
        .map(|name| (format!("TcpExt.{name}"), 0))
        .collect();
    for (name, n) in pairs {
        all.insert(format!("TcpExt.{name}"), *n);
    }
    Some(all)
}

#[test]
fn a_receiver_that_pruned_its_queue_fell_behind_its_buffer() {
    let mut f = flow(tcp(2.0, 1.5, 0.0));
    f.receiver.counters = counters(&[("PruneCalled", 12), ("TCPToZeroWindowAdv", 30)]);
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::ReceiveWindow);
    assert_eq!(first.evidence["PruneCalled"], 12.0);
    assert!(first.fix.contains("reader fell behind"), "{}", first.fix);
    assert!(
        !v.missing.iter().any(|m| m.contains("TcpExt")),
        "{:?}",
        v.missing
    );
    // Without the counters the verdict says it could not see them.
    f.receiver.counters = None;
    assert!(judge(&f).missing.iter().any(|m| m.contains("TcpExt")));
    // A kernel that lacks some names them.
    let mut partial = counters(&[]).unwrap();
    partial.remove("TcpExt.TCPZeroWindowDrop");
    f.receiver.counters = Some(partial);
    assert!(
        judge(&f)
            .missing
            .iter()
            .any(|m| m.contains("TCPZeroWindowDrop"))
    );
}

#[test]
fn loss_says_whether_the_receiver_dropped_the_segments_or_the_path_did() {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.total_retrans = 100;
    t.snd_cwnd = 20;
    let mut f = flow(t);
    f.bytes = 2_000_000;
    f.receiver.counters = counters(&[]);
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::Loss, "{v:?}");
    assert!(v.primary().unwrap().fix.contains("loss is on the path"));
    f.receiver.counters = counters(&[("TCPRcvQDrop", 60), ("TCPBacklogDrop", 20)]);
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.evidence["receiver_dropped_segments"], 80.0);
    assert!(first.fix.contains("dropped 80 segments"), "{}", first.fix);
    // The kernel dropped none; an interface that dropped is named, and
    // with both interfaces read and clean the loss is between the hosts.
    f.receiver.counters = counters(&[]);
    f.receiver.interface = Some(InterfaceDrops {
        name: "eth0".into(),
        dropped: 70,
        errors: 3,
    });
    f.sender.interface = Some(InterfaceDrops {
        name: "eth1".into(),
        ..InterfaceDrops::default()
    });
    let fix = judge(&f).primary().unwrap().fix.clone();
    assert!(
        fix.contains("receiver's interface eth0 dropped 70 and failed 3"),
        "{fix}"
    );
    assert!(!fix.contains("eth1"), "{fix}");
    f.receiver.interface.as_mut().unwrap().dropped = 0;
    f.receiver.interface.as_mut().unwrap().errors = 0;
    let fix = judge(&f).primary().unwrap().fix.clone();
    assert!(fix.contains("no counter either end read saw it"), "{fix}");
}

/// Nothing at its bound, the window allowing far more, the receiver
/// running 55% of the run on CPU 1, busy 97%, `interrupt_share` of it
/// softirq and interrupts.
fn receiver_at_55_pct_on_a_busy_core(interrupt_share: f64) -> FlowEvidence {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.snd_cwnd = 2_000;
    let mut f = flow(t);
    f.receiver.cpu_s = 1.1;
    f.receiver.core = Some(CoreEvidence {
        cpu: 1,
        busy_share: 0.97,
        interrupt_share,
    });
    f
}

#[test]
fn a_side_whose_core_was_full_of_softirq_work_is_cpu_bound_on_that_core() {
    // Nothing at its bound, the window allowing far more, the
    // receiver running 55% of the run: by its own accounting not
    // saturated, but its core was busy 97%, 40% of it softirq.
    let mut f = receiver_at_55_pct_on_a_busy_core(0.4);
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::ReceiverCpu, "{v:?}");
    assert!(first.fix.contains("CPU 1"), "{}", first.fix);
    assert_eq!(first.evidence["receiver_core_softirq_pct"], 40.0);
    // The same core busy with tasks alone (no interrupt work) is not
    // this: the run delay would name the contention.
    f.receiver.core = Some(CoreEvidence {
        cpu: 1,
        busy_share: 0.97,
        interrupt_share: 0.02,
    });
    assert_ne!(judge(&f).primary().unwrap().fix, first.fix);
}

#[test]
fn a_core_shared_with_other_tasks_is_not_named_full_of_packet_work() {
    // The receiver ran 55%, its core was busy 97%, 15% of it softirq:
    // the other 27% was other tasks, so the core was shared, and
    // "steer the packet work away" would be the wrong fix.
    let mut f = receiver_at_55_pct_on_a_busy_core(0.15);
    let v = judge(&f);
    assert!(
        !v.limits
            .iter()
            .any(|l| l.fix.contains("steer the packet work")),
        "{v:?}"
    );
    // With its wait for the core measured, that is the contention.
    f.receiver.run_delay_s = Some(0.5);
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::CpuContention, "{v:?}");
    // The same core, nothing else on it but the receiver and a 40%
    // softirq load, but the receiver waiting a quarter of the run (the
    // packet work in ksoftirqd, which takes its turn like a task):
    // contention too, not the core's packet work.
    f.receiver.core = Some(CoreEvidence {
        cpu: 1,
        busy_share: 0.97,
        interrupt_share: 0.4,
    });
    assert_eq!(primary(&f), Factor::CpuContention);
}

#[test]
fn small_writes_whose_packet_work_fills_the_senders_core_are_per_call() {
    // 1 KB writes on loopback: the sender ran 69%, its core 98% busy,
    // 19% of it the softirq its own writes set off (the receive path
    // runs there). Each call's cost, not the core's other work.
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.tcp.as_mut().unwrap().snd_cwnd = 2_000;
    f.record = 1024;
    f.sender.cpu_s = 1.38;
    f.receiver.cpu_s = 0.66;
    f.sender.core = Some(CoreEvidence {
        cpu: 0,
        busy_share: 0.98,
        interrupt_share: 0.19,
    });
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::PerCall, "{v:?}");
    assert!(first.fix.contains("19% of the run"), "{}", first.fix);
    // 128 KB writes with the same loads are not per-call: the core full
    // of packet work is.
    f.record = 128 * 1024;
    let first = judge(&f).primary().unwrap().clone();
    assert_eq!(first.factor, Factor::SenderCpu);
    assert!(first.fix.contains("steer the packet work"), "{}", first.fix);
}

#[test]
fn a_full_send_buffer_is_named() {
    let mut f = flow(tcp(2.0, 0.0, 1.6));
    f.sender.buffer_max = Some(4 << 20);
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::SendBuffer);
    assert!(
        v.primary()
            .unwrap()
            .fix
            .contains("tcp_wmem's maximum (now 4.0 MB)"),
        "{v:?}"
    );
}

#[test]
fn loss_gives_the_mathis_bound() {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.total_retrans = 100;
    let v = judge(&flow(t));
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::Loss);
    // 1448 B × 8 / 40.5 ms × 1.2247 / √0.01
    let want = 1448.0 * 8.0 / 0.0405 * MATHIS_C / 0.1 / 1e6;
    assert!((first.evidence["mathis_bound_mbit_s"] - want).abs() < 0.01);
}

#[test]
fn a_saturated_sender_with_small_records_is_per_call() {
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.sender.cpu_s = 1.96;
    f.record = 1024;
    f.sender.syscalls = 10_000_000 / 1024;
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::PerCall, "{v:?}");
    assert!(v.headline().contains("use 64 KB records"));
    f.record = 128 * 1024;
    assert_eq!(primary(&f), Factor::SenderCpu);
}

#[test]
fn pacing_and_idle_time_are_the_application() {
    let mut f = flow(tcp(0.4, 0.0, 0.0));
    f.paced_bps = Some(10_000_000);
    assert_eq!(primary(&f), Factor::Application);
    f.paced_bps = None;
    assert_eq!(primary(&f), Factor::Application);
}

#[test]
fn the_applications_own_work_between_its_calls_is_named() {
    // A reader busy 60% of the run verifying what it read, its buffer
    // full behind it: the window, with the reader's own work named.
    let mut f = flow(tcp(2.0, 1.5, 0.0));
    f.receiver.socket_buffer = Some(65536);
    f.receiver.buffer_set = true;
    f.receiver.cpu_s = 1.4;
    f.receiver.user_s = Some(1.2);
    let v = judge(&f);
    let window = v.primary().unwrap();
    assert_eq!(window.factor, Factor::ReceiveWindow, "{v:?}");
    assert_eq!(window.evidence["receiver_outside_read_pct"], 60.0);
    assert_eq!(window.evidence["receiver_bytes_per_read"], 10_000.0);
    assert!(
        window.fix.contains("own work between reads"),
        "{}",
        window.fix
    );
    f.receiver.user_s = Some(0.1);
    assert!(!judge(&f).primary().unwrap().fix.contains("own work"));

    // An idle sender that spent half the run producing: its producer.
    let mut f = flow(tcp(0.4, 0.0, 0.0));
    f.sender.cpu_s = 1.1;
    f.sender.user_s = Some(1.0);
    let v = judge(&f);
    let app = v.primary().unwrap();
    assert_eq!(app.factor, Factor::Application, "{v:?}");
    assert!(
        app.fix.contains("producing data between its writes"),
        "{}",
        app.fix
    );
    f.sender.user_s = Some(0.05);
    assert!(
        judge(&f)
            .primary()
            .unwrap()
            .fix
            .contains("waited between writes")
    );
}

#[test]
fn intervals_make_phases_and_carry_the_app_limited_bit() {
    let interval = |start: f64, busy, rwnd, sndbuf, app| IntervalEvidence {
        start_s: start,
        end_s: start + 0.5,
        busy,
        rwnd_limited: rwnd,
        sndbuf_limited: sndbuf,
        app_limited: Some(app),
        ..IntervalEvidence::default()
    };
    let mut f = flow(tcp(2.0, 1.5, 0.0));
    f.receiver.socket_buffer = Some(65536);
    f.receiver.buffer_set = true;
    f.intervals = vec![
        interval(0.0, 1.0, 0.1, 0.6, false),
        interval(0.5, 1.0, 0.8, 0.0, false),
        interval(1.0, 1.0, 0.9, 0.0, true),
        interval(1.5, 0.2, 0.1, 0.0, true),
    ];
    let v = judge(&f);
    let held: Vec<(&str, u32, u32)> = v
        .phases
        .iter()
        .map(|p| (p.held_by.as_str(), p.intervals, p.app_limited))
        .collect();
    assert_eq!(held, [("sndbuf", 1, 0), ("rwnd", 2, 1), ("idle", 1, 1)]);
    assert_eq!(v.phases[1].from_s, 0.5);
    assert_eq!(v.phases[1].to_s, 1.5);
    assert_eq!(
        v.primary().unwrap().evidence["app_limited_interval_ends_pct"],
        50.0
    );
    assert!(
        v.headline()
            .contains("by interval: sndbuf 0.0-0.5 s, rwnd 0.5-1.5 s")
    );
    // Without intervals, no phases and no such evidence.
    f.intervals.clear();
    let v = judge(&f);
    assert!(v.phases.is_empty());
    assert!(
        !v.primary()
            .unwrap()
            .evidence
            .contains_key("app_limited_interval_ends_pct")
    );
    assert!(!v.headline().contains("by interval"));
}

#[test]
fn queueing_delay_is_named_beside_the_link() {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.srtt_us = 91_000;
    let mut f = flow(t);
    f.path.queue_bytes = Some(512 * 1024);
    let v = judge(&f);
    let queue = v
        .limits
        .iter()
        .find(|l| l.factor == Factor::QueueingDelay)
        .expect("queueing named");
    assert!(
        queue.fix.contains("adds 51 ms to a 40 ms path"),
        "{}",
        queue.fix
    );
}

#[test]
fn missing_accounting_is_said_not_taken_as_zero() {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.busy_us = None;
    let v = judge(&flow(t));
    assert!(!v.missing.is_empty());
    assert_eq!(v.primary().unwrap().factor, Factor::Undecided);
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.tcp = None;
    f.sender.cpu_s = 1.9;
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::SenderCpu);
    assert!(v.missing[0].contains("TCP_INFO"));
}

#[test]
fn a_flow_at_its_receive_window_s_rate_is_the_window_whatever_the_chrono_says() {
    // bbr stops at its pacing gate before the window test, so the
    // chrono calls the time busy; 64 KB of window over 20 ms is
    // 26 Mbit/s, and the flow ran at 31.
    let mut t = tcp(3.0, 0.0, 0.0);
    t.min_rtt_us = Some(20_000);
    t.srtt_us = 20_300;
    t.congestion_control = Some("bbr".into());
    t.snd_cwnd = 60;
    let mut f = flow(t);
    f.sender.wall_s = 3.0;
    f.receiver.wall_s = 3.0;
    f.bytes = 31_100_000 * 3 / 8;
    f.receiver.socket_buffer = Some(131_072);
    f.receiver.buffer_set = true;
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::ReceiveWindow, "{v:?}");
    // A buffer far above the flow's window rate is not the limit; with
    // nothing else to go by (no samples, no known rate) bbr's flow is
    // undecided, not guessed.
    f.receiver.socket_buffer = Some(32 << 20);
    assert_eq!(primary(&f), Factor::Undecided);
}

#[test]
fn a_cost_model_splits_a_saturated_sender_by_its_fixed_share() {
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.sender.cpu_s = 1.96;
    f.record = 1024;
    let mut v = judge(&f);
    attribute_cpu(&mut v, 0.3, 1024);
    assert_eq!(v.primary().unwrap().factor, Factor::SenderCpu, "{v:?}");
    f.record = 64 * 1024;
    let mut v = judge(&f);
    attribute_cpu(&mut v, 0.7, 64 * 1024);
    assert_eq!(v.primary().unwrap().factor, Factor::PerCall, "{v:?}");
}

#[test]
fn a_side_waiting_for_a_busy_core_is_contention_not_its_producer() {
    let mut f = flow(tcp(0.5, 0.0, 0.0));
    f.record = 1024;
    f.sender.cpu_s = 0.8;
    f.sender.run_delay_s = Some(1.0);
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::CpuContention, "{v:?}");
    assert!(
        v.headline().contains("waiting for a CPU 50%"),
        "{}",
        v.headline()
    );
    // Without the run delay, the same run is the producer's.
    f.sender.run_delay_s = None;
    assert_eq!(primary(&f), Factor::Application);
}

/// Samples every 0.1 s over `wall_s`, each at `rate` bits/s and `rtt_us`,
/// `recovering` of them (spread through the run) in recovery.
fn samples(wall_s: f64, rate: f64, rtt_us: u32, recovering: usize) -> Vec<IntervalEvidence> {
    let n = (wall_s / 0.1).round() as usize;
    let every = n.checked_div(recovering).unwrap_or(usize::MAX);
    (0..n)
        .map(|k| IntervalEvidence {
            start_s: k as f64 * 0.1,
            end_s: (k + 1) as f64 * 0.1,
            busy: 1.0,
            app_limited: Some(false),
            delivery_rate_bps: Some(rate * (1.0 + 0.03 * ((k % 3) as f64 - 1.0))),
            rtt_us: Some(rtt_us),
            ca_state: Some(if k % every == every / 2 {
                CA_RECOVERY
            } else {
                0
            }),
            cwnd: 150,
            ..IntervalEvidence::default()
        })
        .collect()
}

#[test]
fn loss_is_judged_by_the_time_it_cost_under_any_control() {
    // bbr, 1% of the bytes retransmitted, on a 120 Mbit/s link of known
    // rate, delivering 40: half the run in recovery is the loss,
    // whatever bbr's model of loss; the emulator busy 70% is evidence.
    for cc in ["bbr", "cubic"] {
        let mut t = tcp(2.0, 0.0, 0.0);
        t.congestion_control = Some(cc.into());
        t.total_retrans = 100;
        t.bytes_sent = Some(10_100_000);
        t.bytes_retrans = Some(101_000);
        let mut f = flow(t);
        f.path.rate_bps = Some(120_000_000);
        f.path.rate_exact = true;
        f.path.overhead = 1.03;
        f.path.emulator_busy = Some(0.7);
        f.samples = samples(2.0, 40e6, 40_500, 10);
        let v = judge(&f);
        let first = v.primary().unwrap();
        assert_eq!(first.factor, Factor::Loss, "{cc}: {v:?}");
        assert!(
            (first.evidence["recovery_time_pct"] - 50.0).abs() < 1e-9,
            "{first:?}"
        );
        assert!(first.fix.contains("went to loss recovery"), "{}", first.fix);
        assert_eq!(
            first.evidence.contains_key("mathis_bound_mbit_s"),
            cc == "cubic",
            "Mathis' bound is evidence for a loss-based control only"
        );
        // The same retransmissions with no time in recovery did not hold
        // bbr's flow (its window is not cut by loss): no loss verdict, and
        // nothing guessed in its place. cubic's window, cut by the loss
        // and binding, is still the loss's.
        f.samples = samples(2.0, 40e6, 40_500, 0);
        let v = judge(&f);
        let first = v.primary().unwrap();
        if cc == "bbr" {
            assert_eq!(first.factor, Factor::Undecided, "{cc}: {v:?}");
        } else {
            assert_eq!(first.factor, Factor::Loss, "{cc}: {v:?}");
            assert!(first.fix.contains("halved its window"), "{}", first.fix);
        }
    }
}

#[test]
fn one_factor_from_two_parts_of_the_run_is_named_once() {
    let mut f = flow(tcp(1.5, 0.0, 0.0));
    f.sender.cpu_s = 1.9;
    let v = judge(&f);
    assert_eq!(v.limits.len(), 1, "{v:?}");
    assert!((v.limits[0].share - 1.0).abs() < 1e-9);
}

#[test]
fn a_part_short_of_its_bound_is_evidence_never_the_cause() {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.snd_cwnd = 1000;
    let mut f = flow(t);
    f.path.emulator_busy = Some(0.7);
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::Undecided, "{v:?}");
    assert_eq!(first.evidence["emulator_cpu_pct"], 70.0);
    assert!(
        first.fix.contains("the wire emulator's CPU at 70%")
            && first.fix.contains("evidence, not the cause"),
        "{}",
        first.fix
    );
    assert!(first.fix.contains("what would decide it"), "{}", first.fix);
    // At its bound the emulator is the limit.
    f.path.emulator_busy = Some(0.95);
    assert_eq!(primary(&f), Factor::Emulator);
    f.path.emulator_busy = None;
    f.receiver.cpu_s = 1.8;
    assert_eq!(primary(&f), Factor::ReceiverCpu);
}

#[test]
fn a_window_still_opening_is_named_when_nothing_else_is() {
    assert_eq!(primary(&flow(tcp(2.0, 0.0, 0.0))), Factor::CongestionWindow);
}

#[test]
fn a_delivery_rate_plateau_is_the_paths_bottleneck_with_its_queue() {
    // A shaper of about 41 Mbit/s on a 40 ms path, the rate unknown to
    // netlab: the delivery rate sat at 41, the flow delivered 40, and the
    // round trip rose to 60 ms while it ran: a queue in front of it.
    for cc in ["bbr", "cubic"] {
        let mut t = tcp(2.0, 0.0, 0.0);
        t.congestion_control = Some(cc.into());
        t.snd_cwnd = 400;
        let mut f = flow(t);
        f.samples = samples(2.0, 41e6, 60_000, 0);
        // An app-limited sample at 90 is not the path's.
        f.samples[10].app_limited = Some(true);
        f.samples[10].delivery_rate_bps = Some(90e6);
        let v = judge(&f);
        let first = v.primary().unwrap();
        assert_eq!(first.factor, Factor::Path, "{cc}: {v:?}");
        assert!(
            (first.evidence["delivery_rate_plateau_mbit_s"] - 41.0).abs() < 1.0,
            "{first:?}"
        );
        assert!(
            first.fix.contains("the path's bottleneck at 41")
                && first.fix.contains("a queue in front of it"),
            "{}",
            first.fix
        );
        assert!(
            (first.evidence["queueing_ms"] - 20.0).abs() < 0.5,
            "{first:?}"
        );
        // Named beside it too, never before it.
        assert_eq!(v.limits[1].factor, Factor::QueueingDelay, "{v:?}");
    }
}

#[test]
fn loss_without_a_rising_round_trip_is_a_policer() {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.snd_cwnd = 400;
    t.total_retrans = 30;
    t.bytes_sent = Some(10_040_000);
    t.bytes_retrans = Some(40_000);
    let mut f = flow(t);
    // Recovery 5% of the run: the loss did not hold the flow, the
    // policer's rate did.
    f.samples = samples(2.0, 41e6, 40_500, 1);
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::Path, "{v:?}");
    assert!(first.fix.contains("a policer"), "{}", first.fix);
    assert!(
        first.fix.contains("pace the sender below 41"),
        "{}",
        first.fix
    );
    // Without the loss and the rise: neither, and it says so.
    f.tcp.as_mut().unwrap().total_retrans = 0;
    f.tcp.as_mut().unwrap().bytes_retrans = Some(0);
    let first = judge(&f).primary().unwrap().clone();
    assert_eq!(first.factor, Factor::Path);
    assert!(first.fix.contains("no queue built"), "{}", first.fix);
}

#[test]
fn a_shaper_an_end_read_at_the_plateau_is_named_with_its_host() {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.snd_cwnd = 400;
    let mut f = flow(t);
    f.path.overhead = 1.03;
    f.samples = samples(2.0, 40e6, 60_000, 0);
    f.path.shapers = vec![
        ShaperEvidence {
            host: "agent b".into(),
            interface: "eth0".into(),
            direction: "ingress".into(),
            kind: "ingress police".into(),
            rate_bps: 900_000_000,
            ..ShaperEvidence::default()
        },
        ShaperEvidence {
            host: "agent a".into(),
            interface: "eth0".into(),
            direction: "egress".into(),
            kind: "tbf 1:".into(),
            rate_bps: 42_000_000,
            drops: 17,
            ..ShaperEvidence::default()
        },
    ];
    let first = judge(&f).primary().unwrap().clone();
    assert_eq!(first.factor, Factor::Path);
    assert!(
        first
            .fix
            .contains("tbf 1: on eth0 of agent a (egress, 42.0 Mbit/s) is the bottleneck"),
        "{}",
        first.fix
    );
    assert_eq!(first.evidence["shaper_drops"], 17.0);
}

#[test]
fn a_plateau_well_below_a_link_of_known_rate_is_not_the_path() {
    let mut t = tcp(2.0, 0.0, 0.0);
    t.congestion_control = Some("bbr".into());
    let mut f = flow(t);
    f.path.rate_bps = Some(100_000_000);
    f.path.rate_exact = true;
    f.samples = samples(2.0, 41e6, 40_500, 0);
    let v = judge(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::Undecided, "{v:?}");
    // An interface's speed is only an upper bound: the plateau below it
    // is still the path's.
    f.path.rate_exact = false;
    assert_eq!(primary(&f), Factor::Path);
}

#[test]
fn a_transfer_over_in_a_few_round_trips_is_a_short_flow() {
    // 300 KB over a 40 ms path in 0.2 s: 5 round trips, still in slow
    // start; the handshake took another 40 ms.
    let mut t = tcp(0.2, 0.0, 0.0);
    t.snd_cwnd = 160;
    t.snd_ssthresh = Some(INFINITE_SSTHRESH);
    let mut f = flow(t);
    f.bytes = 300_000;
    f.sender.wall_s = 0.2;
    f.receiver.wall_s = 0.2;
    f.handshake_s = Some(0.04);
    f.path.rate_bps = Some(100_000_000);
    f.path.rate_exact = true;
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::ShortFlow, "{v:?}");
    assert_eq!(first.evidence["round_trips"], 5.0);
    assert_eq!(first.evidence["window_needed_bytes"], 500_000.0);
    assert!((first.evidence["handshake_share"] - 0.04 / 0.24).abs() < 1e-9);
    assert!(
        first.fix.contains("took 5 round trips of 40.0 ms"),
        "{}",
        first.fix
    );
    assert!(first.fix.contains("initcwnd"), "{}", first.fix);
    // A long flow that never left slow start and never plateaued ended
    // in it too; one whose rate plateaued is the path's.
    let mut f = flow(tcp(1.2, 0.0, 0.0));
    f.sender.wall_s = 1.2;
    f.receiver.wall_s = 1.2;
    f.tcp.as_mut().unwrap().snd_ssthresh = Some(INFINITE_SSTHRESH);
    assert_eq!(primary(&f), Factor::ShortFlow);
    f.samples = samples(1.2, 66e6, 40_500, 0);
    f.tcp.as_mut().unwrap().snd_cwnd = 400;
    assert_eq!(primary(&f), Factor::Path);
}

#[test]
fn what_an_end_could_not_read_is_missing_evidence() {
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.path.unread = vec!["agent b's qdiscs (no CAP_NET_ADMIN)".into()];
    let v = judge(&f);
    assert!(
        v.missing.iter().any(|m| m.contains("agent b's qdiscs")),
        "{:?}",
        v.missing
    );
}

#[test]
fn a_rate_the_flow_far_exceeded_was_not_on_its_path() {
    // A shaper read on an interface the flow did not cross (20 Mbit/s)
    // against 27 Gbit/s delivered: no "full link", whatever the ratio.
    let mut f = flow(tcp(2.0, 0.0, 0.0));
    f.bytes = 6_800_000_000;
    f.path.rate_bps = Some(20_000_000);
    f.path.rate_source = "tbf 1: on ifb0 of the receiver".into();
    f.sender.cpu_s = 1.9;
    assert_eq!(primary(&f), Factor::SenderCpu);
}

#[test]
fn a_loss_based_window_cut_by_loss_and_binding_is_the_loss() {
    // cubic, 0.7% of the bytes lost, 9% of the run in recovery: its
    // window (cut to 13 segments, ssthresh 12) held the flow at 8 Mbit/s.
    let mut t = tcp(4.0, 0.0, 0.0);
    t.snd_cwnd = 13;
    t.snd_ssthresh = Some(12);
    t.srtt_us = 20_600;
    t.min_rtt_us = Some(20_000);
    t.total_retrans = 21;
    t.bytes_sent = Some(4_224_712);
    t.bytes_retrans = Some(30_408);
    let mut f = flow(t);
    f.sender.wall_s = 4.0;
    f.receiver.wall_s = 4.0;
    f.bytes = 4_034_000;
    f.samples = samples(4.0, 8e6, 21_000, 3);
    for (k, s) in f.samples.iter_mut().enumerate() {
        // A sawtooth, no plateau: the window between 9 and 18 segments.
        s.delivery_rate_bps = Some(4e6 + 1e6 * (k % 8) as f64);
        s.cwnd = 9 + (k % 10) as u32;
    }
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::Loss, "{v:?}");
    assert!(first.fix.contains("halved its window"), "{}", first.fix);
    // The end's one reading caught a peak (25 segments, 14 Mbit/s against
    // 8 delivered, past the slack) and no sample was in recovery: the
    // samples' typical window still says the loss held it.
    // Seen beside a CPU-bound job on 2026-12-03, where the end's reading
    // alone left it undecided.
    f.tcp.as_mut().unwrap().snd_cwnd = 25;
    for s in &mut f.samples {
        s.ca_state = Some(0);
    }
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::Loss, "{v:?}");
    assert!(
        first.evidence["cwnd_rate_mbit_s"] < 1.5 * 8.0,
        "the typical window, not the peak: {first:?}"
    );
    // Without samples the end's reading is all there is, and at the peak
    // it is no evidence that the window held the flow.
    f.samples.clear();
    f.intervals.clear();
    assert_ne!(primary(&f), Factor::Loss);
    f.samples = samples(4.0, 8e6, 21_000, 3);
    for (k, s) in f.samples.iter_mut().enumerate() {
        s.delivery_rate_bps = Some(4e6 + 1e6 * (k % 8) as f64);
        s.cwnd = 9 + (k % 10) as u32;
    }
    // bbr's window is not cut by loss: the same figures are not its loss.
    f.tcp.as_mut().unwrap().congestion_control = Some("bbr".into());
    assert_ne!(primary(&f), Factor::Loss);
}

#[test]
fn queueing_delay_is_never_the_primary_factor() {
    let queue = |share| Limit {
        factor: Factor::QueueingDelay,
        share,
        evidence: BTreeMap::new(),
        fix: String::new(),
    };
    let mut v = Verdict {
        limits: vec![
            queue(0.9),
            Limit {
                factor: Factor::Link,
                ..queue(0.5)
            },
        ],
        ..Verdict::default()
    };
    rank(&mut v);
    assert_eq!(v.primary().unwrap().factor, Factor::Link);
    assert_eq!(v.limits[1].factor, Factor::QueueingDelay);
}

#[test]
fn heavy_loss_beside_a_host_is_the_loss_or_undecided_never_the_host_alone() {
    // 3% retransmitted, 70% of the samples in recovery.
    let mut t = tcp(2.0, 0.0, 0.0);
    t.total_retrans = 300;
    t.data_segs_out = Some(10_000);
    t.snd_cwnd = 2_000;
    let mut f = flow(t);
    f.intervals.clear();
    f.samples = (0..100)
        .map(|i| IntervalEvidence {
            start_s: f64::from(i) * 0.02,
            end_s: f64::from(i + 1) * 0.02,
            busy: 1.0,
            ca_state: Some(if i % 10 < 7 { 3 } else { 0 }),
            ..IntervalEvidence::default()
        })
        .collect();
    // The receiver waited for its CPU a quarter of the run and ran 15%:
    // idle most of it, because of the loss.
    f.receiver.cpu_s = 0.3;
    f.receiver.run_delay_s = Some(0.5);
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::Loss, "{v:?}");
    assert!(
        first.fix.contains("neither side was running or waiting"),
        "{}",
        first.fix
    );
    // A receiver at its CPU's bound beside the same loss: cannot tell.
    f.receiver.cpu_s = 1.9;
    f.receiver.run_delay_s = Some(0.0);
    let v = judge(&f);
    let first = v.primary().unwrap();
    assert_eq!(first.factor, Factor::Undecided, "{v:?}");
    assert!(
        first
            .fix
            .contains("the receiver's CPU at its bound and loss"),
        "{}",
        first.fix
    );
    // Little recovery: the saturated receiver stands.
    for s in &mut f.samples {
        s.ca_state = Some(0);
    }
    assert_eq!(judge(&f).primary().unwrap().factor, Factor::ReceiverCpu);
}

#[test]
fn a_receiver_alone_names_only_its_own_cpu_and_is_otherwise_undecided() {
    // The sender's evidence says it was saturated: a receiver-side verdict
    // must not read it.
    let mut f = flow(tcp(1.9, 0.0, 0.0));
    f.sender = side(2.0);
    let v = judge_receiver_side(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::Undecided, "{v:?}");
    assert!(
        v.missing
            .iter()
            .any(|m| m.contains("receiver's evidence alone"))
    );
    // A saturated receiver is named.
    f.receiver = side(1.95);
    let v = judge_receiver_side(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::ReceiverCpu, "{v:?}");
    // A receiver waiting for a core half the run: contention.
    f.receiver = SideEvidence {
        run_delay_s: Some(1.0),
        involuntary_cs: 500,
        ..side(0.8)
    };
    let v = judge_receiver_side(&f);
    assert_eq!(v.primary().unwrap().factor, Factor::CpuContention, "{v:?}");
}

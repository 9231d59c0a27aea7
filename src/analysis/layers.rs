//! Where the CPU goes, by layer: the one table of rules that sorts a
//! sampled call chain into the layers of Berkeley's 1981 split and Van
//! Jacobson's 1988 one, as they exist in today's kernel (#17).
//!
//! A sample is a call chain, leaf first: kernel frames as `/proc/kallsyms`
//! names them, then user frames. The leaf's rule decides, except for
//! helpers that every layer calls (copies, memset, locks, RCU): their rule
//! *defers* to the callers, and the first caller whose rule does not defer
//! decides, with two exceptions that make a copy a driver's or a
//! checksum's: a copy under the tun or veth driver is the link's, a copy
//! under a checksum-and-copy is the checksum's. A deferring leaf with no
//! deciding caller keeps its own layer. What no rule matches is
//! `Unclassified` and is shown with its symbols, never hidden.
//!
//! Names are compared without the compiler's suffixes (`.isra.0`,
//! `.constprop.0`, `.part.0`, `.cold`).

use crate::record::profile::{Layer, LayerShare, LayerTable};
use std::collections::{BTreeMap, HashMap};

/// How a rule matches a function name.
#[derive(Debug, Clone, Copy)]
enum Pattern {
    Exact(&'static str),
    Prefix(&'static str),
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pattern: Pattern,
    pub layer: Layer,
    /// A helper every layer calls: its callers decide.
    pub defers: bool,
}

const fn exact(name: &'static str, layer: Layer) -> Rule {
    Rule {
        pattern: Pattern::Exact(name),
        layer,
        defers: false,
    }
}

const fn prefix(name: &'static str, layer: Layer) -> Rule {
    Rule {
        pattern: Pattern::Prefix(name),
        layer,
        defers: false,
    }
}

const fn helper(pattern: Pattern, layer: Layer) -> Rule {
    Rule {
        pattern,
        layer,
        defers: true,
    }
}

use Layer::*;
use Pattern::{Exact as E, Prefix as P};

/// The rules, most specific first (the first match wins).
pub const RULES: &[Rule] = &[
    // Helpers whose callers decide.
    helper(E("memcpy"), Copy),
    helper(E("__memcpy"), Copy),
    helper(E("memcpy_orig"), Copy),
    helper(E("memmove"), Copy),
    helper(E("__memmove"), Copy),
    helper(E("rep_movs_alternative"), Copy),
    helper(E("copy_user_generic"), Copy),
    helper(E("_copy_to_iter"), Copy),
    helper(E("_copy_from_iter"), Copy),
    helper(E("copy_page_to_iter"), Copy),
    helper(E("copy_page_from_iter"), Copy),
    helper(E("memset"), Memory),
    helper(E("__memset"), Memory),
    helper(P("_raw_spin_"), Scheduler),
    helper(P("_raw_read_"), Scheduler),
    helper(P("_raw_write_"), Scheduler),
    helper(P("native_queued_spin_lock"), Scheduler),
    helper(P("queued_spin_lock"), Scheduler),
    helper(P("__pv_queued_spin"), Scheduler),
    helper(P("__raw_callee_save___pv_queued_spin"), Scheduler),
    helper(P("__rcu_read_"), Scheduler),
    // List integrity checks: their caller's.
    helper(P("__list_"), Memory),
    // Retpoline thunks: an indirect call of whoever calls them.
    helper(P("__x86_indirect_thunk"), Syscall),
    // Clock reads (TCP's timestamps, the scheduler's accounting).
    helper(E("read_tsc"), Interrupt),
    helper(P("ktime_get"), Interrupt),
    // Hardened usercopy's checks of a copy's bounds.
    helper(E("__check_object_size"), Copy),
    helper(E("check_heap_object"), Copy),
    helper(E("is_vmalloc_addr"), Copy),
    helper(E("__virt_addr_valid"), Copy),
    helper(P("rcu_read_"), Scheduler),
    helper(P("__local_bh_enable"), Interrupt),
    helper(E("local_bh_enable"), Interrupt),
    // Copies that are the data path's own.
    exact("skb_copy_datagram_iter", Copy),
    exact("__skb_datagram_iter", Copy),
    exact("simple_copy_to_iter", Copy),
    exact("skb_do_copy_data_nocache", Copy),
    exact("tcp_recvmsg_locked", Tcp),
    // The kernel's ciphers (kTLS, IPsec): AES-NI and its GCM, ChaCha20
    // and Poly1305, and the crypto API's dispatch.
    prefix("aesni_", Encryption),
    prefix("aes_gcm_", Encryption),
    prefix("gcm_", Encryption),
    prefix("chacha", Encryption),
    prefix("poly1305", Encryption),
    prefix("crypto_aead", Encryption),
    prefix("tls_sw_", Encryption),
    // Checksums.
    prefix("csum_", Checksum),
    prefix("__skb_checksum", Checksum),
    exact("skb_checksum", Checksum),
    exact("do_csum", Checksum),
    exact("ip_fast_csum", Checksum),
    exact("ip_compute_csum", Checksum),
    prefix("skb_csum", Checksum),
    // TCP.
    prefix("tcp_", Tcp),
    prefix("__tcp_", Tcp),
    prefix("tcp4_", Tcp),
    prefix("inet_csk_", Tcp),
    prefix("bictcp_", Tcp),
    prefix("cubictcp_", Tcp),
    prefix("bbr_", Tcp),
    prefix("__inet_lookup", Tcp),
    // IP.
    prefix("ip_", Ip),
    prefix("__ip_", Ip),
    prefix("ipv4_", Ip),
    prefix("fib_", Ip),
    prefix("nf_", Ip),
    prefix("icmp_", Ip),
    prefix("raw_v4_", Ip),
    prefix("dst_", Ip),
    // Link, devices and queueing.
    exact("loopback_xmit", Link),
    prefix("veth_", Link),
    prefix("tun_", Link),
    prefix("__tun_", Link),
    prefix("dev_", Link),
    prefix("__dev_", Link),
    prefix("netif_", Link),
    prefix("__netif_", Link),
    prefix("napi_", Link),
    prefix("__napi_", Link),
    exact("process_backlog", Link),
    prefix("sch_", Link),
    prefix("__qdisc_", Link),
    prefix("qdisc_", Link),
    prefix("pfifo_", Link),
    prefix("tbf_", Link),
    prefix("fq_codel_", Link),
    prefix("neigh_", Link),
    prefix("__neigh_", Link),
    exact("eth_type_trans", Link),
    prefix("validate_xmit_", Link),
    // sk_buff allocation and freeing, before the socket layer's skb_*.
    exact("skb_release_data", Memory),
    exact("skb_free_head", Memory),
    exact("__kfree_skb", Memory),
    exact("consume_skb", Memory),
    exact("skb_release_head_state", Memory),
    // Socket layer.
    prefix("sock_", Socket),
    prefix("__sock_", Socket),
    prefix("sk_", Socket),
    prefix("__sk_", Socket),
    prefix("inet_", Socket),
    prefix("__sys_send", Socket),
    prefix("__sys_recv", Socket),
    prefix("__x64_sys_send", Socket),
    prefix("__x64_sys_recv", Socket),
    exact("release_sock", Socket),
    prefix("lock_sock", Socket),
    exact("__release_sock", Socket),
    prefix("skb_", Socket),
    prefix("__skb_", Socket),
    prefix("ep_", Socket),
    prefix("do_epoll_", Socket),
    // Memory.
    prefix("kmem_cache_", Memory),
    // Mapping and unmapping (a process starting or ending), memory
    // cgroups, DAMON's sampling of memory.
    prefix("unmap_", Memory),
    prefix("zap_", Memory),
    exact("copy_page_range", Memory),
    prefix("__do_fault", Memory),
    prefix("do_fault", Memory),
    prefix("next_uptodate", Memory),
    prefix("filemap_", Memory),
    prefix("memcg", Memory),
    prefix("mem_cgroup", Memory),
    prefix("damon_", Memory),
    prefix("__folio", Memory),
    prefix("folio_", Memory),
    prefix("__alloc_frozen_pages", Memory),
    prefix("__free_frozen_pages", Memory),
    prefix("__kmem_cache_", Memory),
    prefix("kmalloc", Memory),
    prefix("__kmalloc", Memory),
    exact("kfree", Memory),
    prefix("kfree_", Memory),
    prefix("__slab_", Memory),
    prefix("___slab_", Memory),
    prefix("slab_", Memory),
    prefix("__alloc_pages", Memory),
    prefix("alloc_pages", Memory),
    prefix("free_unref_page", Memory),
    prefix("__free_pages", Memory),
    prefix("get_page_from_freelist", Memory),
    exact("__alloc_skb", Memory),
    exact("kfree_skb_reason", Memory),
    prefix("page_", Memory),
    prefix("__page_", Memory),
    exact("clear_page_erms", Memory),
    prefix("handle_mm_fault", Memory),
    prefix("__handle_mm_fault", Memory),
    exact("exc_page_fault", Memory),
    exact("do_user_addr_fault", Memory),
    prefix("asm_exc_page_fault", Memory),
    // Scheduler and wake-ups.
    exact("schedule", Scheduler),
    prefix("__schedule", Scheduler),
    prefix("schedule_", Scheduler),
    exact("try_to_wake_up", Scheduler),
    prefix("ttwu_", Scheduler),
    prefix("__wake_up", Scheduler),
    prefix("wake_up_", Scheduler),
    prefix("autoremove_wake_function", Scheduler),
    prefix("pick_next_", Scheduler),
    prefix("enqueue_", Scheduler),
    prefix("dequeue_", Scheduler),
    prefix("update_curr", Scheduler),
    prefix("update_load_avg", Scheduler),
    prefix("finish_task_switch", Scheduler),
    prefix("__switch_to", Scheduler),
    prefix("switch_mm", Scheduler),
    prefix("psi_", Scheduler),
    prefix("select_task_rq", Scheduler),
    prefix("set_next_entity", Scheduler),
    prefix("put_prev_", Scheduler),
    prefix("futex_", Scheduler),
    // Interrupts, softirqs, timers.
    prefix("__do_softirq", Interrupt),
    exact("handle_softirqs", Interrupt),
    prefix("do_softirq", Interrupt),
    exact("net_rx_action", Interrupt),
    prefix("irq_exit", Interrupt),
    prefix("__irq_exit", Interrupt),
    prefix("asm_sysvec_", Interrupt),
    prefix("sysvec_", Interrupt),
    prefix("__sysvec_", Interrupt),
    prefix("hrtimer_", Interrupt),
    prefix("__hrtimer_", Interrupt),
    prefix("tick_", Interrupt),
    prefix("handle_irq", Interrupt),
    prefix("irq_", Interrupt),
    // Idle.
    exact("default_idle", Idle),
    exact("default_idle_call", Idle),
    exact("do_idle", Idle),
    exact("pv_native_safe_halt", Idle),
    exact("native_safe_halt", Idle),
    prefix("cpuidle_", Idle),
    prefix("acpi_idle", Idle),
    prefix("intel_idle", Idle),
    exact("poll_idle", Idle),
    exact("cpu_startup_entry", Idle),
    exact("arch_cpu_idle", Idle),
    // System-call entry and exit, and the VFS hop to a socket.
    prefix("entry_SYSCALL", Syscall),
    exact("do_syscall_64", Syscall),
    prefix("syscall_", Syscall),
    prefix("exit_to_user_mode", Syscall),
    prefix("__x64_sys_", Syscall),
    prefix("ksys_", Syscall),
    prefix("vfs_", Syscall),
    prefix("__fget", Syscall),
    prefix("fdget", Syscall),
    prefix("__fdget", Syscall),
    prefix("fput", Syscall),
    prefix("rw_verify_area", Syscall),
    // The security hooks every read, write and sendmsg passes.
    prefix("security_", Syscall),
];

/// Whether a function of netlab's own binary is a cipher's: ring's
/// assembly and C (`ring_core_0_17_14__aes_gcm_enc_update_vaes_avx2`,
/// `..._chacha20_poly1305_seal`) and its Rust AEAD code (`ring::aead::`).
pub fn is_user_crypto(function: &str) -> bool {
    function.starts_with("ring_core_")
        || function.starts_with("ring::aead")
        || function.starts_with("<ring::aead")
}

/// A name without the compiler's clone suffixes.
pub fn base_name(symbol: &str) -> &str {
    symbol.split_once('.').map_or(symbol, |(base, _)| base)
}

impl Rule {
    fn matches(&self, name: &str) -> bool {
        match self.pattern {
            Pattern::Exact(exact) => name == exact,
            Pattern::Prefix(prefix) => name.starts_with(prefix),
        }
    }
}

/// The first rule that matches a kernel function.
pub fn rule_for(symbol: &str) -> Option<&'static Rule> {
    let name = base_name(symbol);
    RULES.iter().find(|rule| rule.matches(name))
}

/// One frame of a sampled chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Kernel(&'a str),
    /// A user-space frame: whether it is netlab's own code, and its
    /// function where netlab's symbols name it.
    User {
        netlab: bool,
        function: Option<&'a str>,
    },
}

/// The layer of one sample, its chain leaf first.
pub fn classify(chain: &[Frame]) -> Layer {
    let Some(leaf) = chain.first() else {
        return Unclassified;
    };
    let leaf_rule = match leaf {
        Frame::User {
            netlab: true,
            function: Some(f),
        } if is_user_crypto(f) => return Encryption,
        Frame::User { netlab: true, .. } => return Netlab,
        Frame::User { netlab: false, .. } => return OtherUser,
        Frame::Kernel(symbol) => match rule_for(symbol) {
            Some(rule) => rule,
            None => return Unclassified,
        },
    };
    if !leaf_rule.defers {
        return leaf_rule.layer;
    }
    let callers = &chain[1..];
    // A copy under a driver is the driver's; under a checksum-and-copy, the checksum's.
    if leaf_rule.layer == Copy {
        for frame in callers {
            if let Frame::Kernel(symbol) = frame
                && let Some(rule) = rule_for(symbol)
                && !rule.defers
                && matches!(rule.layer, Link | Checksum)
                && (base_name(symbol).starts_with("tun_")
                    || base_name(symbol).starts_with("veth_")
                    || rule.layer == Checksum)
            {
                return rule.layer;
            }
        }
    }
    for frame in callers {
        match frame {
            Frame::Kernel(symbol) => {
                if let Some(rule) = rule_for(symbol)
                    && !rule.defers
                {
                    // A copy called from the syscall or socket path is the
                    // user<->kernel copy itself.
                    return if leaf_rule.layer == Copy
                        && matches!(rule.layer, Socket | Syscall | Tcp)
                    {
                        Copy
                    } else {
                        rule.layer
                    };
                }
            }
            Frame::User { .. } => break,
        }
    }
    leaf_rule.layer
}

/// Counts chains (leaf first) by layer.
pub fn table<'a>(chains: impl IntoIterator<Item = &'a [Frame<'a>]>) -> LayerTable {
    let mut counts: BTreeMap<Layer, u64> = BTreeMap::new();
    let mut unknown: BTreeMap<String, u64> = BTreeMap::new();
    for chain in chains {
        let layer = classify(chain);
        *counts.entry(layer).or_default() += 1;
        if layer == Unclassified
            && let Some(Frame::Kernel(leaf)) = chain.first()
        {
            *unknown.entry(base_name(leaf).to_string()).or_default() += 1;
        }
    }
    of_counts(counts, unknown)
}

/// The busy samples as folded stacks for a flame graph: `comm;root;...;leaf`
/// with their counts, most sampled first. Idle samples are left out; a
/// user frame is netlab's function where its symbols name it, else
/// `[user]` (user stacks are not unwound: no frame pointers). Beyond `max_stacks`
/// distinct stacks the rest are counted as `[rarer stacks]`, so the counts
/// still sum to the busy samples.
pub fn folded<'a>(
    samples: impl IntoIterator<Item = (&'a str, &'a [Frame<'a>])>,
    max_stacks: usize,
) -> Vec<(String, u64)> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for (comm, chain) in samples {
        if classify(chain) == Idle {
            continue;
        }
        // ';' separates frames and ' ' the count in the folded format.
        let mut stack: String = comm
            .chars()
            .map(|c| {
                if c == ';' || c.is_whitespace() {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        for frame in chain.iter().rev() {
            stack.push(';');
            stack.push_str(match frame {
                Frame::Kernel(symbol) => base_name(symbol),
                Frame::User { function, .. } => function.unwrap_or("[user]"),
            });
        }
        *counts.entry(stack).or_default() += 1;
    }
    let mut stacks: Vec<(String, u64)> = counts.into_iter().collect();
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    if stacks.len() > max_stacks {
        let rest: u64 = stacks
            .drain(max_stacks.saturating_sub(1)..)
            .map(|s| s.1)
            .sum();
        stacks.push(("[rarer stacks]".to_string(), rest));
    }
    stacks
}

/// Busy CPU per packet by layer, µs: each busy layer's samples as CPU time
/// (one sample is 1/`frequency_hz` s of one CPU) over `packets`, largest
/// first; `None` without packets.
pub fn per_packet_us(
    table: &LayerTable,
    frequency_hz: u64,
    packets: u64,
) -> Option<Vec<(Layer, f64)>> {
    if packets == 0 || frequency_hz == 0 {
        return None;
    }
    let us_per_sample = 1e6 / frequency_hz as f64;
    Some(
        table
            .shares
            .iter()
            .map(|s| (s.layer, s.samples as f64 * us_per_sample / packets as f64))
            .collect(),
    )
}

/// Several tables as one (the cells of a run): counts summed, shares and
/// intervals recomputed. Each table keeps only its top unclassified
/// leaves, so the merged list is of those.
pub fn merge<'a>(tables: impl IntoIterator<Item = &'a LayerTable>) -> LayerTable {
    let mut counts: BTreeMap<Layer, u64> = BTreeMap::new();
    let mut unknown: BTreeMap<String, u64> = BTreeMap::new();
    for t in tables {
        *counts.entry(Idle).or_default() += t.idle;
        for share in &t.shares {
            *counts.entry(share.layer).or_default() += share.samples;
        }
        for (name, n) in &t.unclassified {
            *unknown.entry(name.clone()).or_default() += n;
        }
    }
    of_counts(counts, unknown)
}

/// The table of samples counted by layer (idle among them) and of the
/// unclassified leaves by name.
fn of_counts(mut counts: BTreeMap<Layer, u64>, unknown: BTreeMap<String, u64>) -> LayerTable {
    let samples: u64 = counts.values().sum();
    let idle = counts.remove(&Idle).unwrap_or(0);
    let busy = (samples - idle).max(1) as f64;
    let mut shares: Vec<LayerShare> = counts
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(layer, n)| {
            let p = n as f64 / busy;
            LayerShare {
                layer,
                samples: n,
                share: p,
                error: 1.96 * (p * (1.0 - p) / busy).sqrt(),
            }
        })
        .collect();
    shares.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.layer.cmp(&b.layer)));
    let mut unclassified: Vec<(String, u64)> = unknown.into_iter().collect();
    unclassified.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    unclassified.truncate(10);
    LayerTable {
        samples,
        idle,
        shares,
        unclassified,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(names: &[&'static str]) -> Vec<Frame<'static>> {
        names.iter().map(|n| Frame::Kernel(n)).collect()
    }

    #[test]
    fn folded_stacks_run_root_to_leaf_without_idle_and_keep_every_busy_sample() {
        let send = k(&["_copy_from_iter", "tcp_sendmsg_locked", "tcp_sendmsg"]);
        let ack = k(&["tcp_ack.cold", "tcp_rcv_established"]);
        let idle = k(&["pv_native_safe_halt", "default_idle", "do_idle"]);
        let user = [Frame::User {
            netlab: true,
            function: None,
        }];
        let samples = [
            ("netlab", &send[..]),
            ("netlab", &send[..]),
            ("swapper/1", &idle[..]),
            ("netlab", &user[..]),
            ("ksoftirqd 0", &ack[..]),
        ];
        assert_eq!(
            folded(samples, 10),
            vec![
                (
                    "netlab;tcp_sendmsg;tcp_sendmsg_locked;_copy_from_iter".to_string(),
                    2
                ),
                ("ksoftirqd_0;tcp_rcv_established;tcp_ack".to_string(), 1),
                ("netlab;[user]".to_string(), 1),
            ]
        );
        // Capped: the rest are one stack, and the counts still sum.
        let capped = folded(samples, 2);
        assert_eq!(capped.len(), 2);
        assert_eq!(capped[1], ("[rarer stacks]".to_string(), 2));
        assert_eq!(capped.iter().map(|s| s.1).sum::<u64>(), 4);
    }

    /// Every kernel function the tests below name, so that a test on this
    /// machine can check they are this kernel's real symbols.
    const NAMED: &[&str] = &[
        "tcp_sendmsg",
        "tcp_sendmsg_locked",
        "tcp_write_xmit",
        "__tcp_transmit_skb",
        "tcp_v4_rcv",
        "tcp_rcv_established",
        "tcp_ack",
        "ip_queue_xmit",
        "__ip_queue_xmit",
        "ip_finish_output2",
        "ip_rcv",
        "ip_local_deliver_finish",
        "loopback_xmit",
        "veth_xmit",
        "tun_get_user",
        "__dev_queue_xmit",
        "dev_hard_start_xmit",
        "process_backlog",
        "net_rx_action",
        "handle_softirqs",
        "rep_movs_alternative",
        "_copy_from_iter",
        "_copy_to_iter",
        "skb_copy_datagram_iter",
        "csum_partial",
        "csum_partial_copy_generic",
        "sock_sendmsg",
        "__sys_sendto",
        "sock_write_iter",
        "entry_SYSCALL_64",
        "do_syscall_64",
        "__x64_sys_write",
        "ksys_write",
        "vfs_write",
        "__alloc_skb",
        "kfree",
        "skb_release_data",
        "__schedule",
        "schedule",
        "try_to_wake_up",
        "default_idle",
        "do_idle",
        "pv_native_safe_halt",
        "memcpy",
        "memset",
        "_raw_spin_lock_bh",
        "_raw_spin_unlock_irqrestore",
        "release_sock",
        "sk_stream_wait_memory",
        "sock_def_readable",
        "__wake_up_sync_key",
        "ep_poll_callback",
        "asm_sysvec_apic_timer_interrupt",
        "tbf_enqueue",
        "pfifo_fast_dequeue",
        "__qdisc_run",
        "tcp_recvmsg",
        "__pv_queued_spin_lock_slowpath",
        "read_tsc",
        "ktime_get",
        "__check_object_size",
        "is_vmalloc_addr",
        "__virt_addr_valid",
        "security_file_permission",
        "security_socket_sendmsg",
        "__folio_put",
        "__x86_indirect_thunk_rax",
        "__free_frozen_pages",
        "unmap_page_range",
        "copy_page_range",
        "__do_fault",
        "next_uptodate_folio",
        "memcg1_commit_charge",
        "damon_pa_batch_lock",
        "__list_del_entry_valid_or_report",
        "filemap_map_pages",
    ];

    #[test]
    fn each_layer_has_its_functions() {
        for (name, layer) in [
            ("tcp_sendmsg_locked", Tcp),
            ("tcp_v4_rcv", Tcp),
            ("__tcp_transmit_skb", Tcp),
            ("ip_finish_output2", Ip),
            ("ip_rcv", Ip),
            ("loopback_xmit", Link),
            ("veth_xmit", Link),
            ("tbf_enqueue", Link),
            ("pfifo_fast_dequeue", Link),
            ("__qdisc_run", Link),
            ("process_backlog", Link),
            ("csum_partial", Checksum),
            ("csum_partial_copy_generic", Checksum),
            ("skb_copy_datagram_iter", Copy),
            ("sock_sendmsg", Socket),
            ("__sys_sendto", Socket),
            ("sock_def_readable", Socket),
            ("ep_poll_callback", Socket),
            ("entry_SYSCALL_64", Syscall),
            ("do_syscall_64", Syscall),
            ("ksys_write", Syscall),
            ("__alloc_skb", Memory),
            ("kfree", Memory),
            ("__schedule", Scheduler),
            ("try_to_wake_up", Scheduler),
            ("net_rx_action", Interrupt),
            ("asm_sysvec_apic_timer_interrupt", Interrupt),
            ("pv_native_safe_halt", Idle),
            ("do_idle", Idle),
            ("security_socket_sendmsg", Syscall),
            ("security_file_permission", Syscall),
            ("__folio_put", Memory),
            ("__free_frozen_pages", Memory),
            ("unmap_page_range", Memory),
            ("copy_page_range", Memory),
            ("__do_fault", Memory),
            ("next_uptodate_folio", Memory),
            ("memcg1_commit_charge", Memory),
            ("damon_pa_batch_lock", Memory),
        ] {
            assert_eq!(classify(&k(&[name])), layer, "{name}");
        }
        // skb_release_data frees: memory, though named like the socket layer's skb_*.
        assert_eq!(classify(&k(&["skb_release_data"])), Memory);
        assert_eq!(classify(&k(&["skb_copy_datagram_iter"])), Copy);
    }

    #[test]
    fn a_helper_takes_its_callers_layer() {
        // A copy from the user's buffer inside tcp_sendmsg: the user<->kernel copy.
        assert_eq!(
            classify(&k(&[
                "rep_movs_alternative",
                "_copy_from_iter",
                "tcp_sendmsg_locked",
                "tcp_sendmsg"
            ])),
            Copy
        );
        // The same copy routine under the tun driver is the driver's.
        assert_eq!(
            classify(&k(&[
                "rep_movs_alternative",
                "_copy_from_iter",
                "tun_get_user"
            ])),
            Link
        );
        // Under a checksum-and-copy, the checksum's.
        assert_eq!(
            classify(&k(&["memcpy", "csum_partial_copy_generic", "tcp_sendmsg"])),
            Checksum
        );
        // A lock taken by TCP is TCP's; by the scheduler, the scheduler's.
        assert_eq!(
            classify(&k(&["_raw_spin_lock_bh", "release_sock", "tcp_sendmsg"])),
            Socket
        );
        assert_eq!(
            classify(&k(&["_raw_spin_unlock_irqrestore", "try_to_wake_up"])),
            Scheduler
        );
        // A paravirt lock slow path under TCP is TCP's; a clock read for
        // TCP's timestamps TCP's; a usercopy bounds check under a socket
        // receive is the copy.
        assert_eq!(
            classify(&k(&[
                "__pv_queued_spin_lock_slowpath",
                "_raw_spin_lock_bh",
                "tcp_write_xmit"
            ])),
            Tcp
        );
        assert_eq!(classify(&k(&["read_tsc", "ktime_get", "tcp_ack"])), Tcp);
        assert_eq!(
            classify(&k(&[
                "__virt_addr_valid",
                "__check_object_size",
                "skb_copy_datagram_iter"
            ])),
            Copy
        );
        assert_eq!(
            classify(&k(&[
                "is_vmalloc_addr",
                "__check_object_size",
                "_copy_to_iter",
                "tcp_recvmsg"
            ])),
            Copy
        );
        // A list check inside the socket layer is the socket layer's.
        assert_eq!(
            classify(&k(&[
                "__list_del_entry_valid_or_report",
                "sock_def_readable"
            ])),
            Socket
        );
        // A retpoline thunk is its caller's.
        assert_eq!(
            classify(&k(&["__x86_indirect_thunk_rax", "tcp_sendmsg_locked"])),
            Tcp
        );
        // A helper with no deciding caller keeps its own layer.
        assert_eq!(classify(&k(&["memset"])), Memory);
        // Compiler suffixes are ignored.
        assert_eq!(classify(&k(&["tcp_ack.isra.0"])), Tcp);
    }

    #[test]
    fn a_table_counts_busy_samples_by_layer_with_their_error() {
        let chains: Vec<Vec<Frame>> = vec![
            k(&["tcp_sendmsg_locked"]),
            k(&["tcp_ack"]),
            k(&[
                "rep_movs_alternative",
                "_copy_from_iter",
                "tcp_sendmsg_locked",
            ]),
            k(&["pv_native_safe_halt", "default_idle"]),
            k(&["a_mystery"]),
            vec![Frame::User {
                netlab: true,
                function: None,
            }],
        ];
        let t = table(chains.iter().map(|c| c.as_slice()));
        assert_eq!((t.samples, t.idle), (6, 1));
        let of = |layer| t.shares.iter().find(|s| s.layer == layer).unwrap();
        assert_eq!(of(Tcp).samples, 2);
        assert!((of(Tcp).share - 0.4).abs() < 1e-12);
        assert!((of(Tcp).error - 1.96 * (0.4f64 * 0.6 / 5.0).sqrt()).abs() < 1e-12);
        assert_eq!(t.shares[0].layer, Tcp, "largest first");
        assert_eq!(of(Copy).samples, 1);
        assert_eq!(t.unclassified, [("a_mystery".to_string(), 1)]);
        // Two cells' tables merge into one of their summed counts.
        let both = merge([&t, &t]);
        assert_eq!((both.samples, both.idle), (12, 2));
        let tcp = both.shares.iter().find(|s| s.layer == Tcp).unwrap();
        assert_eq!(tcp.samples, 4);
        assert!((tcp.share - 0.4).abs() < 1e-12);
        assert!((tcp.error - 1.96 * (0.4f64 * 0.6 / 10.0).sqrt()).abs() < 1e-12);
        assert_eq!(both.unclassified, [("a_mystery".to_string(), 2)]);
    }

    #[test]
    fn ciphers_are_encryption_in_user_space_and_in_the_kernel() {
        let user = |f| {
            classify(&[Frame::User {
                netlab: true,
                function: Some(f),
            }])
        };
        for f in [
            "ring_core_0_17_14__aes_gcm_enc_update_vaes_avx2",
            "ring_core_0_17_14__gcm_ghash_vpclmulqdq_avx2_1",
            "ring_core_0_17_14__chacha20_poly1305_seal",
            "ring::aead::aes_gcm::seal",
        ] {
            assert_eq!(user(f), Encryption, "{f}");
        }
        // rustls' framing and netlab's own loops stay netlab's.
        assert_eq!(
            user("rustls::msgs::message::outbound::read_opaque_message_header"),
            Netlab
        );
        // Another program's ring is not netlab's encryption.
        assert_eq!(
            classify(&[Frame::User {
                netlab: false,
                function: Some("ring_core_0_17_14__aes_gcm_enc_update_vaes_avx2"),
            }]),
            OtherUser
        );
        for f in [
            "aesni_gcm_enc_update_avx_gen4",
            "gcm_crypt",
            "tls_sw_sendmsg",
        ] {
            assert_eq!(classify(&[Frame::Kernel(f)]), Encryption, "{f}");
        }
    }

    #[test]
    fn user_frames_and_the_unknown() {
        assert_eq!(
            classify(&[Frame::User {
                netlab: true,
                function: None
            }]),
            Netlab
        );
        assert_eq!(
            classify(&[Frame::User {
                netlab: false,
                function: None
            }]),
            OtherUser
        );
        assert_eq!(
            classify(&k(&["some_driver_we_never_heard_of"])),
            Unclassified
        );
        assert_eq!(classify(&[]), Unclassified);
    }

    #[test]
    fn the_names_the_rules_are_tested_on_are_this_kernels() {
        let Ok(table) = crate::measure::kallsyms::Kallsyms::read() else {
            // Addresses hidden (not root): names are still listed, but the
            // parser refuses the table; CI runs as root.
            return;
        };
        let missing: Vec<&&str> = NAMED
            .iter()
            .filter(|n| table.address_of(n).is_none())
            .collect();
        assert!(
            missing.is_empty(),
            "not symbols of this kernel: {missing:?}"
        );
    }
}

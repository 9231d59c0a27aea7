//! `netlab stream --quic` (#65): QUIC by quinn on loopback and between
//! namespaces, beside TCP and TCP+TLS in the same run, and what it refuses.
//! (Its ends against quinn's own client and server: the unit test
//! `endpoint::bulk::tests::quic_ends_interoperate_with_plain_quinn_peers`.)

use serde_json::Value;

fn quic_records(doc: &Value) -> Vec<&Value> {
    doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["params"]["quic"].is_null())
        .collect()
}

#[test(alone)]
fn stream_quic_runs_beside_tcp_and_tls_on_loopback_and_netns() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let doc = crate::common::run_json(&["stream", "--quic", "--bytes", "16M"], &out);
    assert_eq!(
        doc["records"].as_array().unwrap().len(),
        3,
        "QUIC, TCP+TLS and TCP"
    );
    let quic = quic_records(&doc);
    assert_eq!(quic.len(), 1);
    let r = &quic[0]["result"];
    assert!(quic[0]["error"].is_null(), "{}", quic[0]);
    assert_eq!(r["receiver"]["bytes"], 16 << 20);
    assert_eq!(r["receiver"]["verified"], true);
    let q = &r["sender"]["quic"];
    assert_eq!(q["suite"], "TLS13_AES_128_GCM_SHA256", "{q}");
    assert_eq!(q["gso"], true);
    assert!(q["sealed_packets"].as_u64().unwrap() >= (16 << 20) / 1500);
    assert!(q["seal_s"].as_f64().unwrap() > 0.0);
    let names: Vec<&str> = doc["transports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["TCP", "TCP+TLS", "QUIC"]);
    assert!(!r["limits"]["limits"][0]["fix"].as_str().unwrap().is_empty());

    // Between namespaces, both ways, no GSO, ChaCha20-Poly1305.
    let doc = crate::common::run_json(
        &[
            "stream",
            "--quic",
            "--no-gso",
            "--cipher",
            "chacha20-poly1305",
            "--bidir",
            "--bytes",
            "4M",
            "--placement",
            "netns",
        ],
        &out,
    );
    let quic = quic_records(&doc);
    assert_eq!(quic.len(), 1);
    let flows = quic[0]["result"]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "one connection each way");
    for flow in flows {
        assert_eq!(flow["receiver"]["bytes"], 4 << 20);
        assert_eq!(flow["receiver"]["verified"], true);
        let q = &flow["sender"]["quic"];
        assert_eq!(q["suite"], "TLS13_CHACHA20_POLY1305_SHA256");
        assert_eq!(q["udp_sends"], q["datagrams_sent"], "GSO off: {q}");
    }
}

#[test]
fn stream_quic_refuses_tcp_options_in_one_line_each() {
    crate::common::stream_refuses(&[
        ("--quic --udp --rate 10M", "--udp"),
        ("--quic --tls", "--tls"),
        ("--quic --cc reno", "--cc"),
        ("--quic --strategy sendfile", "--strategy"),
        ("--quic --mss 1000", "--mss"),
        ("--quic --interval 1s", "--interval"),
        ("--quic --cipher rc4", "unknown cipher \"rc4\""),
        ("--no-gso", "--quic"),
        ("--cipher aes-256-gcm", "--tls or --quic"),
    ]);
}

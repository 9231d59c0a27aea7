//! The source stacks as models (#66): `netlab stream --stack bsd41`
//! (Berkeley's 1981 TCP/IP: its table beside 004's, today's runs priced on
//! two VAX-11/750s) and `netlab output --stack vms44` (the 1987 VMS host
//! beside 002), and what each refuses.

#[test]
fn stream_stack_bsd41_prints_004_beside_the_model_and_prices_todays_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let doc = crate::common::run_json(&["stream", "--stack", "bsd41"], &out);
    assert_eq!(doc["stack"], "bsd41");
    let checks = doc["checks"].as_array().unwrap();
    let time = checks
        .iter()
        .find(|c| c["figure"].as_str().unwrap().starts_with("4 MB"))
        .unwrap();
    assert_eq!(time["source"], 28.0);
    assert_eq!(time["reproduces"], true, "{time}");
    assert_eq!(doc["ladder"].as_array().unwrap().len(), 6);
    let constants = doc["constants"].as_array().unwrap();
    let cited = constants.iter().filter(|c| c["cited"] == true).count();
    assert!(
        cited * 2 > constants.len(),
        "cited {cited} of {}",
        constants.len()
    );
    assert!(!out.exists(), "a model records nothing");

    // A real run's counts, priced on the 750s.
    let records = dir.path().join("runs.jsonl");
    crate::common::succeeds(
        crate::common::netlab()
            .args(["stream", "--bytes", "4M", "--record", "1K", "--out"])
            .arg(&records),
    );
    let text = crate::common::netlab()
        .args(["stream", "--stack", "bsd41", "--counts-from"])
        .arg(&records)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&text.stdout);
    assert!(text.status.success(), "{said}");
    assert!(
        said.contains("loopback records of 1024 B, write -> read"),
        "{said}"
    );
    assert!(said.contains("ACK coalescing"), "{said}");
    assert!(said.contains("why step 4 parts"), "{said}");
}

#[test]
fn stream_stack_bsd41_refuses_what_would_measure_in_one_line_each() {
    crate::common::stream_refuses(&[
        ("--stack bsd41 --placement netns", "runs no endpoints"),
        ("--stack bsd41 --tls", "runs no endpoints"),
        ("--counts-from x.jsonl", "add --stack bsd41"),
        ("--stack vms", "invalid value 'vms'"),
    ]);
    // --bytes (which stream_refuses adds) is refused too; an empty file
    // carries no counts.
    // The error `netlab stream --stack bsd41 --counts-from FILE` gives
    // for a file holding `text`.
    let dir = tempfile::tempdir().unwrap();
    let refusal = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let run = crate::common::netlab()
            .args(["stream", "--stack", "bsd41", "--counts-from"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!run.status.success());
        String::from_utf8_lossy(&run.stderr).into_owned()
    };
    let err = refusal("empty.jsonl", "");
    assert!(err.contains("carries its work a KB"), "{err}");
    // A file of lines that are not stream records names how many and why
    // the first was not read.
    let err = refusal("garbage.jsonl", "{not json\n{\"schema\": 1}\n");
    assert!(
        err.contains("2 lines did not read as this experiment's records (the first: line 1:"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `netlab output --stack vms44` (#66): the 1987 VMS host as a model,
/// 002's figures beside it, and what it refuses.
#[test]
fn output_stack_vms44_prints_002_beside_the_model_and_refuses_measuring_options() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let doc = crate::common::run_json(&["output", "--stack", "vms44"], &out);
    assert_eq!(doc["stack"], "vms44");
    let checks = doc["checks"].as_array().unwrap();
    let kernel = checks
        .iter()
        .find(|c| c["figure"].as_str().unwrap().contains("kernel's share"))
        .unwrap();
    assert_eq!(kernel["source"], 20.0);
    assert_eq!(kernel["fitted"], false);
    assert!(doc["lat"]["server"] == 0.0, "{}", doc["lat"]);
    assert!(!out.exists(), "a model records nothing");
    // A real run's counts, priced on the 750.
    let records = dir.path().join("runs.jsonl");
    crate::common::succeeds(
        crate::common::netlab()
            .args(["output", "--relay", "epoll", "--protocol", "telnet"])
            .args(["--size", "64K"])
            // Paced to most of a second: perf counts the server's system
            // calls over a window that long (a few milliseconds is too
            // short).
            .args(["--baud", "1000000", "--out"])
            .arg(&records),
    );
    let doc = crate::common::run_json(
        &[
            "output",
            "--stack",
            "vms44",
            "--counts-from",
            records.to_str().unwrap(),
        ],
        &out,
    );
    let today = doc["today"].as_array().unwrap();
    assert_eq!(today.len(), 1, "{doc}");
    // A torn line beside the record: the record is used and the line is
    // named in a warning.
    let mut torn = std::fs::read_to_string(&records).unwrap();
    torn.push_str("{\"torn\n");
    let partial = dir.path().join("partial.jsonl");
    std::fs::write(&partial, torn).unwrap();
    let run = crate::common::succeeds(
        crate::common::netlab()
            .args(["output", "--stack", "vms44", "--json", "--counts-from"])
            .arg(&partial),
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("warning: --counts-from") && err.contains("1 line did not read"),
        "{err}"
    );
    assert_eq!(today[0]["label"], "epoll over telnet (loopback)");
    assert!(today[0]["counts"]["packets"].as_f64().unwrap() > 0.0);
    let run = crate::common::netlab()
        .args(["output", "--stack", "vms44", "--baud", "9600"])
        .output()
        .unwrap();
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("runs no endpoints"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

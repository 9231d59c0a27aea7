//! What an agent's probe socket reads from anyone: any bytes must be
//! refused or read, never panic; and any body sealed with the key (a key
//! holder's bug) must be refused or read back exactly as it was written.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netlab::wire::probe::{ProbeKey, emit, parse, seal};

fuzz_target!(|data: &[u8]| {
    let key = ProbeKey::derive(&[9; 32]);
    let _ = parse(data, &key);
    let sealed = seal(data.to_vec(), &key);
    if let Ok(probe) = parse(&sealed, &key) {
        assert_eq!(
            emit(&probe, &key).unwrap(),
            sealed,
            "a probe read differs from the one written"
        );
    }
});

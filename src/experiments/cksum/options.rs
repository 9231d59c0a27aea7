//! `netlab cksum`: the Internet checksum and copy costs per KB, against the
//! machine's limits and Van Jacobson's 1988 figures.

use crate::checksum::aead::Cipher;
use crate::experiments::cksum::cell::{CksumMeasure, CksumPlan};
use crate::options::Output;
use crate::options::run::RunOutcome;
use crate::units::parse_size;
use clap::Args;

/// A list of ciphers (`--ciphers`).
#[derive(Debug, Clone)]
pub struct Ciphers(pub Vec<Cipher>);

/// `aes-128-gcm,chacha20-poly1305`, or `none`; an unknown name refused.
pub fn parse_ciphers(text: &str) -> Result<Ciphers, String> {
    if text.trim() == "none" {
        return Ok(Ciphers(Vec::new()));
    }
    let mut out: Vec<Cipher> = Vec::new();
    for name in text.split(',') {
        let c: Cipher = name.parse()?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(Ciphers(out))
}

#[derive(Debug, Args)]
pub struct CksumArgs {
    /// Buffer sizes (a list; 4M, 1408, ...).
    #[arg(long, default_value = "64,1408,4096,65536,1M,64M")]
    pub sizes: String,
    /// Timed batches per variant (the median is reported, with min and max).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=super::bounds::MAX_BATCHES as i64))]
    pub batches: u32,
    /// Pool the cold runs walk through; should exceed the last-level cache.
    #[arg(long, default_value = "512M", value_parser = parse_size)]
    pub cold_pool: u64,
    /// AEADs timed (sealing and opening in place) beside the checksum and
    /// the copy: aes-128-gcm, aes-256-gcm, chacha20-poly1305, or none.
    #[arg(long, default_value = "aes-128-gcm,aes-256-gcm,chacha20-poly1305", value_parser = parse_ciphers)]
    pub ciphers: Ciphers,
    /// Also run `openssl speed -evp -aead` for the same ciphers and sizes on
    /// the measuring host (1 s per cipher, direction and size), beside.
    #[arg(long)]
    pub openssl: bool,
    #[command(flatten)]
    pub remote: crate::options::placement::RemoteArgs,
    #[command(flatten)]
    pub run: crate::options::run::RunOptions,
}

impl CksumArgs {
    /// Whether it prints JSON (so an error is printed as JSON too).
    pub fn json(&self) -> bool {
        self.run.json
    }
}

pub fn run(args: CksumArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.remote.from.is_some() {
        anyhow::bail!("cksum runs on one host: name it with --to");
    }
    let on = args.remote.ends("cksum")?.map(|(_, to)| to);
    if args.openssl && args.ciphers.0.is_empty() {
        anyhow::bail!("--openssl times ciphers: name them with --ciphers, not none");
    }
    let plan = CksumPlan {
        ciphers: args.ciphers.0.clone(),
        openssl: args.openssl,
        ..CksumPlan::with_sizes(&args.sizes, args.batches, args.cold_pool)?
    };
    let specs = plan.specs()?;
    args.run.measure(out, |runner| {
        let caches = runner.host().caches.clone();
        let records = runner.grid(&mut CksumMeasure { on }, &specs)?;
        let doc = crate::experiments::cksum::report::doc(&caches, &records);
        let text = format!(
            "netlab cksum: ns per KB, median of {} batches\n{}",
            args.batches,
            crate::experiments::cksum::report::table(&records)
        );
        Ok(RunOutcome::grid(records, doc, text))
    })
}

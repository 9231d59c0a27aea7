//! A CPU budget for the serving side of a cell (`--host-cpu PERCENT`): a
//! cgroup of the CPU controller that netlab creates, moves a process into
//! (its children follow), and removes.
//!
//! cgroup v2 (`cpu.max` = "QUOTA PERIOD") where the unified hierarchy has
//! the cpu controller; otherwise v1 (`cpu.cfs_quota_us` and
//! `cpu.cfs_period_us` under the cpu hierarchy), as on this machine. The
//! scheduler then runs the group's tasks for at most QUOTA µs of every
//! PERIOD µs, summed over all CPUs: 25% is a quarter of one CPU, 150% one
//! and a half. Groups are named `netlab-PID-N` after the process that made
//! them; `netlab testbed clean` removes those whose process is gone.

/// A budget derived from a historical host (`testbed::cgroup::HostPreset`):
/// the CPU a small TCP packet cost there and here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PresetBudget {
    /// `sun3`, `vax750`.
    pub name: String,
    /// This host's CPU per small TCP packet, µs (measured before the run):
    /// the median of the calibration's batches.
    pub packet_us_here: f64,
    /// Its cheapest and dearest batch, µs (older records: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_us_spread: Option<[f64; 2]>,
    /// The 95% interval of the median batch, µs, and the budget's that
    /// follows from it, percent (records before 2026-12-02: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_us_interval: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_interval_pct: Option<[f64; 2]>,
    /// Batches behind the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<usize>,
    /// Which calibration: measured before the run, or stored (its file and
    /// when it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
    /// The historical host's, µs (from the sources).
    pub packet_us_then: f64,
    /// One line: "sun3: 3.06% of one CPU = 22.0 µs per small TCP packet
    /// here / 719 µs on a Sun-3/260 ...".
    pub derivation: String,
}
use super::calibration::Calibrated;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The kernel's default scheduler period (what a budget would get unasked).
pub const PERIOD_US: u64 = 100_000;
/// The kernel's smallest quota and period and longest period
/// (`sched/core.c`: `min_cfs_quota_period` 1 ms, `max_cfs_quota_period`
/// 1 s).
const MIN_QUOTA_US: u64 = 1_000;
const MIN_PERIOD_US: u64 = 1_000;
const MAX_PERIOD_US: u64 = 1_000_000;
/// The smallest budget the kernel can enforce, percent of one CPU.
pub const MIN_PERCENT: f64 = 100.0 * MIN_QUOTA_US as f64 / MAX_PERIOD_US as f64;
/// Groups are named this, then the making process's PID and a count.
pub const PREFIX: &str = "netlab-";

const V2_ROOT: &str = "/sys/fs/cgroup";
const V2_UNIFIED: &str = "/sys/fs/cgroup/unified";
const V1_CPU: &str = "/sys/fs/cgroup/cpu";

/// Why a budget cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "--host-cpu {0}: must be at least 0.1 (the kernel's smallest quota, 1 ms in its longest period, 1 s) and at most {1} (100 per CPU of this host)"
    )]
    Range(f64, f64),
    #[error(
        "no cgroup CPU controller is available here (neither cgroup v2 with the cpu controller nor v1's cpu hierarchy is mounted writable): {0}"
    )]
    NoController(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> BudgetError {
    let what = what.into();
    move |source| BudgetError::Io { what, source }
}

/// Which interface a hierarchy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// The hierarchy where CPU budgets can be made, if any.
fn hierarchy() -> Result<(PathBuf, Version), BudgetError> {
    let has_cpu = |dir: &str| {
        std::fs::read_to_string(Path::new(dir).join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
    };
    for dir in [V2_ROOT, V2_UNIFIED] {
        if has_cpu(dir) {
            return Ok((dir.into(), Version::V2));
        }
    }
    if Path::new(V1_CPU).join("cpu.cfs_quota_us").exists() {
        return Ok((V1_CPU.into(), Version::V1));
    }
    Err(BudgetError::NoController(format!(
        "looked for cpu in {V2_ROOT}/cgroup.controllers, {V2_UNIFIED}/cgroup.controllers and {V1_CPU}/cpu.cfs_quota_us"
    )))
}

/// Where CPU budgets would be made: `cgroup v2 at DIR` or `cgroup v1 at DIR`.
pub fn describe() -> Result<String, BudgetError> {
    let (dir, version) = hierarchy()?;
    Ok(format!(
        "cgroup {} at {}",
        match version {
            Version::V1 => "v1",
            Version::V2 => "v2",
        },
        dir.display()
    ))
}

/// Whether this host can make CPU budgets (and if not, why).
pub fn available() -> Result<(), BudgetError> {
    hierarchy().map(|_| ())
}

/// The most a budget may be on this host: 100 per CPU.
pub fn max_percent() -> f64 {
    100.0 * std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

/// Checks a budget's range before anything is made.
pub fn check(percent: f64) -> Result<(), BudgetError> {
    let max = max_percent();
    if !(percent >= MIN_PERCENT && percent <= max) {
        return Err(BudgetError::Range(percent, max));
    }
    Ok(())
}

/// The quota and period (µs) of a budget of `percent` (checked): the
/// shortest period whose quota is still the kernel's 1 ms minimum (1 ms
/// at 100% and above). A budget runs its server in bursts, up to the
/// quota and then held until the period ends, so a work item that finds
/// the quota spent waits up to a period: with the kernel's default 100 ms,
/// a 3% budget held keystrokes for up to 97 ms, on the very edge of the
/// 100 ms that makes an echo "degraded", and the limit searched under it
/// wandered with each probe. The shortest period makes the budget the
/// slower CPU it stands for (a 3% budget: 1 ms every 33 ms).
pub fn quota_and_period(percent: f64) -> (u64, u64) {
    let period = (MIN_QUOTA_US as f64 * 100.0 / percent)
        .round()
        .clamp(MIN_PERIOD_US as f64, MAX_PERIOD_US as f64) as u64;
    let quota = (percent / 100.0 * period as f64).round() as u64;
    (quota.max(MIN_QUOTA_US), period)
}

/// A 1989-class host for `--host-cpu NAME`: the budget under which this
/// host's CPU cost of a small TCP packet (measured now,
/// [`crate::measure::packet_cost`]) is what the historical host's was.
/// The historical costs come from the sources (`docs/EXPERIMENTS.md`
/// works them through): a packet's fixed cost, because a keystroke is a
/// packet of one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPreset {
    /// The Sun-3/260 (25 MHz 68020, SunOS 3.5) of the 1989 login test.
    Sun3,
    /// A VAX-11/750, the sender of Berkeley's 1981 measurements and the
    /// host of the 1988 VMS terminal test.
    Vax750,
}

impl HostPreset {
    pub const ALL: [HostPreset; 2] = [HostPreset::Sun3, HostPreset::Vax750];

    pub fn name(self) -> &'static str {
        match self {
            HostPreset::Sun3 => "sun3",
            HostPreset::Vax750 => "vax750",
        }
    }

    pub fn parse(name: &str) -> Option<HostPreset> {
        HostPreset::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The historical host's CPU per packet, µs.
    pub fn packet_us(self) -> f64 {
        match self {
            // Van Jacobson 1988 (seed 003): a Sun-3/60's 800 µs fixed
            // cost a packet with the protocol's share before his header
            // prediction (which SunOS 3.5 lacked), less its stalls (idle
            // time, not work), at the 3/260's 25 MHz: the login model's
            // figure, one derivation for both.
            HostPreset::Sun3 => crate::model::sunos35::sunos35_packet_us(),
            // Joy 1981 (seed 004): 4 MB in 1 KB records took 28 s with the
            // 11/750 sender saturated, 6836 µs per packet; checksumming
            // (25% of it) is per-byte, the rest is taken as fixed (it still
            // holds the copy, which the split does not separate, so this
            // errs toward the slower host).
            HostPreset::Vax750 => 28e6 / 4096.0 * 0.75,
        }
    }

    /// The budget, percent of one CPU, for a packet cost of `today_us` here.
    pub fn percent(self, today_us: f64) -> f64 {
        100.0 * today_us / self.packet_us()
    }

    /// The budget for a packet cost of `today_us` here (rounded to a
    /// hundredth of a percent), as records carry it.
    pub fn budget(self, today_us: f64) -> (f64, PresetBudget) {
        let percent = (self.percent(today_us) * 100.0).round() / 100.0;
        let preset = PresetBudget {
            name: self.name().to_string(),
            packet_us_here: today_us,
            packet_us_then: self.packet_us(),
            derivation: self.derivation(today_us),
            ..PresetBudget::default()
        };
        (percent, preset)
    }

    /// The budget on this host from a calibration of its cost of a small
    /// TCP packet, measured now or stored ([`super::calibration`]).
    pub fn budget_calibrated(self, calibrated: &Calibrated) -> (f64, PresetBudget) {
        let cost = &calibrated.cost;
        let (percent, mut preset) = self.budget(cost.us_per_packet);
        preset.packet_us_spread = Some([cost.min_us, cost.max_us]);
        preset.packet_us_interval = calibrated.interval_us;
        preset.budget_interval_pct = calibrated
            .interval_us
            .map(|[lo, hi]| [self.percent(lo), self.percent(hi)]);
        preset.batches = Some(cost.batches_us.len()).filter(|n| *n > 0);
        preset.calibration = Some(calibrated.source.clone());
        let interval = match calibrated.interval_us {
            Some([lo, hi]) => format!(
                "95% interval {lo:.2}-{hi:.2} µs, the budget {:.2}-{:.2}%",
                self.percent(lo),
                self.percent(hi)
            ),
            None => format!("batches {:.1}-{:.1} µs", cost.min_us, cost.max_us),
        };
        preset.derivation = format!("{} ({interval}; {})", preset.derivation, calibrated.source);
        (percent, preset)
    }

    /// One line: the preset, the two costs and the budget they give.
    pub fn derivation(self, today_us: f64) -> String {
        let host = match self {
            HostPreset::Sun3 => {
                "a Sun-3/260 under SunOS 3.5 (VJ 1988 less stalls, scaled to 25 MHz)"
            }
            HostPreset::Vax750 => "a VAX-11/750 (Joy 1981)",
        };
        format!(
            "{}: {:.2}% of one CPU = {today_us:.1} µs per small TCP packet here / {:.0} µs on {host}",
            self.name(),
            self.percent(today_us),
            self.packet_us()
        )
    }
}

/// A CPU budget, removed on drop.
#[derive(Debug)]
pub struct CpuBudget {
    dir: PathBuf,
    parent: PathBuf,
    version: Version,
    pub percent: f64,
}

impl CpuBudget {
    /// Makes a group of `percent` of one CPU.
    pub fn create(percent: f64) -> Result<CpuBudget, BudgetError> {
        let budget = CpuBudget::create_lifted(percent)?;
        budget.apply()?;
        Ok(budget)
    }

    /// Makes the group for a budget of `percent` with no quota yet: what
    /// enters it runs unlimited until [`CpuBudget::apply`] (a login server
    /// whose users log in before their test, as 1989's did).
    pub fn create_lifted(percent: f64) -> Result<CpuBudget, BudgetError> {
        check(percent)?;
        let (root, version) = hierarchy()?;
        static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = root.join(format!("{PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).map_err(io_err(format!(
            "cannot create the cgroup {} (it needs root)",
            dir.display()
        )))?;
        let budget = CpuBudget {
            dir,
            parent: root,
            version,
            percent,
        };
        budget.lift()?;
        Ok(budget)
    }

    /// Writes the quota: from now on the group runs at most `percent` of
    /// one CPU.
    pub fn apply(&self) -> Result<(), BudgetError> {
        let (quota, period) = quota_and_period(self.percent);
        match self.version {
            Version::V2 => self.write("cpu.max", &format!("{quota} {period}")),
            Version::V1 => {
                self.write("cpu.cfs_period_us", &period.to_string())?;
                self.write("cpu.cfs_quota_us", &quota.to_string())
            }
        }
    }

    /// The quota and period as written, µs.
    pub fn quota_and_period(&self) -> (u64, u64) {
        quota_and_period(self.percent)
    }

    fn write(&self, file: &str, value: &str) -> Result<(), BudgetError> {
        let path = self.dir.join(file);
        std::fs::write(&path, value).map_err(io_err(format!(
            "cannot write {value} to {}",
            path.display()
        )))
    }

    /// Moves process `pid` (and the children it starts from now on) into
    /// the budget.
    pub fn enter(&self, pid: u32) -> Result<(), BudgetError> {
        self.write("cgroup.procs", &pid.to_string())
    }

    /// Puts the calling thread in the budget until [`CpuBudget::leave`]:
    /// the threads and processes it starts meanwhile stay in it, the rest
    /// of the process does not (so a serving endpoint's control thread and
    /// window sampler are not starved by the server they measure). cgroup
    /// v1 moves single threads; v2 only whole processes (without threaded
    /// mode), so there the whole process enters and stays.
    pub fn enter_thread(&self) -> Result<(), BudgetError> {
        match self.version {
            // SAFETY: gettid has no preconditions.
            Version::V1 => self.write("tasks", &unsafe { libc::gettid() }.to_string()),
            Version::V2 => self.enter(std::process::id()),
        }
    }

    /// Takes the calling thread back out (cgroup v1; a no-op on v2).
    pub fn leave_thread(&self) -> Result<(), BudgetError> {
        match self.version {
            Version::V1 => {
                let path = self.parent.join("tasks");
                // SAFETY: gettid has no preconditions.
                std::fs::write(&path, unsafe { libc::gettid() }.to_string())
                    .map_err(io_err(format!("cannot write to {}", path.display())))
            }
            Version::V2 => Ok(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Removes the quota (the group stays, with its statistics): for a
    /// teardown after the measurement, which would otherwise run at the
    /// budget's pace and could outlast the controller's patience, leaving
    /// the group behind when the endpoint is killed.
    pub fn lift(&self) -> Result<(), BudgetError> {
        match self.version {
            Version::V2 => self.write("cpu.max", "max"),
            Version::V1 => self.write("cpu.cfs_quota_us", "-1"),
        }
    }

    /// How long the group's tasks were held back by the quota (the
    /// scheduler's `throttled_usec`, or v1's `throttled_time` in ns).
    pub fn throttled(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
        let field = |name: &str| {
            stat.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        field("throttled_usec ")
            .map(Duration::from_micros)
            .or_else(|| field("throttled_time ").map(Duration::from_nanos))
    }
}

impl Drop for CpuBudget {
    /// Moves whatever still runs in the group (this process, if it entered
    /// itself) back to the parent and removes the group.
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(self.parent.join("cgroup.procs"), pid);
        }
        // A task that just exited may hold the group a moment longer.
        let deadline = Instant::now() + Duration::from_secs(2);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Removes the budgets of netlab processes that are gone (`netlab testbed
/// clean`); returns their paths.
pub fn remove_stale() -> Vec<String> {
    let Ok((root, _)) = hierarchy() else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if super::netlab_runs(pid) {
            continue;
        }
        let procs = std::fs::read_to_string(entry.path().join("cgroup.procs")).unwrap_or_default();
        for task in procs.split_whitespace() {
            let _ = std::fs::write(root.join("cgroup.procs"), task);
        }
        if std::fs::remove_dir(entry.path()).is_ok() {
            removed.push(entry.path().display().to_string());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_out_of_range_are_refused_before_anything_is_made() {
        assert!(matches!(check(0.0), Err(BudgetError::Range(..))));
        assert!(matches!(check(-5.0), Err(BudgetError::Range(..))));
        assert!(matches!(check(f64::NAN), Err(BudgetError::Range(..))));
        assert!(matches!(
            check(max_percent() + 1.0),
            Err(BudgetError::Range(..))
        ));
        assert!(check(25.0).is_ok());
        assert!(matches!(check(0.05), Err(BudgetError::Range(..))));
        assert!(check(MIN_PERCENT).is_ok());
    }

    #[test]
    fn a_budget_takes_the_shortest_period_its_minimum_quota_allows() {
        assert_eq!(quota_and_period(25.0), (1_000, 4_000));
        assert_eq!(quota_and_period(1.0), (1_000, PERIOD_US));
        assert_eq!(quota_and_period(0.5), (1_000, 200_000));
        assert_eq!(quota_and_period(0.1), (1_000, 1_000_000));
        assert_eq!(quota_and_period(3.0), (1_000, 33_333));
        // One CPU and more: the kernel's shortest period.
        assert_eq!(quota_and_period(100.0), (1_000, 1_000));
        assert_eq!(quota_and_period(150.0), (1_500, 1_000));
        // The share is kept whichever period applies.
        for percent in [0.1, 0.37, 0.9, 2.7, 150.0] {
            let (quota, period) = quota_and_period(percent);
            let share = 100.0 * quota as f64 / period as f64;
            assert!(
                (share - percent).abs() / percent < 0.01,
                "{percent}: {share}"
            );
        }
    }

    #[test]
    fn the_presets_costs_follow_from_the_sources_figures() {
        // 800 µs fixed at 30% protocol; 560 µs were 55% before header
        // prediction; 20 MHz to 25 MHz.
        assert!((HostPreset::Sun3.packet_us() - 718.5).abs() < 0.1);
        // 28 s / 4096 packets, less the 25% checksum.
        assert!((HostPreset::Vax750.packet_us() - 5126.95).abs() < 0.1);
        // A host whose packet costs what the Sun-3/260's did gets one CPU.
        assert!((HostPreset::Sun3.percent(HostPreset::Sun3.packet_us()) - 100.0).abs() < 1e-9);
        assert_eq!(HostPreset::parse("vax750"), Some(HostPreset::Vax750));
        assert_eq!(HostPreset::parse("sun4"), None);
        assert!(
            HostPreset::Sun3
                .derivation(22.0)
                .starts_with("sun3: 3.06% of one CPU")
        );
    }

    #[test]
    fn a_budget_holds_a_busy_process_to_its_share() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || hierarchy().is_err() {
            // Not a skip of a claim: this host cannot make cgroups; the
            // integration test (as root in CI) covers it.
            return;
        }
        // Made lifted (a login server's users log in first), the group
        // holds nothing back until its quota is applied.
        let budget = CpuBudget::create_lifted(10.0).unwrap();
        let dir = budget.path().to_path_buf();
        assert!(dir.exists());
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        budget.enter(child.id()).unwrap();
        // The CPU the same process gets in each window, set against each
        // other: a busy host lowers what it gets free, never what the
        // quota allows above its cap, so no absolute floor is asserted.
        let cpu_in = |window: Duration| {
            let start = crate::measure::schedstat::tree_cpu_ns(child.id());
            std::thread::sleep(window);
            crate::measure::schedstat::tree_cpu_ns(child.id()) - start
        };
        let window = Duration::from_millis(600);
        let free_before = cpu_in(window);
        budget.apply().unwrap();
        let held = cpu_in(window);
        let throttled = budget.throttled();
        // Lifted, the same process runs free again (teardown after a window).
        budget.lift().unwrap();
        let free_after = cpu_in(window);
        let free = free_before.max(free_after);
        // 10% of a CPU for 0.6 s is 60 ms; a period's slack above it.
        let quota_ns = window.as_nanos() as u64 / 10;
        assert!(
            held < quota_ns + 100_000_000,
            "{held} ns in 0.6 s under a 10% budget"
        );
        // Set against the same process free, where the host left it room
        // to show the cap: free, it got more than twice the quota, so
        // under the budget the kernel must have throttled it, and it got
        // less. (Beside a CPU-bound job and the other unit tests on two
        // CPUs it once got 23-44 ms free, and beside those and a build
        // it was never throttled: a process the host gives less than its
        // quota never reaches the cap, and then only the bound above is
        // evidence.)
        if free > 2 * quota_ns {
            assert!(
                throttled.is_some_and(|t| t > Duration::ZERO),
                "free it got {free} ns, over twice the quota, yet the kernel never throttled it"
            );
            assert!(
                held * 2 < free,
                "under the budget {held} ns, free {free_before} ns before and {free_after} ns after (in 0.6 s each)"
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        drop(budget);
        assert!(!dir.exists(), "the group is removed");
    }
}

//! The mesh's share of the lab: a small fleet of real agents on this
//! host's loopback (`netlab agent serve` processes, each its own control
//! port under a key made for the part), every ordered pair measured in
//! rounds of disjoint pairs on the lab's runner, so the tests are the
//! lab's records and the mesh's section is on the lab's page. On loopback
//! the matrix shows this host, not a network: it checks that the fleet's
//! machinery (handshakes, the schedule, the agents' endpoints, the
//! records) runs here; `netlab mesh --agents` measures a real fleet.
//!
//! Invariants: the agents are this part's children, stopped by PID when
//! it ends however it ends (and by the kernel if the lab dies first:
//! `PR_SET_PDEATHSIG`); the key and the run's manifest live in a scratch
//! directory removed with them.

use super::inventory::Agent;
use super::record::{MeshTest, PassSpec};
use super::run::MeshRun;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile};
use crate::endpoint::agent::key::Key;
use crate::record::Record;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long an agent has to say it listens.
const AGENT_START: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct MeshLab {
    /// Agents started on loopback.
    pub agents: usize,
    pub tests: Vec<MeshTest>,
    pub duration_s: f64,
    /// Across a real path the part does not run (why, for its note).
    pub across: Option<String>,
}

impl MeshLab {
    pub fn new(profile: Profile) -> MeshLab {
        MeshLab {
            agents: profile.pick(3, 3, 4),
            tests: profile.pick(
                vec![MeshTest::Rtt],
                vec![MeshTest::Rtt, MeshTest::Stream],
                vec![
                    MeshTest::Rtt,
                    MeshTest::Stream,
                    MeshTest::Loss,
                    MeshTest::Rpm,
                ],
            ),
            duration_s: profile.pick(0.5, 1.0, 3.0),
            across: None,
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }

    fn pass(&self) -> PassSpec {
        PassSpec::new(self.tests.clone(), self.duration_s)
    }
}

/// Agents this part started, stopped by PID when dropped.
struct LocalAgents {
    children: Vec<Child>,
    names: Vec<String>,
}

impl LocalAgents {
    /// Starts `count` agents on loopback under `key`, each on a port the
    /// kernel picks, and waits for each to say where it listens.
    fn start(count: usize, key: &Path, scratch: &Path) -> std::io::Result<LocalAgents> {
        let mut agents = LocalAgents {
            children: Vec::new(),
            names: Vec::new(),
        };
        let exe = std::env::current_exe()?;
        for i in 0..count {
            let log_path = scratch.join(format!("agent-{i}.log"));
            let log = std::fs::File::create(&log_path)?;
            let mut command = Command::new(&exe);
            command
                .args(["agent", "serve", "--listen", "127.0.0.1:0"])
                .env("NETLAB_KEY_FILE", key)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log);
            // SAFETY: between fork and exec only async-signal-safe calls.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::signal(libc::SIGINT, libc::SIG_IGN);
                    Ok(())
                });
            }
            agents.children.push(command.spawn()?);
            agents
                .names
                .push(listening(&log_path, &mut agents.children[i])?);
        }
        Ok(agents)
    }
}

/// The address agent `child` says it listens on, read from its log.
fn listening(log: &Path, child: &mut Child) -> std::io::Result<String> {
    let deadline = Instant::now() + AGENT_START;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(addr) = text
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
        {
            return Ok(addr.to_string());
        }
        if let Some(status) = child.try_wait()? {
            return Err(std::io::Error::other(format!(
                "a loopback agent ended ({status}) before it listened: {}",
                text.trim()
            )));
        }
        if Instant::now() >= deadline {
            return Err(std::io::Error::other(format!(
                "a loopback agent did not listen within {} s: {}",
                AGENT_START.as_secs(),
                text.trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for LocalAgents {
    fn drop(&mut self) {
        for child in &mut self.children {
            // By PID, through the handle: SIGTERM ends its runs cleanly.
            let pid = child.id() as libc::pid_t;
            // SAFETY: a signal to our own child, which we have not reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        for child in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl LabPart for MeshLab {
    /// Across a real path the mesh does not run: two ends are a pair, not
    /// a fleet (`netlab mesh --agents` measures one).
    fn across(&mut self, across: &Across) {
        self.across = Some(format!(
            "mesh: the lab from {} to {} is one pair; netlab mesh --agents measures every pair of a fleet",
            across.from, across.to
        ));
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        if let Some(why) = &self.across {
            return lab.skipped(why.clone());
        }
        let plan = |why: String| LabError::Plan { part: "mesh", why };
        let scratch = tempfile::Builder::new()
            .prefix("netlab-mesh-lab")
            .tempdir()?;
        let key = scratch.path().join("agent.key");
        Key::generate()
            .and_then(|k| k.write_new(&key))
            .map_err(|e| plan(e.to_string()))?;
        let agents = LocalAgents::start(self.agents, &key, scratch.path())?;
        eprintln!(
            "lab: mesh, {} loopback agents, {} tests",
            self.agents,
            self.agents * (self.agents - 1) * self.tests.len()
        );
        let run = MeshRun {
            agents_spec: agents.names.join(","),
            inventory: agents
                .names
                .iter()
                .map(|name| Agent {
                    name: name.clone(),
                    addr: name.parse().expect("an agent says a socket address"),
                    labels: Default::default(),
                })
                .collect(),
            pass: self.pass(),
            key,
            dir: scratch.path().join("run"),
            resume: false,
            keep: true,
        };
        std::fs::create_dir(&run.dir)?;
        let manifest = run.manifest().map_err(|e| plan(e.to_string()))?;
        let quiet = |_: &str| {};
        let summary = run.run_on(lab.runner, manifest, 0, &quiet).map_err(|e| {
            match e.downcast::<crate::controller::MeasureError>() {
                Ok(measure) => LabError::Measure(measure),
                Err(other) => plan(format!("{other:#}")),
            }
        });
        drop(agents);
        let summary = summary?;
        lab.measured(table(&summary.records))
    }
}

/// The part's section as it prints: the figures over the pairs and what
/// stands out, under the section's title.
pub fn table(records: &[Record<super::record::PairTest>]) -> String {
    use crate::report::html::ReportSection;
    let (title, text, reading, _) = super::section::MeshSection::parts(records);
    format!("{title}\n{text}{reading}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each profile's pass is one the mesh itself accepts.
    #[test]
    fn every_profile_plans_a_pass_the_mesh_accepts() {
        for profile in [Profile::Smoke, Profile::Quick, Profile::Full] {
            let part = MeshLab::new(profile);
            part.pass().check().unwrap();
            assert!(part.agents >= 3, "a mesh of two is a pair");
        }
    }
}

//! CPU time of a whole process tree from the scheduler's own accounting
//! (`/proc/PID/task/TID/schedstat`, first field: nanoseconds on a CPU),
//! exact to the nanosecond unlike tick-sampled `/proc/stat` or `getrusage`
//! of children that have not been reaped yet.
//!
//! Blind spot: a task that exited before the read takes its time with it,
//! so trees are read while their sessions still run. Over a window, use
//! [`TreeTasks`]: it differences task by task, so a thread that exits
//! inside the window loses only its own time in the window, never the
//! whole history it had at the start (summed totals would then shrink and
//! a delta clamp to zero). Softirq work done on behalf of the tree while
//! another task was running is not in it.

use std::collections::HashMap;

/// A task's run time (ns) from its `schedstat`'s first field.
fn task_cpu_ns(task: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(task.join("schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The calling thread's time runnable but waiting for a CPU (ns): the
/// second field of its `schedstat`, the scheduler's run-queue delay.
pub fn thread_run_delay_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU time (ns) of `root`, all its threads and all its descendants.
pub fn tree_cpu_ns(root: u32) -> u64 {
    TreeTasks::read(root).total()
}

/// Every task of a tree with its run time (ns), keyed by task ID: one
/// edge of a window.
#[derive(Debug, Clone, Default)]
pub struct TreeTasks(HashMap<u32, u64>);

impl TreeTasks {
    /// The tasks of `root`, all its threads and all its descendants, now.
    pub fn read(root: u32) -> TreeTasks {
        let mut tasks_ns = HashMap::new();
        let mut stack = vec![root];
        while let Some(pid) = stack.pop() {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let tid = task.file_name().to_str().and_then(|t| t.parse().ok());
                if let (Some(tid), Some(ns)) = (tid, task_cpu_ns(&task.path())) {
                    tasks_ns.insert(tid, ns);
                }
                if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                    stack.extend(
                        children
                            .split_whitespace()
                            .filter_map(|c| c.parse::<u32>().ok()),
                    );
                }
            }
        }
        TreeTasks(tasks_ns)
    }

    /// The task IDs read.
    pub fn tids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.keys().copied()
    }

    /// Run time of every task read.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Run time since `earlier`, task by task: a task born inside the
    /// window counts whole, one gone by now counts nothing (its time in the
    /// window is lost with it), and a task ID that reads lower than before
    /// (reused by a new task) counts as new.
    pub fn since(&self, earlier: &TreeTasks) -> u64 {
        self.0
            .iter()
            .map(|(tid, &now)| match earlier.0.get(tid) {
                Some(&then) if then <= now => now - then,
                _ => now,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_child_shows_in_its_parents_tree() {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        let me = std::process::id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // The loop burns tens of ms; wait until the tree shows it.
        let mut seen = 0;
        while std::time::Instant::now() < deadline {
            seen = tree_cpu_ns(child.id());
            if seen > 10_000_000 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(seen > 10_000_000, "child tree {seen} ns");
        assert!(
            tree_cpu_ns(me) >= seen,
            "the parent's tree includes the child"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(tree_cpu_ns(u32::MAX), 0, "no such process: nothing");
    }

    #[test]
    fn a_thread_that_waits_for_a_busy_core_accumulates_run_delay() {
        // Two threads pinned to one core, both spinning: each waits while
        // the other runs.
        let spin = || {
            // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
            let before = thread_run_delay_ns().expect("schedstat readable");
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < std::time::Duration::from_millis(300) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            thread_run_delay_ns().unwrap() - before
        };
        let other = std::thread::spawn(spin);
        let mine = spin();
        let theirs = other.join().unwrap();
        assert!(
            mine + theirs >= 100_000_000,
            "sharing one core for 300 ms, the two waited {mine} + {theirs} ns"
        );
    }

    #[test]
    fn a_thread_that_exits_in_the_window_takes_only_its_own_time() {
        let busy = |ms: u64| {
            let start = crate::measure::rusage::thread_cpu_ns();
            let mut x = 0u64;
            while crate::measure::rusage::thread_cpu_ns() - start < ms * 1_000_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        };
        // A thread with 100 ms of history is alive at the window's start
        // and gone at its end; summed totals would shrink by its history.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let leaver = std::thread::spawn(move || {
            busy(100);
            ready_tx.send(()).unwrap();
            go_rx.recv().unwrap();
        });
        ready_rx.recv().unwrap();
        let me = std::process::id();
        let start = TreeTasks::read(me);
        go_tx.send(()).unwrap();
        leaver.join().unwrap();
        busy(30);
        let end = TreeTasks::read(me);
        // Differenced as totals, the leaver's 100 ms would be subtracted
        // from this thread's 30 ms and the window would read nothing.
        let in_window = end.since(&start);
        assert!(in_window >= 25_000_000, "{in_window} ns in the window");
    }
}

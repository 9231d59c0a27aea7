//! CPU time of a whole process tree from the scheduler's own accounting
//! (`/proc/PID/task/TID/schedstat`, first field: nanoseconds on a CPU),
//! exact to the nanosecond unlike tick-sampled `/proc/stat` or `getrusage`
//! of children that have not been reaped yet.
//!
//! Blind spot: a process that exited before the read takes its time with
//! it, so trees are read while their sessions still run. Softirq work done
//! on behalf of the tree while another task was running is not in it.

/// A task's run time (ns) from its `schedstat`'s first field.
fn task_cpu_ns(task: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(task.join("schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU time (ns) of `root`, all its threads and all its descendants.
pub fn tree_cpu_ns(root: u32) -> u64 {
    let mut total = 0;
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            total += task_cpu_ns(&task.path()).unwrap_or(0);
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    total
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
}

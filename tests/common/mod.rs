//! Helpers shared by the integration tests.

/// The PIDs of `pid`'s children (all its threads'), from /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                children.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    children
}

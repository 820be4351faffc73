//! How much memory this process may use: the machine's physical memory,
//! or less where a cgroup (v2 `memory.max`, v1 `memory.limit_in_bytes`)
//! limits the container. Engine defaults (the buffer pool's size) derive
//! from it, so that a server started in a small container does not size
//! itself for the host.

use std::path::Path;

/// The memory available to this process in bytes, or `None` when
/// /proc/meminfo cannot be read (not Linux, or /proc not mounted).
pub fn available_memory_bytes() -> Option<u64> {
    available_memory_bytes_in(Path::new("/"))
}

/// `available_memory_bytes` with every path taken under `root` (tests pass
/// a fake tree).
pub fn available_memory_bytes_in(root: &Path) -> Option<u64> {
    let meminfo = std::fs::read_to_string(root.join("proc/meminfo")).ok()?;
    let total = parse_meminfo_total(&meminfo)?;
    let limits = [
        "sys/fs/cgroup/memory.max",
        "sys/fs/cgroup/memory/memory.limit_in_bytes",
    ];
    let limit = limits
        .iter()
        .filter_map(|p| std::fs::read_to_string(root.join(p)).ok())
        .filter_map(|s| parse_limit(&s))
        .min();
    Some(limit.map_or(total, |l| l.min(total)))
}

/// MemTotal from /proc/meminfo, in bytes.
fn parse_meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// A cgroup limit file: a number of bytes, or "max" (v2) for none. cgroup
/// v1 writes "no limit" as a huge number, which the caller's `min` with
/// the physical memory absorbs.
fn parse_limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    t.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!(
            "millrace-mem-{}-{}",
            std::process::id(),
            files.len()
        ));
        let _ = std::fs::remove_dir_all(&root);
        for (p, text) in files {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    #[test]
    fn physical_memory_or_the_smaller_cgroup_limit() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:  1000 kB\n";
        let plain = tree(&[("proc/meminfo", meminfo)]);
        assert_eq!(available_memory_bytes_in(&plain), Some(24_576_000 * 1024));
        let v2 = tree(&[
            ("proc/meminfo", meminfo),
            ("sys/fs/cgroup/memory.max", "1073741824\n"),
        ]);
        assert_eq!(available_memory_bytes_in(&v2), Some(1 << 30));
        let v1_unlimited = tree(&[
            ("proc/meminfo", meminfo),
            ("sys/fs/cgroup/memory.max", "max\n"),
            (
                "sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
        ]);
        assert_eq!(
            available_memory_bytes_in(&v1_unlimited),
            Some(24_576_000 * 1024)
        );
        for root in [plain, v2, v1_unlimited] {
            let _ = std::fs::remove_dir_all(root);
        }
    }

    #[test]
    fn bad_meminfo_is_none_not_a_panic() {
        assert_eq!(parse_meminfo_total("MemTotal: lots kB"), None);
        assert_eq!(parse_meminfo_total("MemTotal: 5 MB"), None);
        assert_eq!(parse_meminfo_total(""), None);
        assert_eq!(
            parse_meminfo_total("MemTotal: 99999999999999999999 kB"),
            None
        );
        assert_eq!(parse_limit("garbage"), None);
    }
}

//! How much memory this process may use: the machine's physical memory, or
//! less where a cgroup limits the process (v2 `memory.max`, v1
//! `memory.limit_in_bytes`, the tightest on the way up the hierarchy, found
//! the same way `cpu` finds the CPU quota). Engine defaults (the buffer
//! pool's size) derive from it, so that a server started in a small
//! container does not size itself for the host.

use crate::cgroup::{locate_cgroup, read_small, walk_up, CgroupVersion};
use std::path::Path;

/// The memory available to this process in bytes, or `None` when
/// /proc/meminfo cannot be read (not Linux, or /proc not mounted).
pub fn available_memory_bytes() -> Option<u64> {
    available_memory_bytes_in(Path::new("/proc"))
}

/// `available_memory_bytes` reading `<proc_dir>/meminfo` and
/// `<proc_dir>/self/{cgroup,mountinfo}` (tests pass a fake tree).
pub fn available_memory_bytes_in(proc_dir: &Path) -> Option<u64> {
    let total = parse_meminfo_total(&read_small(&proc_dir.join("meminfo"))?)?;
    let limit = locate_cgroup(&proc_dir.join("self"), "memory").and_then(|loc| {
        walk_up(&loc)
            .filter_map(|dir| match loc.version {
                CgroupVersion::V2 => read_small(&dir.join("memory.max")),
                CgroupVersion::V1 => read_small(&dir.join("memory.limit_in_bytes")),
                CgroupVersion::None => None,
            })
            .filter_map(|text| parse_limit(&text))
            .min()
    });
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
    use std::path::PathBuf;

    const MEMINFO: &str = "MemTotal:       24576000 kB\nMemFree:  1000 kB\n";
    const TOTAL: u64 = 24_576_000 * 1024;

    /// A fake /proc with meminfo and, for `mount` = Some((fstype, options)),
    /// one cgroup mount at <root>/cg holding this process in /box; `files`
    /// go under <root>/cg.
    fn tree(
        name: &str,
        cgroup: &str,
        mount: Option<(&str, &str)>,
        files: &[(&str, &str)],
    ) -> PathBuf {
        let root = std::env::temp_dir().join(format!("millrace-mem-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("proc/meminfo", MEMINFO);
        write("proc/self/cgroup", cgroup);
        let mut mountinfo = String::from("22 1 8:1 / / rw shared:1 - ext4 /dev/sda1 rw\n");
        if let Some((fstype, opts)) = mount {
            let cg = root.join("cg");
            std::fs::create_dir_all(cg.join("box")).unwrap();
            mountinfo.push_str(&format!(
                "30 22 0:40 / {} rw shared:7 - {fstype} {fstype} {opts}\n",
                cg.display()
            ));
        }
        write("proc/self/mountinfo", &mountinfo);
        for (rel, text) in files {
            write(&format!("cg/{rel}"), text);
        }
        root
    }

    #[test]
    fn physical_memory_or_the_tightest_cgroup_limit() {
        let none = tree("none", "0::/\n", None, &[]);
        assert_eq!(available_memory_bytes_in(&none.join("proc")), Some(TOTAL));
        // v2: the process's own cgroup is tighter than its parent's.
        let v2 = tree(
            "v2",
            "0::/box\n",
            Some(("cgroup2", "rw")),
            &[
                ("cgroup.controllers", "cpu memory\n"),
                ("memory.max", "max\n"),
                ("box/memory.max", "1073741824\n"),
            ],
        );
        assert_eq!(available_memory_bytes_in(&v2.join("proc")), Some(1 << 30));
        // v1: "no limit" is a huge number; the physical memory wins.
        let v1 = tree(
            "v1",
            "5:memory:/box\n",
            Some(("cgroup", "rw,memory")),
            &[("box/memory.limit_in_bytes", "9223372036854771712\n")],
        );
        assert_eq!(available_memory_bytes_in(&v1.join("proc")), Some(TOTAL));
        for root in [none, v2, v1] {
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

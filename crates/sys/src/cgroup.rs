//! Where this process's cgroup is, for one controller ("cpu", "memory"):
//! which hierarchy (v2 if the unified tree carries the controller, else
//! the v1 hierarchy mounted with it), the process's own cgroup directory,
//! and the walk from it up to the mount point (a parent's limit binds its
//! children). `cpu` reads the CPU quota and `mem` the memory limit along
//! that walk. Nothing here fails or panics on bad input: a file that is
//! missing, unreadable or malformed reads as "not found".

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

/// cgroup control files are a line or two; a cap keeps a hostile or broken
/// file (a fake tree, a FIFO) from making us read forever.
const SMALL_FILE_MAX_BYTES: u64 = 64 * 1024;
/// mountinfo on a busy Kubernetes node can be hundreds of kilobytes.
const MOUNTINFO_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Which cgroup hierarchy a limit (the CPU quota, the memory limit) was
/// read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// No usable controller (for the CPU: only the affinity mask limits us).
    None,
    /// Legacy hierarchy with a `cpu` controller mount.
    V1,
    /// Unified hierarchy (`cpu.max`, `memory.max`).
    V2,
}

impl CgroupVersion {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            CgroupVersion::None => 0,
            CgroupVersion::V1 => 1,
            CgroupVersion::V2 => 2,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => CgroupVersion::V1,
            2 => CgroupVersion::V2,
            _ => CgroupVersion::None,
        }
    }
}

/// The process's cgroup directory for the chosen hierarchy and the mount point
/// that bounds the walk upwards.
/// Where this process's cgroup for one controller is (also used by `mem`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CgroupLocation {
    pub(crate) version: CgroupVersion,
    pub(crate) dir: PathBuf,
    mount_point: PathBuf,
}

/// The cgroup paths named in `/proc/self/cgroup`.
#[derive(Debug, Default, PartialEq)]
struct ProcCgroup {
    /// Path from the `0::/path` line.
    v2_path: Option<String>,
    /// Path from the v1 line whose controllers include the one asked for.
    v1_path: Option<String>,
}

fn parse_proc_cgroup(text: &str, controller: &str) -> ProcCgroup {
    let mut out = ProcCgroup::default();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            if out.v2_path.is_none() {
                out.v2_path = Some(path.to_string());
            }
        } else if controllers.split(',').any(|c| c == controller) && out.v1_path.is_none() {
            out.v1_path = Some(path.to_string());
        }
    }
    out
}

/// The fields of one mountinfo line that matter here.
#[derive(Debug, PartialEq)]
struct MountEntry {
    root: PathBuf,
    mount_point: PathBuf,
    fstype: String,
    super_options: String,
}

fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(parse_mountinfo_line).collect()
}

/// `id parent major:minor root mount_point options [optional...] - fstype source superoptions`
fn parse_mountinfo_line(line: &str) -> Option<MountEntry> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // The optional fields have variable count; the lone "-" ends them.
    let sep = fields.iter().skip(6).position(|f| *f == "-")? + 6;
    let fstype = fields.get(sep + 1)?;
    let super_options = fields.get(sep + 3).copied().unwrap_or("");
    Some(MountEntry {
        root: unescape_mount_path(fields[3]),
        mount_point: unescape_mount_path(fields[4]),
        fstype: (*fstype).to_string(),
        super_options: super_options.to_string(),
    })
}

/// mountinfo writes space, tab, newline and backslash in paths as `\ooo`.
fn unescape_mount_path(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let oct = &bytes[i + 1..i + 4];
            if oct.iter().all(|b| (b'0'..=b'7').contains(b)) {
                let value = oct
                    .iter()
                    .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    PathBuf::from(OsString::from_vec(out))
}

/// The cgroup directory for `cgroup_path` under `mount`: the mount point plus
/// the cgroup path with the mount's root stripped. A path outside the mount's
/// root (a cgroup namespace boundary, `..` components) resolves to the mount
/// point itself, so the walk still sees the limits that are visible to us.
fn resolve_cgroup_dir(mount: &MountEntry, cgroup_path: &str) -> PathBuf {
    let path = Path::new(cgroup_path);
    match path.strip_prefix(&mount.root) {
        Ok(rel) if rel.components().all(|c| matches!(c, Component::Normal(_))) => {
            mount.mount_point.join(rel)
        }
        _ => mount.mount_point.clone(),
    }
}

/// Of several candidate mounts, prefer one whose root contains our cgroup.
fn pick_mount<'a>(
    mounts: &'a [MountEntry],
    cgroup_path: &str,
    is_candidate: impl Fn(&MountEntry) -> bool,
) -> Option<&'a MountEntry> {
    let mut candidates = mounts.iter().filter(|m| is_candidate(m));
    let first = candidates.next()?;
    if Path::new(cgroup_path).starts_with(&first.root) {
        return Some(first);
    }
    candidates
        .find(|m| Path::new(cgroup_path).starts_with(&m.root))
        .or(Some(first))
}

fn is_v1_mount(m: &MountEntry, controller: &str) -> bool {
    m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == controller)
}

/// This process's cgroup for `controller` ("cpu", "memory"): v2 if the
/// unified tree carries the controller, else the v1 hierarchy mounted with it.
pub(crate) fn locate_cgroup(proc_self_dir: &Path, controller: &str) -> Option<CgroupLocation> {
    let cgroup_text = read_lossy(&proc_self_dir.join("cgroup"), SMALL_FILE_MAX_BYTES)?;
    let mountinfo_text = read_lossy(&proc_self_dir.join("mountinfo"), MOUNTINFO_MAX_BYTES)?;
    let proc_cgroup = parse_proc_cgroup(&cgroup_text, controller);
    let mounts = parse_mountinfo(&mountinfo_text);

    // v2 first, but only if it really carries the controller: hybrid hosts
    // mount an empty cgroup2 (e.g. /sys/fs/cgroup/unified) next to the v1
    // controllers, and that empty tree limits nothing.
    if let Some(path) = &proc_cgroup.v2_path {
        if let Some(mount) = pick_mount(&mounts, path, |m| m.fstype == "cgroup2") {
            let loc = CgroupLocation {
                version: CgroupVersion::V2,
                dir: resolve_cgroup_dir(mount, path),
                mount_point: mount.mount_point.clone(),
            };
            let max_file = format!("{controller}.max");
            let has_max = walk_up(&loc).any(|dir| dir.join(&max_file).is_file());
            let root_has_it = read_small(&loc.mount_point.join("cgroup.controllers"))
                .is_some_and(|text| text.split_whitespace().any(|c| c == controller));
            if has_max || root_has_it {
                return Some(loc);
            }
        }
    }

    if let Some(path) = &proc_cgroup.v1_path {
        if let Some(mount) = pick_mount(&mounts, path, |m| is_v1_mount(m, controller)) {
            return Some(CgroupLocation {
                version: CgroupVersion::V1,
                dir: resolve_cgroup_dir(mount, path),
                mount_point: mount.mount_point.clone(),
            });
        }
    }
    None
}

/// The cgroup directory, then each parent, up to and including the mount point.
pub(crate) fn walk_up(loc: &CgroupLocation) -> impl Iterator<Item = &Path> + '_ {
    let mount_point = loc.mount_point.as_path();
    let start = if loc.dir.starts_with(mount_point) {
        loc.dir.as_path()
    } else {
        mount_point
    };
    std::iter::successors(Some(start), move |dir| {
        if *dir == mount_point {
            None
        } else {
            dir.parent().filter(|p| p.starts_with(mount_point))
        }
    })
}

fn read_capped(path: &Path, max_bytes: u64) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    File::open(path)
        .ok()?
        .take(max_bytes)
        .read_to_end(&mut buf)
        .ok()?;
    Some(buf)
}

/// Control files must be text; anything else counts as unreadable.
pub(crate) fn read_small(path: &Path) -> Option<String> {
    String::from_utf8(read_capped(path, SMALL_FILE_MAX_BYTES)?).ok()
}

/// For files listing many unrelated entries, one odd byte must not hide the
/// rest.
fn read_lossy(path: &Path, max_bytes: u64) -> Option<String> {
    Some(String::from_utf8_lossy(&read_capped(path, max_bytes)?).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        let c = parse_proc_cgroup(
            "12:cpuset:/a\n11:cpuacct:/b\n4:cpu,cpuacct:/docker/x\n0::/init.scope\n",
            "cpu",
        );
        assert_eq!(c.v1_path.as_deref(), Some("/docker/x"));
        assert_eq!(c.v2_path.as_deref(), Some("/init.scope"));
        let c = parse_proc_cgroup("3:cpuset:/\n2:cpuacct:/\n", "cpu");
        assert_eq!(c, ProcCgroup::default());
        // Colons inside the path are part of the path.
        let c = parse_proc_cgroup("0::/a:b\n", "cpu");
        assert_eq!(c.v2_path.as_deref(), Some("/a:b"));

        let m = parse_mountinfo_line(
            "32 31 0:29 / /sys/fs/cgroup/cpu\\040x rw,relatime shared:9 master:2 - cgroup cgroup rw,cpu",
        )
        .unwrap();
        assert_eq!(m.mount_point, PathBuf::from("/sys/fs/cgroup/cpu x"));
        assert_eq!(m.root, PathBuf::from("/"));
        assert_eq!(m.fstype, "cgroup");
        assert!(is_v1_mount(&m, "cpu"));
        let m =
            parse_mountinfo_line("33 31 0:30 / /c rw - cgroup cgroup rw,cpuacct,cpuset").unwrap();
        assert!(!is_v1_mount(&m, "cpu"));
        assert!(parse_mountinfo_line("1 2 3 4 5 6").is_none());
        assert!(parse_mountinfo_line("").is_none());
        assert_eq!(unescape_mount_path("a\\"), PathBuf::from("a\\"));
        assert_eq!(unescape_mount_path("a\\13"), PathBuf::from("a\\13"));
        assert_eq!(unescape_mount_path("a\\134b"), PathBuf::from("a\\b"));
    }

    #[test]
    fn cgroup_dir_under_a_mount_whose_root_is_not_slash() {
        // Docker without a cgroup namespace: the mount's root is the
        // container's own cgroup.
        let mounts =
            parse_mountinfo("30 22 0:40 /docker/abc /cg/cpu rw - cgroup cgroup rw,cpuacct,cpu\n");
        let mount = mounts.iter().find(|m| is_v1_mount(m, "cpu")).unwrap();
        let cg = Path::new("/cg/cpu");
        assert_eq!(
            resolve_cgroup_dir(mount, "/docker/abc/inner"),
            cg.join("inner")
        );
        assert_eq!(resolve_cgroup_dir(mount, "/docker/abc"), cg);
        // Outside the mount's root (or escaping with ..): the mount point.
        assert_eq!(resolve_cgroup_dir(mount, "/docker/abcd"), cg);
        assert_eq!(resolve_cgroup_dir(mount, "/other"), cg);
        assert_eq!(resolve_cgroup_dir(mount, "/docker/abc/../../x"), cg);
    }
}

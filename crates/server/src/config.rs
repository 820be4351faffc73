//! The server's settings: flags, then the environment (the root password),
//! then millrace.toml, then defaults derived from the machine. A flag wins
//! over the file; the file over the defaults.
//!
//! The file is `--config PATH`, else `./millrace.toml` when it exists. An
//! unknown key, a value of the wrong type or out of range is an error that
//! names it: a typo must not silently leave a setting at its default.
//!
//! ```toml
//! listen = "127.0.0.1:3306"
//! socket = "/run/millrace/millrace.sock"
//! data_dir = "/var/lib/millrace"
//! max_connections = 512
//! max_allowed_packet = "64M"       # the largest command a client may send
//! root_password_file = "/etc/millrace/root-password"   # its first line
//! root_password = "..."            # MILLRACE_ROOT_PASSWORD wins over it
//! metrics_listen = "127.0.0.1:9104"
//! metrics = true
//!
//! [engine]
//! buffer_pool_size = "2G"          # bytes, or with a K, M or G suffix
//! page_size = "16K"                # only when the data directory is created
//! redo_log_size = "256M"           # only when the data directory is created
//! flush_log_at_trx_commit = 1      # 0, 1 or 2, as innodb_flush_log_at_trx_commit
//! lock_wait_timeout_s = 50
//! max_purge_lag = 10000            # history length; 0 = no delay
//! max_purge_lag_delay_us = 10000
//! idle_trx_timeout_s = 0           # 0 = never
//! undo_quota = "0"                 # 0 = no quota
//! undo_quota_policy = "rollback_oldest"   # or "wait_writers"
//! ```

use millrace_trx::Durability;
use millrace_trx::{TrxConfig, UndoQuotaPolicy};
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:3306";
pub const DEFAULT_DATA_DIR: &str = "./millrace-data";
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// MySQL 8.0's default max_allowed_packet.
pub const DEFAULT_MAX_ALLOWED_PACKET: u64 = 64 << 20;
/// max_allowed_packet's range in MySQL: 1 KiB to 1 GiB.
const MAX_ALLOWED_PACKET_RANGE: std::ops::RangeInclusive<u64> = 1024..=1 << 30;
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9104";
/// Read when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG_FILE: &str = "millrace.toml";

/// The buffer pool's default share of the memory available (see
/// `default_pool_bytes`).
const POOL_MEMORY_DIVISOR: u64 = 16;
const POOL_MIN_BYTES: u64 = 128 << 20;
const POOL_MAX_BYTES: u64 = 2 << 30;

/// millrace.toml as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub socket: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub max_connections: Option<usize>,
    pub max_allowed_packet: Option<Size>,
    pub root_password: Option<String>,
    pub root_password_file: Option<PathBuf>,
    pub metrics_listen: Option<String>,
    pub metrics: Option<bool>,
    #[serde(default)]
    pub engine: EngineFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    pub buffer_pool_size: Option<Size>,
    pub page_size: Option<Size>,
    pub redo_log_size: Option<Size>,
    pub flush_log_at_trx_commit: Option<u8>,
    pub lock_wait_timeout_s: Option<u64>,
    pub max_purge_lag: Option<u64>,
    pub max_purge_lag_delay_us: Option<u64>,
    pub idle_trx_timeout_s: Option<u64>,
    pub undo_quota: Option<Size>,
    pub undo_quota_policy: Option<String>,
}

/// A size in bytes: a number, or a string with an optional K, M or G
/// suffix (powers of 1024, as MySQL reads them).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Size {
    Bytes(u64),
    Text(String),
}

impl Size {
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            Size::Bytes(n) => Ok(*n),
            Size::Text(t) => parse_size(t),
        }
    }
}

/// "512", "64K", "256M", "2G" (case-insensitive, optional "B" or "iB").
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || format!("{text:?} is not a size (a number of bytes, or with K, M or G)");
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..digits_end].parse().map_err(|_| bad())?;
    let shift = match t[digits_end..].trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return Err(bad()),
    };
    n.checked_mul(1 << shift).ok_or_else(bad)
}

/// What the command line gave; `None`: not given.
#[derive(Debug, Default)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub listen: Option<String>,
    pub socket: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub max_connections: Option<usize>,
    pub max_allowed_packet: Option<String>,
    pub root_password: Option<String>,
    pub root_password_file: Option<PathBuf>,
    pub metrics_listen: Option<String>,
    pub no_metrics: bool,
    pub buffer_pool_size: Option<String>,
}

/// The settings the server runs with.
#[derive(Debug)]
pub struct Settings {
    /// The file read, if any.
    pub config_file: Option<PathBuf>,
    pub listen: String,
    pub socket: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub max_connections: usize,
    /// The largest command a client may send, in bytes.
    pub max_allowed_packet: usize,
    /// Empty: no password (loopback only).
    pub root_password: String,
    /// The password came from `--root-password`, where `ps` shows it.
    pub root_password_on_command_line: bool,
    /// `None`: no metrics endpoint.
    pub metrics_listen: Option<String>,
    pub engine: TrxConfig,
    /// One line on where the engine's sizes came from, for the start-up
    /// message.
    pub engine_summary: String,
}

/// Reads the file (if any) and merges. `env_password` is
/// $MILLRACE_ROOT_PASSWORD; `memory_bytes` what the machine offers.
pub fn resolve(
    flags: Flags,
    env_password: Option<String>,
    memory_bytes: Option<u64>,
) -> Result<Settings, String> {
    let (file, config_file) = match &flags.config {
        Some(path) => (read_file(path)?, Some(path.clone())),
        None if Path::new(DEFAULT_CONFIG_FILE).exists() => {
            let path = PathBuf::from(DEFAULT_CONFIG_FILE);
            (read_file(&path)?, Some(path))
        }
        None => (FileConfig::default(), None),
    };
    merge(flags, file, config_file, env_password, memory_bytes)
}

fn read_file(path: &Path) -> Result<FileConfig, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("config {}: {e}", path.display()))?;
    parse_file(&text).map_err(|e| format!("config {}: {e}", path.display()))
}

pub fn parse_file(text: &str) -> Result<FileConfig, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

/// The buffer pool when nothing sets it: 1/16 of the memory available,
/// within 128 MiB..2 GiB (MySQL's fixed default is 128 MiB; a server
/// sharing a machine should not take a large share unasked).
pub fn default_pool_bytes(memory_bytes: Option<u64>) -> u64 {
    memory_bytes.map_or(POOL_MIN_BYTES, |m| {
        (m / POOL_MEMORY_DIVISOR).clamp(POOL_MIN_BYTES, POOL_MAX_BYTES)
    })
}

pub fn merge(
    flags: Flags,
    file: FileConfig,
    config_file: Option<PathBuf>,
    env_password: Option<String>,
    memory_bytes: Option<u64>,
) -> Result<Settings, String> {
    let max_connections = flags
        .max_connections
        .or(file.max_connections)
        .unwrap_or(DEFAULT_MAX_CONNECTIONS);
    if max_connections == 0 {
        return Err("max_connections must be at least 1".into());
    }
    let max_allowed_packet = match (&flags.max_allowed_packet, &file.max_allowed_packet) {
        (Some(f), _) => parse_size(f).map_err(|m| format!("--max-allowed-packet: {m}"))?,
        (None, Some(s)) => s.bytes().map_err(|m| format!("max_allowed_packet: {m}"))?,
        (None, None) => DEFAULT_MAX_ALLOWED_PACKET,
    };
    if !MAX_ALLOWED_PACKET_RANGE.contains(&max_allowed_packet) {
        return Err(format!(
            "max_allowed_packet: {} is outside 1K..1G",
            human(max_allowed_packet)
        ));
    }
    let root_password_on_command_line = flags.root_password.is_some();
    let root_password = match (flags.root_password, flags.root_password_file) {
        (Some(p), _) => p,
        (None, Some(f)) => read_password_file(&f)?,
        (None, None) => match (env_password, &file.root_password_file, file.root_password) {
            (Some(p), _, _) => p,
            (None, Some(f), _) => read_password_file(f)?,
            (None, None, p) => p.unwrap_or_default(),
        },
    };
    let metrics_on = !flags.no_metrics && file.metrics.unwrap_or(true);
    let e = file.engine;
    let mut engine = TrxConfig::default();
    let mut summary = Vec::new();

    let pool = match (&flags.buffer_pool_size, &e.buffer_pool_size) {
        (Some(f), _) => parse_size(f).map_err(|m| format!("--buffer-pool-size: {m}"))?,
        (None, Some(s)) => s
            .bytes()
            .map_err(|m| format!("engine.buffer_pool_size: {m}"))?,
        (None, None) => default_pool_bytes(memory_bytes),
    };
    summary.push(format!(
        "buffer pool {}{}",
        human(pool),
        match (&flags.buffer_pool_size, &e.buffer_pool_size, memory_bytes) {
            (None, None, Some(m)) => format!(" (1/{POOL_MEMORY_DIVISOR} of {} memory)", human(m)),
            _ => String::new(),
        }
    ));
    engine.store.buf.pool_bytes = usize::try_from(pool).map_err(|_| "buffer pool too large")?;
    if let Some(ps) = &e.page_size {
        let ps = ps.bytes().map_err(|m| format!("engine.page_size: {m}"))?;
        if ![4096, 8192, 16384, 32768].contains(&ps) {
            return Err(format!("engine.page_size: {ps} is not 4K, 8K, 16K or 32K"));
        }
        engine.store.buf.page_size = ps as usize;
    }
    if engine.store.buf.pool_bytes < 64 * engine.store.buf.page_size {
        return Err(format!(
            "buffer pool of {} is too small: at least 64 pages",
            human(pool)
        ));
    }
    if let Some(s) = &e.redo_log_size {
        let bytes = s
            .bytes()
            .map_err(|m| format!("engine.redo_log_size: {m}"))?;
        if bytes < 4 << 20 {
            return Err(format!(
                "engine.redo_log_size: {} is below the 4 MiB minimum",
                human(bytes)
            ));
        }
        engine.store.log.capacity_bytes = bytes;
    }
    summary.push(format!(
        "redo log {}",
        human(engine.store.log.capacity_bytes)
    ));
    if let Some(level) = e.flush_log_at_trx_commit {
        engine.store.log.durability = Durability::from_level(level)
            .ok_or_else(|| format!("engine.flush_log_at_trx_commit: {level} is not 0, 1 or 2"))?;
    }
    summary.push(format!(
        "flush_log_at_trx_commit {}",
        engine.store.log.durability.level()
    ));
    if let Some(s) = e.lock_wait_timeout_s {
        engine.lock_wait_timeout_ms = s.saturating_mul(1000);
    }
    if let Some(n) = e.max_purge_lag {
        engine.max_purge_lag = n;
    }
    if let Some(us) = e.max_purge_lag_delay_us {
        engine.max_purge_lag_delay_us = us;
    }
    if let Some(s) = e.idle_trx_timeout_s {
        engine.idle_trx_timeout_ms = s.saturating_mul(1000);
    }
    if let Some(q) = &e.undo_quota {
        engine.undo_quota_bytes = q.bytes().map_err(|m| format!("engine.undo_quota: {m}"))?;
    }
    if let Some(p) = &e.undo_quota_policy {
        engine.undo_quota_policy = match p.as_str() {
            "rollback_oldest" => UndoQuotaPolicy::RollbackOldest,
            "wait_writers" => UndoQuotaPolicy::WaitWriters,
            other => {
                return Err(format!(
                    "engine.undo_quota_policy: {other:?} is not \"rollback_oldest\" or \"wait_writers\""
                ))
            }
        };
    }

    Ok(Settings {
        config_file,
        listen: flags
            .listen
            .or(file.listen)
            .unwrap_or_else(|| DEFAULT_LISTEN.into()),
        socket: flags.socket.or(file.socket),
        data_dir: flags
            .data_dir
            .or(file.data_dir)
            .unwrap_or_else(|| DEFAULT_DATA_DIR.into()),
        max_connections,
        max_allowed_packet: max_allowed_packet as usize,
        root_password,
        root_password_on_command_line,
        metrics_listen: metrics_on.then(|| {
            flags
                .metrics_listen
                .or(file.metrics_listen)
                .unwrap_or_else(|| DEFAULT_METRICS_LISTEN.into())
        }),
        engine,
        engine_summary: summary.join(", "),
    })
}

/// The password in a file: its first line (without the line end). The
/// file should be readable by the server's user only; that is not checked.
fn read_password_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("root password file {}: {e}", path.display()))?;
    Ok(text.lines().next().unwrap_or("").to_string())
}

/// Bytes as the largest binary unit that keeps one decimal.
fn human(bytes: u64) -> String {
    let units = [(30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in units {
        if bytes >= 1 << shift {
            return format!("{:.1} {unit}", bytes as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes_and_reject_junk() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("256m").unwrap(), 256 << 20);
        assert_eq!(parse_size("2 GiB").unwrap(), 2 << 30);
        for bad in ["", "G", "1T", "-5", "1.5G", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let file = parse_file(
            r#"
            listen = "127.0.0.1:4000"
            data_dir = "/srv/db"
            max_connections = 20
            root_password = "from-file"
            metrics = false
            [engine]
            buffer_pool_size = "256M"
            page_size = "8K"
            flush_log_at_trx_commit = 2
            lock_wait_timeout_s = 3
            undo_quota = "1G"
            undo_quota_policy = "wait_writers"
            "#,
        )
        .unwrap();
        let flags = Flags {
            listen: Some("127.0.0.1:5000".into()),
            ..Flags::default()
        };
        let s = merge(flags, file, None, None, Some(24 << 30)).unwrap();
        assert_eq!(s.listen, "127.0.0.1:5000");
        assert_eq!(s.data_dir, PathBuf::from("/srv/db"));
        assert_eq!(s.max_connections, 20);
        assert_eq!(s.root_password, "from-file");
        assert_eq!(s.metrics_listen, None);
        assert_eq!(s.engine.store.buf.pool_bytes, 256 << 20);
        assert_eq!(s.engine.store.buf.page_size, 8192);
        assert_eq!(s.engine.store.log.durability, Durability::Write);
        assert_eq!(s.engine.lock_wait_timeout_ms, 3000);
        assert_eq!(s.engine.undo_quota_bytes, 1 << 30);
        assert_eq!(s.engine.undo_quota_policy, UndoQuotaPolicy::WaitWriters);
    }

    #[test]
    fn the_environment_password_wins_over_the_file() {
        let file = parse_file("root_password = \"from-file\"").unwrap();
        let s = merge(Flags::default(), file, None, Some("env".into()), None).unwrap();
        assert_eq!(s.root_password, "env");
        let flags = Flags {
            root_password: Some("flag".into()),
            ..Flags::default()
        };
        let s = merge(flags, FileConfig::default(), None, Some("env".into()), None).unwrap();
        assert_eq!(s.root_password, "flag");
        assert!(s.root_password_on_command_line);
    }

    #[test]
    fn the_password_file_is_read_and_max_allowed_packet_bounded() {
        let dir = std::env::temp_dir().join(format!("millrace-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("pw");
        std::fs::write(&f, "from-file-flag\nignored\n").unwrap();
        let flags = Flags {
            root_password_file: Some(f.clone()),
            max_allowed_packet: Some("1M".into()),
            ..Flags::default()
        };
        let s = merge(flags, FileConfig::default(), None, Some("env".into()), None).unwrap();
        assert_eq!(s.root_password, "from-file-flag");
        assert!(!s.root_password_on_command_line);
        assert_eq!(s.max_allowed_packet, 1 << 20);
        let file = parse_file(&format!("root_password_file = {:?}", f.to_str().unwrap())).unwrap();
        let s = merge(Flags::default(), file, None, None, None).unwrap();
        assert_eq!(s.root_password, "from-file-flag");
        assert_eq!(s.max_allowed_packet, DEFAULT_MAX_ALLOWED_PACKET as usize);
        let missing = Flags {
            root_password_file: Some(dir.join("nope")),
            ..Flags::default()
        };
        let e = merge(missing, FileConfig::default(), None, None, None).unwrap_err();
        assert!(e.contains("root password file"), "{e}");
        let tiny = Flags {
            max_allowed_packet: Some("10".into()),
            ..Flags::default()
        };
        assert!(merge(tiny, FileConfig::default(), None, None, None).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn defaults_follow_the_machine() {
        let s = merge(
            Flags::default(),
            FileConfig::default(),
            None,
            None,
            Some(24 << 30),
        )
        .unwrap();
        assert_eq!(s.listen, DEFAULT_LISTEN);
        assert_eq!(s.metrics_listen.as_deref(), Some(DEFAULT_METRICS_LISTEN));
        assert_eq!(s.engine.store.buf.pool_bytes, (24 << 30) / 16);
        assert!(
            s.engine_summary.contains("1/16 of 24.0 GiB"),
            "{}",
            s.engine_summary
        );
        assert_eq!(default_pool_bytes(Some(512 << 20)), 128 << 20);
        assert_eq!(default_pool_bytes(Some(1 << 40)), 2 << 30);
        assert_eq!(default_pool_bytes(None), 128 << 20);
    }

    #[test]
    fn mistakes_in_the_file_are_errors_that_name_them() {
        let e = parse_file("listne = \"x\"").unwrap_err();
        assert!(e.contains("listne"), "{e}");
        let e = parse_file("[engine]\nbuffer_pool = \"1G\"").unwrap_err();
        assert!(e.contains("buffer_pool"), "{e}");
        assert!(parse_file("max_connections = \"many\"").is_err());
        assert!(parse_file("max_connections = ").is_err());
        let bad = |text: &str| {
            merge(
                Flags::default(),
                parse_file(text).unwrap(),
                None,
                None,
                None,
            )
            .unwrap_err()
        };
        assert!(bad("[engine]\npage_size = 5000").contains("page_size"));
        assert!(bad("[engine]\nflush_log_at_trx_commit = 7").contains("flush_log_at_trx_commit"));
        assert!(bad("[engine]\nundo_quota_policy = \"panic\"").contains("undo_quota_policy"));
        assert!(bad("[engine]\nbuffer_pool_size = \"lots\"").contains("buffer_pool_size"));
        assert!(bad("[engine]\nbuffer_pool_size = \"64K\"").contains("too small"));
        assert!(bad("max_connections = 0").contains("max_connections"));
    }
}

//! System variables: the global ones (engine settings and server state,
//! `GLOBALS`) and a session's (character set, collation, autocommit), as
//! `@@name`, SHOW VARIABLES and SET see them.

use crate::error::SqlError;
use crate::types::Value;
use millrace_errcode::{
    ER_INCORRECT_GLOBAL_LOCAL_VAR, ER_WRONG_TYPE_FOR_VAR, ER_WRONG_VALUE_FOR_VAR,
};
use millrace_trx::{Durability, Engine, RuntimeSettings};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The version the server announces in the handshake and in `@@version`.
/// Clients and connectors gate features on the leading MySQL version.
pub const SERVER_VERSION: &str = "8.0.36-millrace";
/// `@@version_comment`: what the mariadb client prints after the version.
pub const VERSION_COMMENT: &str = "millrace";

/// The session's own settings.
#[derive(Debug, Clone)]
pub struct SessionVars {
    pub character_set: String,
    pub collation: String,
    pub autocommit: bool,
    /// max_execution_time: read-only SELECTs stop after this (0: never).
    pub max_execution_time_ms: u64,
    /// max_allowed_packet: the instance's, copied when the session starts
    /// (read-only in a session, as in MySQL).
    pub max_allowed_packet_bytes: u64,
}

impl Default for SessionVars {
    fn default() -> SessionVars {
        SessionVars {
            character_set: "utf8mb4".into(),
            collation: "utf8mb4_general_ci".into(),
            autocommit: true,
            max_execution_time_ms: 0,
            max_allowed_packet_bytes: 64 << 20,
        }
    }
}

fn t(s: impl Into<String>) -> Value {
    Value::Bytes(s.into().into_bytes())
}

/// A global (engine) variable and where its value lives.
#[derive(Clone, Copy)]
pub(crate) enum Global {
    /// A run-time engine setting: the atomic, the unit it stores in per unit
    /// shown (1000 for seconds stored as ms), and the least value allowed.
    Setting(fn(&RuntimeSettings) -> &AtomicU64, u64, u64),
    /// The redo log's durability level (0, 1, 2).
    Durability,
    PageSize,
    HistoryLength,
    Uptime,
}

pub(crate) const GLOBALS: [(&str, Global); 9] = [
    ("innodb_flush_log_at_trx_commit", Global::Durability),
    (
        "innodb_lock_wait_timeout",
        Global::Setting(|r| &r.lock_wait_timeout_ms, 1000, 1),
    ),
    (
        "innodb_max_purge_lag",
        Global::Setting(|r| &r.max_purge_lag, 1, 0),
    ),
    (
        "innodb_max_purge_lag_delay",
        Global::Setting(|r| &r.max_purge_lag_delay_us, 1, 0),
    ),
    ("innodb_page_size", Global::PageSize),
    ("millrace_history_length", Global::HistoryLength),
    (
        "millrace_idle_trx_timeout",
        Global::Setting(|r| &r.idle_trx_timeout_ms, 1000, 0),
    ),
    (
        "millrace_undo_quota_bytes",
        Global::Setting(|r| &r.undo_quota_bytes, 1, 0),
    ),
    ("uptime", Global::Uptime),
];

impl Global {
    /// Status-like values that SHOW VARIABLES leaves out.
    pub(crate) fn is_status(self) -> bool {
        matches!(self, Global::HistoryLength | Global::Uptime)
    }

    pub(crate) fn get(self, e: &Engine, started: Instant) -> Value {
        Value::UInt(match self {
            Global::Setting(field, unit, _) => field(e.settings()).load(Ordering::Relaxed) / unit,
            Global::Durability => e.durability() as u64,
            Global::PageSize => e.page_size() as u64,
            Global::HistoryLength => e.history_len(),
            Global::Uptime => started.elapsed().as_secs(),
        })
    }

    pub(crate) fn set(self, e: &Engine, name: &str, v: &Value) -> Result<(), SqlError> {
        let n = match v {
            Value::Int(i) if *i >= 0 => *i as u64,
            Value::UInt(u) => *u,
            _ => {
                return Err(SqlError::new(
                    ER_WRONG_TYPE_FOR_VAR,
                    format!("Incorrect argument type to variable '{name}'"),
                ))
            }
        };
        match self {
            Global::Setting(field, unit, min) => {
                field(e.settings()).store(n.max(min).saturating_mul(unit), Ordering::Relaxed);
            }
            Global::Durability => {
                let d = u8::try_from(n)
                    .ok()
                    .and_then(Durability::from_level)
                    .ok_or_else(|| {
                        SqlError::new(
                            ER_WRONG_VALUE_FOR_VAR,
                            format!("Variable '{name}' can't be set to the value of '{n}'"),
                        )
                    })?;
                e.set_durability(d);
            }
            _ => {
                return Err(SqlError::new(
                    ER_INCORRECT_GLOBAL_LOCAL_VAR,
                    format!("Variable '{name}' is a read only variable"),
                ))
            }
        }
        Ok(())
    }
}

pub(crate) fn default_collation(charset: &str) -> &'static str {
    match charset {
        "utf8" | "utf8mb3" => "utf8mb3_general_ci",
        "latin1" => "latin1_swedish_ci",
        "binary" => "binary",
        "ascii" => "ascii_general_ci",
        _ => "utf8mb4_general_ci",
    }
}

/// The system variables a session reports, sorted by name.
pub fn session_variables(
    vars: &SessionVars,
    engine: &Engine,
    started: Instant,
) -> Vec<(String, Value)> {
    let cs = t(vars.character_set.clone());
    let coll = t(vars.collation.clone());
    let mut vars: Vec<(String, Value)> = vec![
        ("auto_increment_increment", Value::Int(1)),
        ("auto_increment_offset", Value::Int(1)),
        ("autocommit", Value::Int(i64::from(vars.autocommit))),
        ("character_set_client", cs.clone()),
        ("character_set_connection", cs.clone()),
        ("character_set_database", t("utf8mb4")),
        ("character_set_filesystem", t("binary")),
        ("character_set_results", cs),
        ("character_set_server", t("utf8mb4")),
        ("character_set_system", t("utf8mb3")),
        ("collation_connection", coll),
        ("collation_database", t("utf8mb4_general_ci")),
        ("collation_server", t("utf8mb4_general_ci")),
        ("interactive_timeout", Value::Int(28800)),
        ("license", t("Apache-2.0")),
        ("lower_case_table_names", Value::Int(0)),
        (
            "max_allowed_packet",
            Value::UInt(vars.max_allowed_packet_bytes),
        ),
        (
            "max_execution_time",
            Value::UInt(vars.max_execution_time_ms),
        ),
        ("net_write_timeout", Value::Int(60)),
        ("performance_schema", Value::Int(0)),
        ("sql_mode", t("STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION")),
        ("system_time_zone", t("UTC")),
        ("time_zone", t("SYSTEM")),
        ("transaction_isolation", t("REPEATABLE-READ")),
        ("tx_isolation", t("REPEATABLE-READ")),
        ("version", t(SERVER_VERSION)),
        ("version_comment", t(VERSION_COMMENT)),
        ("version_compile_os", t(std::env::consts::OS)),
        ("wait_timeout", Value::Int(28800)),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect();
    for (name, g) in GLOBALS {
        if !g.is_status() {
            vars.push((name.to_string(), g.get(engine, started)));
        }
    }
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}

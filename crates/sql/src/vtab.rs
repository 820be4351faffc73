//! Virtual tables: information_schema and performance_schema style views of
//! the engine's metrics registry and of the catalog, made when a statement
//! reads them.
//!
//! - `information_schema.innodb_metrics`: every counter and gauge of the
//!   engine (NAME, SUBSYSTEM, COUNT, TYPE, COMMENT), as InnoDB's table.
//! - `performance_schema.events_waits_summary_global_by_event_name`: one
//!   row per wait point the engine counts (a `<x>_waits` counter with its
//!   `<x>_wait_ns` time): EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT and
//!   AVG_TIMER_WAIT in picoseconds, as performance_schema reports them.
//! - `information_schema.schemata` and `information_schema.tables`.

use crate::catalog::Catalog;
use crate::plan::ResultKind;
use crate::types::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VirtualTable {
    InnodbMetrics,
    WaitsSummary,
    Schemata,
    Tables,
}

impl VirtualTable {
    pub fn find(db: &str, name: &str) -> Option<VirtualTable> {
        let (db, name) = (db.to_ascii_lowercase(), name.to_ascii_lowercase());
        match (db.as_str(), name.as_str()) {
            ("information_schema", "innodb_metrics") => Some(Self::InnodbMetrics),
            ("information_schema", "schemata") => Some(Self::Schemata),
            ("information_schema", "tables") => Some(Self::Tables),
            ("performance_schema", "events_waits_summary_global_by_event_name") => {
                Some(Self::WaitsSummary)
            }
            _ => None,
        }
    }

    fn columns(&self) -> &'static [(&'static str, ResultKind)] {
        use ResultKind::*;
        match self {
            Self::InnodbMetrics => &[
                ("NAME", Text),
                ("SUBSYSTEM", Text),
                ("COUNT", UInt),
                ("TYPE", Text),
                ("COMMENT", Text),
            ],
            Self::WaitsSummary => &[
                ("EVENT_NAME", Text),
                ("COUNT_STAR", UInt),
                ("SUM_TIMER_WAIT", UInt),
                ("AVG_TIMER_WAIT", UInt),
            ],
            Self::Schemata => &[
                ("CATALOG_NAME", Text),
                ("SCHEMA_NAME", Text),
                ("DEFAULT_CHARACTER_SET_NAME", Text),
            ],
            Self::Tables => &[
                ("TABLE_CATALOG", Text),
                ("TABLE_SCHEMA", Text),
                ("TABLE_NAME", Text),
                ("TABLE_TYPE", Text),
                ("ENGINE", Text),
            ],
        }
    }

    pub fn column_names(&self) -> Vec<String> {
        self.columns().iter().map(|(n, _)| n.to_string()).collect()
    }

    pub fn kinds(&self) -> Vec<ResultKind> {
        self.columns().iter().map(|(_, k)| *k).collect()
    }

    pub fn rows(&self, catalog: &Catalog) -> Vec<Vec<Value>> {
        let t = |s: &str| Value::Bytes(s.as_bytes().to_vec());
        match self {
            Self::InnodbMetrics => catalog
                .engine()
                .registry()
                .snapshot()
                .into_iter()
                .map(|m| {
                    vec![
                        t(m.name),
                        t(m.subsystem),
                        Value::UInt(m.value),
                        t(match m.kind {
                            millrace_metrics::Kind::Counter => "counter",
                            millrace_metrics::Kind::Gauge => "value",
                        }),
                        t(m.help),
                    ]
                })
                .collect(),
            Self::WaitsSummary => {
                let snap = catalog.engine().registry().snapshot();
                let mut rows = Vec::new();
                for m in &snap {
                    let Some(point) = m.name.strip_suffix("_waits") else {
                        continue;
                    };
                    let ns = snap
                        .iter()
                        .find(|x| x.name.strip_suffix("_wait_ns") == Some(point))
                        .map(|x| x.value);
                    let Some(ns) = ns else { continue };
                    let ps = ns.saturating_mul(1000);
                    rows.push(vec![
                        t(&format!("wait/synch/{}/{point}", m.subsystem)),
                        Value::UInt(m.value),
                        Value::UInt(ps),
                        Value::UInt(ps.checked_div(m.value).unwrap_or(0)),
                    ]);
                }
                rows
            }
            Self::Schemata => {
                let mut dbs = vec![
                    "information_schema".to_string(),
                    "performance_schema".to_string(),
                ];
                dbs.extend(catalog.databases());
                dbs.iter()
                    .map(|d| vec![t("def"), t(d), t("utf8mb4")])
                    .collect()
            }
            Self::Tables => catalog
                .all_tables()
                .iter()
                .map(|e| {
                    vec![
                        t("def"),
                        t(&e.schema.db),
                        t(&e.schema.name),
                        t("BASE TABLE"),
                        t("millrace"),
                    ]
                })
                .collect(),
        }
    }
}

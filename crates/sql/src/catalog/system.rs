//! The virtual tables' definitions: information_schema and
//! performance_schema style views of the engine's metrics registry and of
//! the catalog (names, columns and result types, which binding needs; their
//! rows are made by `mysql::vtab` when a statement reads them).
//!
//! - `information_schema.innodb_metrics`: every counter and gauge of the
//!   engine (NAME, SUBSYSTEM, COUNT, TYPE, COMMENT), as InnoDB's table.
//! - `performance_schema.events_waits_summary_global_by_event_name`: one
//!   row per wait point the engine counts (a `<x>_waits` counter with its
//!   `<x>_wait_ns` time): EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT and
//!   AVG_TIMER_WAIT in picoseconds, as performance_schema reports them.
//! - `information_schema.schemata` and `information_schema.tables`.

use crate::types::ResultKind;

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
}

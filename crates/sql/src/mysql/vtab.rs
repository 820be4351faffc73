//! The rows of the virtual tables (see `catalog::system` for what they are),
//! made from the engine's metrics registry and the catalog when a statement
//! reads them.

use crate::catalog::system::VirtualTable;
use crate::catalog::Catalog;
use crate::types::Value;

pub fn rows(table: VirtualTable, catalog: &Catalog) -> Vec<Vec<Value>> {
    let t = |s: &str| Value::Bytes(s.as_bytes().to_vec());
    match table {
        VirtualTable::InnodbMetrics => catalog
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
        VirtualTable::WaitsSummary => {
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
        VirtualTable::Schemata => {
            let mut dbs = vec![
                "information_schema".to_string(),
                "performance_schema".to_string(),
            ];
            dbs.extend(catalog.databases());
            dbs.iter()
                .map(|d| vec![t("def"), t(d), t("utf8mb4")])
                .collect()
        }
        VirtualTable::Tables => catalog
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

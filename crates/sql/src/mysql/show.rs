//! SHOW statements (VARIABLES, STATUS, DATABASES, TABLES, COLUMNS) and
//! DESCRIBE. SHOW CREATE TABLE will go here.

use super::variables::{session_variables, SessionVars};
use crate::bind::{no_table, object_name, SessionInfo};
use crate::catalog::Catalog;
use crate::error::{unsupported, SqlError};
use crate::exec::{like, Output};
use crate::types::{ColumnType, OutColumn, ResultKind, Value};
use millrace_errcode::ER_NO_DB_ERROR;
use sqlparser::ast;
use std::time::Instant;

/// What SHOW reads.
pub struct ShowContext<'a> {
    pub catalog: &'a Catalog,
    pub started: Instant,
    pub session: &'a dyn SessionInfo,
    pub vars: &'a SessionVars,
}

/// Runs a SHOW or DESCRIBE statement; `None` for other statements.
pub fn show(cx: &ShowContext<'_>, stmt: &ast::Statement) -> Result<Option<Output>, SqlError> {
    use ast::Statement as S;
    let out = match stmt {
        // Session and global values are the same set here.
        S::ShowVariables { filter, .. } => {
            let pattern = like_filter(filter)?;
            let rows = session_variables(cx.vars, cx.catalog.engine(), cx.started)
                .into_iter()
                .filter(|(n, _)| pattern.as_ref().is_none_or(|p| like_ci(p, n)))
                .map(|(n, v)| vec![t(n), t(text_of(&v))])
                .collect();
            Ok(Output::Rows {
                columns: vec![text_col("Variable_name"), text_col("Value")],
                rows,
            })
        }
        S::ShowStatus { filter, .. } => {
            let pattern = like_filter(filter)?;
            let mut rows: Vec<Vec<Value>> = cx
                .catalog
                .engine()
                .registry()
                .snapshot()
                .into_iter()
                .map(|m| vec![t(m.name), t(m.value.to_string())])
                .collect();
            rows.push(vec![
                t("Uptime"),
                t(cx.started.elapsed().as_secs().to_string()),
            ]);
            rows.retain(|r| pattern.as_ref().is_none_or(|p| like_ci(p, &text_of(&r[0]))));
            Ok(Output::Rows {
                columns: vec![text_col("Variable_name"), text_col("Value")],
                rows,
            })
        }
        S::ShowDatabases { .. } | S::ShowSchemas { .. } => {
            let mut dbs = vec![
                "information_schema".to_string(),
                "performance_schema".to_string(),
            ];
            dbs.extend(cx.catalog.databases());
            Ok(Output::Rows {
                columns: vec![text_col("Database")],
                rows: dbs.into_iter().map(|d| vec![t(d)]).collect(),
            })
        }
        S::ShowTables { show_options, .. } => {
            let db = match &show_options.show_in {
                Some(ast::ShowStatementIn {
                    parent_name: Some(n),
                    ..
                }) => n.to_string(),
                _ => cx
                    .session
                    .database()
                    .map(str::to_string)
                    .ok_or_else(|| SqlError::new(ER_NO_DB_ERROR, "No database selected"))?,
            };
            let pattern = match &show_options.filter_position {
                Some(
                    ast::ShowStatementFilterPosition::Suffix(f)
                    | ast::ShowStatementFilterPosition::Infix(f),
                ) => like_filter(&Some(f.clone()))?,
                None => None,
            };
            let rows = cx
                .catalog
                .tables_of(&db)
                .iter()
                .map(|e| e.schema.name.clone())
                .filter(|n| pattern.as_ref().is_none_or(|p| like_ci(p, n)))
                .map(|n| vec![t(n)])
                .collect();
            Ok(Output::Rows {
                columns: vec![text_col(&format!("Tables_in_{db}"))],
                rows,
            })
        }
        S::ExplainTable { table_name, .. } => describe(cx, table_name),
        S::ShowColumns { show_options, .. } => match &show_options.show_in {
            Some(ast::ShowStatementIn {
                parent_name: Some(n),
                ..
            }) => describe(cx, n),
            _ => Err(unsupported(stmt)),
        },
        _ => return Ok(None),
    };
    out.map(Some)
}

/// DESCRIBE / SHOW COLUMNS.
fn describe(cx: &ShowContext<'_>, name: &ast::ObjectName) -> Result<Output, SqlError> {
    let (db, tn) = object_name(name, cx.session)?;
    let e = cx
        .catalog
        .table(&db, &tn)
        .ok_or_else(|| no_table(&db, &tn))?;
    let s = &e.schema;
    let rows = s
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let key = if s.primary_key.contains(&i) {
                "PRI"
            } else if s.indexes.iter().any(|x| x.columns[0] == i && x.unique) {
                "UNI"
            } else if s.indexes.iter().any(|x| x.columns[0] == i) {
                "MUL"
            } else {
                ""
            };
            vec![
                t(c.name.clone()),
                t(type_name(&c.ty)),
                t(if c.nullable { "YES" } else { "NO" }),
                t(key),
                c.default.as_ref().map_or(Value::Null, |d| {
                    d.to_text().map_or(Value::Null, Value::Bytes)
                }),
                t(if c.auto_increment {
                    "auto_increment"
                } else {
                    ""
                }),
            ]
        })
        .collect();
    Ok(Output::Rows {
        columns: ["Field", "Type", "Null", "Key", "Default", "Extra"]
            .iter()
            .map(|n| text_col(n))
            .collect(),
        rows,
    })
}

/// SQL LIKE for SHOW ... LIKE: case-insensitive.
fn like_ci(pattern: &str, text: &str) -> bool {
    like(
        pattern.to_lowercase().as_bytes(),
        text.to_lowercase().as_bytes(),
    )
}

fn text_col(name: &str) -> OutColumn {
    OutColumn {
        name: name.into(),
        table: String::new(),
        kind: ResultKind::Text,
    }
}

fn t(s: impl Into<String>) -> Value {
    Value::Bytes(s.into().into_bytes())
}

fn type_name(ty: &ColumnType) -> String {
    match ty {
        ColumnType::TinyInt { unsigned } => {
            format!("tinyint{}", if *unsigned { " unsigned" } else { "" })
        }
        ColumnType::SmallInt { unsigned } => {
            format!("smallint{}", if *unsigned { " unsigned" } else { "" })
        }
        ColumnType::Int { unsigned } => format!("int{}", if *unsigned { " unsigned" } else { "" }),
        ColumnType::BigInt { unsigned } => {
            format!("bigint{}", if *unsigned { " unsigned" } else { "" })
        }
        ColumnType::Double => "double".into(),
        ColumnType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        ColumnType::Char(n) => format!("char({n})"),
        ColumnType::VarChar(n) => format!("varchar({n})"),
        ColumnType::Text => "text".into(),
        ColumnType::Blob => "blob".into(),
        ColumnType::DateTime => "datetime".into(),
        ColumnType::Timestamp => "timestamp".into(),
    }
}

fn text_of(v: &Value) -> String {
    v.to_text()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn like_filter(f: &Option<ast::ShowStatementFilter>) -> Result<Option<String>, SqlError> {
    match f {
        None => Ok(None),
        Some(ast::ShowStatementFilter::Like(p)) | Some(ast::ShowStatementFilter::NoKeyword(p)) => {
            Ok(Some(p.clone()))
        }
        Some(other) => Err(unsupported(other)),
    }
}

//! INSERT ... VALUES: each row's values (given, DEFAULT, generated), NOT
//! NULL and unique checks, then the row (after its long values' chunks).

use super::autoinc::next_id;
use super::store::{coerce_col, store_row};
use super::unique::{check_unique, dup_entry};
use crate::error::{engine_err, SqlError};
use crate::exec::{ExecContext, Output};
use crate::expr::Expr;
use crate::plan::InsertPlan;
use crate::types::Value;
use millrace_errcode::{ER_AUTOINC_READ_FAILED, ER_BAD_NULL_ERROR, ER_NO_DEFAULT_FOR_FIELD};
use millrace_trx::TrxError;

/// Inserts the plan's rows; with the statement's first generated
/// AUTO_INCREMENT value (for `LAST_INSERT_ID()`).
pub fn insert(cx: &ExecContext<'_>, p: &InsertPlan) -> Result<(Output, Option<u64>), SqlError> {
    let params = cx.params;
    let s = p.table.schema.clone();
    let types = s.types();
    let auto = s.auto_increment_column();
    let mut first_generated = None;
    for (n, exprs) in p.rows.iter().enumerate() {
        cx.guard.check()?;
        let mut row = Vec::with_capacity(s.columns.len());
        for (c, col) in s.columns.iter().enumerate() {
            let given = match p.targets[c] {
                Some(i) if exprs[i] != Expr::Default => Some(exprs[i].eval_const(params)?),
                _ => None,
            };
            let v = match given {
                Some(v) => coerce_col(col, v, n + 1)?,
                None => match &col.default {
                    Some(d) => d.clone(),
                    None if col.nullable || col.auto_increment => Value::Null,
                    None => {
                        return Err(SqlError::new(
                            ER_NO_DEFAULT_FOR_FIELD,
                            format!("Field '{}' doesn't have a default value", col.name),
                        ))
                    }
                },
            };
            row.push(v);
        }
        if let Some(a) = auto {
            let explicit = match &row[a] {
                Value::Null => None,
                Value::Int(0) | Value::UInt(0) => None,
                Value::Int(i) if *i > 0 => Some(*i as u64),
                Value::UInt(u) => Some(*u),
                _ => Some(0),
            };
            let is_generated = explicit.is_none();
            let id = if explicit == Some(0) {
                0
            } else {
                next_id(cx.catalog.engine(), &p.table, explicit)?
            };
            if is_generated {
                row[a] = coerce_col(&s.columns[a], Value::UInt(id), n + 1).map_err(|_| {
                    SqlError::new(
                        ER_AUTOINC_READ_FAILED,
                        "Failed to read auto-increment value from storage engine",
                    )
                })?;
                first_generated.get_or_insert(id);
            }
        }
        for (c, col) in s.columns.iter().enumerate() {
            if row[c].is_null() && !col.nullable {
                return Err(SqlError::new(
                    ER_BAD_NULL_ERROR,
                    format!("Column '{}' cannot be null", col.name),
                ));
            }
        }
        let pk = if s.primary_key.is_empty() {
            next_id(cx.catalog.engine(), &p.table, None)?
                .to_be_bytes()
                .to_vec()
        } else {
            s.key_of(&s.primary_key, &row)
        };
        let trx = cx.trx;
        check_unique(trx, &s, &row, &pk, None)?;
        // The chunks of long values first, then the row that points to
        // them (a failure undoes both with the statement).
        let (value, _) = store_row(
            trx,
            cx.catalog.engine(),
            &s,
            &p.table.next_value_id,
            &types,
            &row,
            Vec::new(),
            cx.page_size,
        )?;
        match trx.insert(s.engine_table, &pk, &value) {
            Ok(()) => {}
            Err(TrxError::Duplicate) => return Err(dup_entry(&s, &s.primary_key, &row, "PRIMARY")),
            Err(e) => return Err(engine_err(e)),
        }
    }
    let out = Output::Ok {
        affected_rows: p.rows.len() as u64,
        last_insert_id: first_generated.unwrap_or(0),
    };
    Ok((out, first_generated))
}

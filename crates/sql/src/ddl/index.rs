//! CREATE INDEX (by a table rebuild), and the index checks CREATE TABLE
//! shares: index names, the number of indexes, key sizes.

use super::context::DdlContext;
use super::rebuild::rebuild;
use crate::bind::{no_table, object_name};
use crate::catalog::{IndexSchema, TableSchema};
use crate::error::{err_parse, unsupported, SqlError};
use crate::exec::Output;
use crate::types::ColumnType;
use millrace_errcode::{
    ER_DUP_KEYNAME, ER_KEY_COLUMN_DOES_NOT_EXITS, ER_TOO_LONG_KEY, ER_TOO_MANY_KEYS,
};
use sqlparser::ast;

/// CREATE INDEX: the table is rebuilt with the new index (rows copied to
/// a new engine table in batches, then the catalog switches to it in
/// one transaction) while its exclusive metadata lock keeps writers out.
pub fn create_index(
    cx: &DdlContext<'_>,
    table: &ast::ObjectName,
    name: Option<String>,
    cols: &[ast::IndexColumn],
    unique: bool,
) -> Result<Output, SqlError> {
    let (db, tn) = object_name(table, cx.session)?;
    let cat = cx.catalog;
    let _ddl = cx.ddl_mutex();
    let old = cat.table(&db, &tn).ok_or_else(|| no_table(&db, &tn))?;
    let mut s = (*old.schema).clone();
    let cols = index_columns(&s, cols)?;
    add_index(&mut s, name, cols, unique)?;
    check_key_sizes(&s, cx.catalog.engine().page_size())?;
    let _exclusive = old.mdl.exclusive(cx.lock_timeout)?;
    rebuild(cx.catalog, &old, s)?;
    Ok(Output::ok())
}

pub(crate) fn index_columns(
    s: &TableSchema,
    cols: &[ast::IndexColumn],
) -> Result<Vec<usize>, SqlError> {
    cols.iter()
        .map(|c| {
            let name = match &c.column.expr {
                ast::Expr::Identifier(i) => i.value.clone(),
                other => return Err(unsupported(format!("index on {other}"))),
            };
            s.column(&name).ok_or_else(|| {
                SqlError::new(
                    ER_KEY_COLUMN_DOES_NOT_EXITS,
                    format!("Key column '{name}' doesn't exist in table"),
                )
            })
        })
        .collect()
}

pub(crate) fn add_index(
    s: &mut TableSchema,
    name: Option<String>,
    cols: Vec<usize>,
    unique: bool,
) -> Result<(), SqlError> {
    if cols.is_empty() {
        return Err(err_parse("an index needs columns"));
    }
    let name = name.unwrap_or_else(|| {
        let base = s.columns[cols[0]].name.clone();
        let mut n = base.clone();
        let mut i = 2;
        while s.indexes.iter().any(|x| x.name.eq_ignore_ascii_case(&n)) {
            n = format!("{base}_{i}");
            i += 1;
        }
        n
    });
    if s.indexes.iter().any(|x| x.name.eq_ignore_ascii_case(&name)) {
        return Err(SqlError::new(
            ER_DUP_KEYNAME,
            format!("Duplicate key name '{name}'"),
        ));
    }
    if s.indexes.len() >= 32 {
        return Err(SqlError::new(
            ER_TOO_MANY_KEYS,
            "Too many keys specified; max 32 keys allowed",
        ));
    }
    s.indexes.push(IndexSchema {
        name,
        columns: cols,
        unique,
    });
    Ok(())
}

/// The most bytes a key of `ty` can take in the key encoding.
fn max_key_bytes(ty: &ColumnType) -> usize {
    match ty {
        ColumnType::Char(n) | ColumnType::VarChar(n) => (*n as usize * 4) * 9 / 8 + 10,
        ColumnType::Text | ColumnType::Blob => usize::MAX / 4,
        _ => 20,
    }
}

/// Index entries must fit the B+tree's record limit (a page / 8): MySQL's
/// 1071 "Specified key was too long" when they cannot.
pub(crate) fn check_key_sizes(s: &TableSchema, page_size: usize) -> Result<(), SqlError> {
    let limit = page_size / 8 - 64;
    let pk: usize = if s.primary_key.is_empty() {
        8
    } else {
        s.primary_key
            .iter()
            .map(|&c| max_key_bytes(&s.columns[c].ty))
            .sum()
    };
    let too_long = |n: usize| {
        SqlError::new(
            ER_TOO_LONG_KEY,
            format!("Specified key was too long; max key length is {limit} bytes (needed {n})"),
        )
    };
    if pk > limit {
        return Err(too_long(pk));
    }
    for i in &s.indexes {
        let n: usize = i
            .columns
            .iter()
            .map(|&c| max_key_bytes(&s.columns[c].ty))
            .fold(pk, usize::saturating_add);
        if n > limit {
            return Err(too_long(n));
        }
    }
    Ok(())
}

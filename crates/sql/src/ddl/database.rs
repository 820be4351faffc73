//! CREATE DATABASE (and CREATE SCHEMA) and DROP DATABASE.

use super::context::DdlContext;
use crate::error::SqlError;
use crate::exec::Output;
use millrace_errcode::{ER_DB_CREATE_EXISTS, ER_DB_DROP_EXISTS};

pub fn create_database(
    cx: &DdlContext<'_>,
    db: &str,
    if_not_exists: bool,
) -> Result<Output, SqlError> {
    let _ddl = cx.ddl_mutex();
    if cx.catalog.has_database(db) {
        if if_not_exists {
            return Ok(Output::ok());
        }
        return Err(SqlError::new(
            ER_DB_CREATE_EXISTS,
            format!("Can't create database '{db}'; database exists"),
        ));
    }
    cx.catalog.create_database(db)?;
    Ok(Output::affected(1))
}

/// DROP DATABASE: its tables' exclusive metadata locks, then one catalog
/// transaction. (The session forgets the database if it was its current one.)
pub fn drop_database(cx: &DdlContext<'_>, db: &str, if_exists: bool) -> Result<Output, SqlError> {
    let cat = cx.catalog;
    let _ddl = cx.ddl_mutex();
    if !cat.has_database(db) {
        if if_exists {
            return Ok(Output::ok());
        }
        return Err(SqlError::new(
            ER_DB_DROP_EXISTS,
            format!("Can't drop database '{db}'; database doesn't exist"),
        ));
    }
    let tables = cat.tables_of(db);
    let timeout = cx.lock_timeout;
    // Released when dropped: on an error or a panic as well.
    let _locked = tables
        .iter()
        .map(|e| e.mdl.exclusive(timeout))
        .collect::<Result<Vec<_>, _>>()?;
    cat.drop_database(db)?;
    Ok(Output::affected(tables.len() as u64))
}

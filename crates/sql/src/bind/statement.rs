//! A statement as binding sees it: SELECT, INSERT, UPDATE or DELETE, bound;
//! every other statement (DDL, SET, SHOW, transaction control) is not bound
//! but dispatched by the session.

use super::binder::Binder;
use super::dml::{BoundDelete, BoundInsert, BoundUpdate};
use super::select::BoundSelect;
use crate::error::SqlError;
use sqlparser::ast;

#[derive(Debug, Clone)]
pub enum Bound {
    Select(BoundSelect),
    Insert(BoundInsert),
    Update(BoundUpdate),
    Delete(BoundDelete),
}

impl Binder<'_> {
    /// Binds a DML or SELECT statement; `None` for the others.
    pub fn statement(&mut self, stmt: &ast::Statement) -> Result<Option<Bound>, SqlError> {
        Ok(Some(match stmt {
            ast::Statement::Query(q) => Bound::Select(self.select(q)?),
            ast::Statement::Insert(i) => Bound::Insert(self.insert(i)?),
            ast::Statement::Update {
                table,
                assignments,
                from,
                selection,
                returning,
                limit,
                ..
            } => Bound::Update(self.update(
                table,
                assignments,
                from.as_ref(),
                selection.as_ref(),
                returning.as_ref(),
                limit.as_ref(),
            )?),
            ast::Statement::Delete(d) => Bound::Delete(self.delete(d)?),
            _ => return Ok(None),
        }))
    }
}

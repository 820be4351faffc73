//! The session's transaction: begun at a statement's need (explicit with
//! autocommit off), ended by COMMIT/ROLLBACK, autocommit or DDL; and the
//! shared metadata locks of the tables it used, held until it ends.

use super::state::Session;
use crate::catalog::TableEntry;
use crate::error::{engine_err, SqlError};
use crate::exec::Kill;
use millrace_trx::{Isolation, Trx};

impl Session {
    /// The isolation level transactions begin with: REPEATABLE READ, the
    /// one level SET TRANSACTION accepts (see `mysql::set`).
    pub(super) fn isolation(&self) -> Isolation {
        Isolation::RepeatableRead
    }
}
use std::sync::Arc;

impl Session {
    pub(super) fn trx(&mut self) -> &Trx {
        if self.trx.is_none() {
            let trx = self.server.engine().begin(self.isolation());
            *self.control.trx.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(trx.interrupt_handle());
            // A KILL that came before the handle was stored found no trx
            // to interrupt (`Control::kill` sets the guard, then reads it).
            if self.control.guard.kill_state() != Kill::None {
                self.control.interrupt_trx();
            }
            self.trx = Some(trx);
            if !self.vars.autocommit {
                self.explicit = true;
            }
        }
        self.trx.as_ref().expect("just begun")
    }

    fn release_mdl(&mut self) {
        for e in self.held.drain(..) {
            e.mdl.release_shared();
        }
    }

    pub(super) fn end_trx(&mut self, commit: bool) -> Result<(), SqlError> {
        *self.control.trx.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let r = match self.trx.take() {
            Some(t) if commit => t.commit().map_err(engine_err),
            Some(t) => t.rollback().map_err(engine_err),
            None => Ok(()),
        };
        self.explicit = false;
        self.release_mdl();
        r
    }

    /// Takes the table's shared metadata lock for the transaction; false
    /// when the catalog changed meanwhile (the plan must be made again).
    pub(super) fn use_table(
        &mut self,
        e: &Arc<TableEntry>,
        version: u64,
    ) -> Result<bool, SqlError> {
        if !self.held.iter().any(|h| Arc::ptr_eq(h, e)) {
            e.mdl.shared(self.lock_timeout())?;
            self.held.push(e.clone());
        }
        Ok(version == self.server.catalog.version())
    }
}

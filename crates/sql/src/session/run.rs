//! Running a plan: in the session's transaction (its own with autocommit),
//! under the table's shared metadata lock, with a statement savepoint in an
//! explicit transaction; the plan is executed by the stage it belongs to
//! (`exec` for SELECT, `write` for the rest) through an explicit context.

use super::state::Session;
use crate::error::{engine_err, SqlError};
use crate::exec::{self, ExecContext, Output};
use crate::mysql::vtab;
use crate::plan::{Plan, PlanKind};
use crate::types::Value;
use crate::write;
use millrace_errcode::{ER_LOCK_DEADLOCK, ER_QUERY_INTERRUPTED};

impl Session {
    /// Runs a plan in the session's transaction. `None`: the catalog
    /// changed since planning; nothing was done.
    pub(super) fn run_plan(
        &mut self,
        plan: &Plan,
        params: &[Value],
    ) -> Result<Option<Output>, SqlError> {
        let table = plan.table().cloned();
        self.trx();
        if let Some(t) = &table {
            match self.use_table(t, plan.catalog_version) {
                Ok(true) => {}
                Ok(false) => {
                    if !self.explicit {
                        self.end_trx(false)?;
                    }
                    return Ok(None);
                }
                Err(e) => {
                    if !self.explicit {
                        let _ = self.end_trx(false);
                    }
                    return Err(e);
                }
            }
        }
        let writes = !matches!(plan.kind, PlanKind::Select(_));
        let savepoint = if writes && self.explicit {
            Some(self.trx().savepoint().map_err(engine_err)?)
        } else {
            None
        };
        if let PlanKind::Select(s) = &plan.kind {
            // max_execution_time: read-only SELECTs only, as MySQL.
            if !s.select.for_update {
                let ms = self.vars.max_execution_time_ms;
                self.control.guard.set_timeout(self.statement_started, ms);
            }
        }
        let r = self.execute_plan(plan, params);
        match r {
            Ok(out) => {
                if !self.explicit {
                    self.end_trx(true)?;
                }
                Ok(Some(out))
            }
            Err(e) => {
                if e.code == ER_LOCK_DEADLOCK || e.code == ER_QUERY_INTERRUPTED || !self.explicit {
                    // A deadlock (or the engine's rollback) ended the whole
                    // transaction; without one open, the statement's own
                    // transaction is rolled back.
                    let _ = self.end_trx(false);
                } else if let (Some(sp), Some(trx)) = (savepoint, &self.trx) {
                    // The whole statement, a lock wait timeout's too (the
                    // engine undid only the call that waited): as MySQL does,
                    // and so that the chunks an INSERT or UPDATE wrote for
                    // long values do not outlive the row change that failed.
                    trx.rollback_to_savepoint(sp).map_err(engine_err)?;
                }
                Err(e)
            }
        }
    }

    /// Executes a plan in the open transaction.
    fn execute_plan(&mut self, plan: &Plan, params: &[Value]) -> Result<Output, SqlError> {
        let server = &self.server;
        let mut cx = ExecContext {
            trx: self.trx.as_ref().expect("statement has a transaction"),
            catalog: &server.catalog,
            params,
            page_size: server.engine().page_size(),
            virtual_rows: vtab::rows,
            guard: &self.control.guard,
        };
        match &plan.kind {
            PlanKind::Select(s) => exec::select(s, &mut cx),
            PlanKind::Insert(p) => {
                let (out, generated) = write::insert(&cx, p)?;
                if let Some(id) = generated {
                    self.last_insert_id = id;
                }
                Ok(out)
            }
            PlanKind::Update(p) => write::update(&mut cx, p),
            PlanKind::Delete(p) => write::delete(&mut cx, p),
        }
    }
}

//! The session's entry points (COM_QUERY, COM_STMT_PREPARE/EXECUTE/CLOSE,
//! COM_INIT_DB) and the dispatch of a statement to the stage that runs it:
//! planned statements (SELECT, INSERT, UPDATE, DELETE) through the plan
//! caches to `run_plan`; the others to transaction control, `ddl` or
//! `mysql` (SET, SHOW, DESCRIBE).

use super::state::Session;
use crate::ddl::{self, DdlContext};
use crate::error::{on_deep_stack, set_deep_stack};
use crate::error::{unsupported, SqlError};
use crate::exec::Output;
use crate::mysql::set::{self, SetContext};
use crate::mysql::show::{self, ShowContext};
use crate::parse::depth::{
    depth_bound, too_deep, DEEP_STACK_BYTES, INLINE_DEPTH, MAX_STATEMENT_DEPTH,
};
use crate::parse::{count_placeholders, parse, shape};
use crate::plan::{self, PlanCache, Prepared};
use crate::types::{OutColumn, Value};
use millrace_errcode::{
    ER_BAD_DB_ERROR, ER_EMPTY_QUERY, ER_NEED_REPREPARE, ER_NO_SUCH_THREAD,
    ER_STACK_OVERRUN_NEED_MORE, ER_TABLE_DEF_CHANGED, ER_UNKNOWN_STMT_HANDLER, ER_UNSUPPORTED_PS,
    ER_WRONG_ARGUMENTS,
};
use sqlparser::ast;
use std::sync::Arc;

impl Session {
    /// COM_INIT_DB and `USE db`.
    pub fn init_db(&mut self, db: &str) -> Result<Output, SqlError> {
        if !self.server.catalog.has_database(db)
            && !db.eq_ignore_ascii_case("information_schema")
            && !db.eq_ignore_ascii_case("performance_schema")
        {
            return Err(SqlError::new(
                ER_BAD_DB_ERROR,
                format!("Unknown database '{db}'"),
            ));
        }
        self.database = Some(db.to_string());
        Ok(Output::ok())
    }

    /// COM_QUERY.
    pub fn query(&mut self, sql: &str) -> Result<Output, SqlError> {
        let sql = sql.trim().trim_end_matches(';').trim_end();
        if sql.is_empty() {
            return Err(SqlError::new(ER_EMPTY_QUERY, "Query was empty"));
        }
        self.statement_begins(sql);
        let r = self.query_text(sql);
        self.statement_ends(r)
    }

    fn query_text(&mut self, sql: &str) -> Result<Output, SqlError> {
        let shaped = shape::shape(sql);
        if let Some((shape, literals)) = &shaped {
            let key = PlanCache::key(self.database.as_deref(), shape);
            let server = self.server.clone();
            if let Some(plan) = server.plans.get(&key, server.catalog.version()) {
                // None: the catalog changed under the plan; plan again below.
                if let Some(out) = self.run_plan(&plan, literals)? {
                    return Ok(out);
                }
            }
        }
        // Parsing (and all that walks the tree) on a stack deep enough.
        self.on_stack_for(sql, move |s| s.parse_and_run(sql, shaped))
    }

    /// The text statement `sql` (its shape and literals, if it has one) not
    /// found in the plan cache: planned and cached by shape, or parsed and
    /// run alone.
    fn parse_and_run(
        &mut self,
        sql: &str,
        shaped: Option<(String, Vec<Value>)>,
    ) -> Result<Output, SqlError> {
        if let Some((shape, literals)) = shaped {
            let key = PlanCache::key(self.database.as_deref(), &shape);
            let server = self.server.clone();
            let plan = match parse(&shape)
                .ok()
                .map(|stmt| plan::plan(&server.catalog, self, &stmt))
            {
                Some(Ok(Some(p)))
                    if !p.volatile && !p.shape_sensitive && p.params == literals.len() =>
                {
                    let p = Arc::new(p);
                    server.plans.put(key, p.clone());
                    Some(p)
                }
                _ => None,
            };
            if let Some(plan) = plan {
                // None: the catalog changed under the plan; plan again below.
                if let Some(out) = self.run_plan(&plan, &literals)? {
                    return Ok(out);
                }
            }
        }
        let stmt = parse(sql)?;
        self.statement(&stmt, &[])
    }

    /// Runs `f` (which parses `sql`) on this thread when the statement's
    /// tree is shallow, else on a thread of its own with a deep stack (see
    /// docs/design.md, "Bounds and interruption in the SQL layer").
    pub(super) fn on_stack_for<T: Send>(
        &mut self,
        sql: &str,
        f: impl FnOnce(&mut Session) -> Result<T, SqlError> + Send,
    ) -> Result<T, SqlError> {
        let bound = depth_bound(sql)?;
        if bound <= INLINE_DEPTH || on_deep_stack() {
            return f(self);
        }
        if bound > MAX_STATEMENT_DEPTH {
            return Err(too_deep(bound));
        }
        std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .name("millrace-deep-statement".into())
                .stack_size(DEEP_STACK_BYTES)
                .spawn_scoped(scope, move || {
                    set_deep_stack();
                    f(self)
                })
                .map_err(|e| {
                    SqlError::new(
                        ER_STACK_OVERRUN_NEED_MORE,
                        format!("Thread stack overrun: no thread for a deep statement: {e}"),
                    )
                })?;
            match worker.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// COM_STMT_PREPARE: (statement id, parameter count, result columns).
    pub fn prepare(&mut self, sql: &str) -> Result<(u32, usize, Vec<OutColumn>), SqlError> {
        let sql = sql.trim().trim_end_matches(';').trim_end();
        // The tree is dropped where it was parsed: only the plan is kept.
        let plan = self.on_stack_for(sql, |s| {
            let stmt = parse(sql)?;
            plan::plan(&s.server.catalog, s, &stmt)
        })?;
        let (params, columns, plan) = match plan {
            Some(p) => (p.params, p.columns().to_vec(), Some(Arc::new(p))),
            None => {
                if count_placeholders(sql) > 0 {
                    return Err(SqlError::new(
                        ER_UNSUPPORTED_PS,
                        "This command is not supported in the prepared statement protocol yet",
                    ));
                }
                (0, vec![], None)
            }
        };
        let id = self.next_stmt_id;
        self.next_stmt_id = self.next_stmt_id.wrapping_add(1).max(1);
        self.prepared.insert(
            id,
            Prepared {
                sql: sql.to_string(),
                plan,
                params,
            },
        );
        Ok((id, params, columns))
    }

    /// COM_STMT_EXECUTE.
    pub fn execute(&mut self, id: u32, params: Vec<Value>) -> Result<Output, SqlError> {
        let sql = self.prepared.get(&id).map(|p| p.sql.clone());
        self.statement_begins(sql.as_deref().unwrap_or(""));
        let r = self.execute_prepared(id, params);
        self.statement_ends(r)
    }

    fn execute_prepared(&mut self, id: u32, params: Vec<Value>) -> Result<Output, SqlError> {
        let Some(p) = self.prepared.get(&id) else {
            return Err(SqlError::new(
                ER_UNKNOWN_STMT_HANDLER,
                format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
            ));
        };
        if params.len() != p.params {
            return Err(SqlError::new(
                ER_WRONG_ARGUMENTS,
                "Incorrect arguments to mysqld_stmt_execute",
            ));
        }
        let sql = p.sql.clone();
        let Some(plan) = p.plan.clone() else {
            // Not planned (SET, SHOW, ...): parsed again, as a text statement.
            return self.on_stack_for(&sql, |s| {
                let stmt = parse(&sql)?;
                s.statement(&stmt, &params)
            });
        };
        if !plan.volatile {
            if let Some(out) = self.run_plan(&plan, &params)? {
                return Ok(out);
            }
        }
        // Volatile, or planned against an older catalog: plan again.
        let fresh = self.on_stack_for(&sql, |s| {
            plan::plan(&s.server.catalog, s, &parse(&sql)?)?
                .ok_or_else(|| unsupported("a statement that changed kind"))
        })?;
        let fresh = Arc::new(fresh);
        if !fresh.volatile {
            if let Some(p) = self.prepared.get_mut(&id) {
                p.plan = Some(fresh.clone());
            }
        }
        for _ in 0..3 {
            if let Some(out) = self.run_plan(&fresh, &params)? {
                return Ok(out);
            }
        }
        Err(SqlError::new(
            ER_NEED_REPREPARE,
            "Prepared statement needs to be re-prepared",
        ))
    }

    /// COM_STMT_CLOSE.
    pub fn close(&mut self, id: u32) {
        self.prepared.remove(&id);
    }

    /// Executes a parsed statement.
    pub(super) fn statement(
        &mut self,
        stmt: &ast::Statement,
        params: &[Value],
    ) -> Result<Output, SqlError> {
        for _ in 0..3 {
            let planned = plan::plan(&self.server.catalog, self, stmt)?;
            if let Some(plan) = planned {
                if let Some(out) = self.run_plan(&plan, params)? {
                    return Ok(out);
                }
                continue;
            }
            return self.other(stmt);
        }
        Err(SqlError::new(
            ER_TABLE_DEF_CHANGED,
            "Table definition has changed, please retry transaction",
        ))
    }

    /// Statements that are not planned: DDL, SET, SHOW, USE, transactions.
    fn other(&mut self, stmt: &ast::Statement) -> Result<Output, SqlError> {
        use ast::Statement as S;
        match stmt {
            S::StartTransaction { .. } => {
                self.end_trx(true)?;
                self.trx();
                self.explicit = true;
                Ok(Output::ok())
            }
            S::Commit { .. } => {
                self.end_trx(true)?;
                Ok(Output::ok())
            }
            S::Rollback {
                savepoint: None, ..
            } => {
                self.end_trx(false)?;
                Ok(Output::ok())
            }
            S::Use(u) => {
                let name = match u {
                    ast::Use::Object(n)
                    | ast::Use::Database(n)
                    | ast::Use::Schema(n)
                    | ast::Use::Catalog(n) => n.to_string(),
                    other => return Err(unsupported(other)),
                };
                self.init_db(name.trim_matches('`'))
            }
            S::Set(s) => {
                let server = self.server.clone();
                let cx = SetContext {
                    catalog: &server.catalog,
                    started: server.started,
                };
                set::set(self, &cx, s)
            }
            S::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => {
                self.end_trx(true)?;
                let db = db_name.to_string().trim_matches('`').to_string();
                ddl::create_database(&self.ddl_context(), &db, *if_not_exists)
            }
            S::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => {
                self.end_trx(true)?;
                let db = schema_name.to_string().trim_matches('`').to_string();
                ddl::create_database(&self.ddl_context(), &db, *if_not_exists)
            }
            S::Drop {
                object_type,
                if_exists,
                names,
                ..
            } => {
                self.end_trx(true)?;
                match object_type {
                    ast::ObjectType::Table => {
                        ddl::drop_tables(&self.ddl_context(), names, *if_exists)
                    }
                    ast::ObjectType::Schema | ast::ObjectType::Database => {
                        let db = names
                            .first()
                            .map(|n| n.to_string().trim_matches('`').to_string())
                            .unwrap_or_default();
                        let out = ddl::drop_database(&self.ddl_context(), &db, *if_exists)?;
                        if self.database.as_deref() == Some(db.as_str()) {
                            self.database = None;
                        }
                        Ok(out)
                    }
                    other => Err(unsupported(format!("DROP {other}"))),
                }
            }
            S::CreateTable(ct) => {
                self.end_trx(true)?;
                ddl::create_table(&self.ddl_context(), ct)
            }
            S::CreateIndex(ci) => {
                self.end_trx(true)?;
                let name = ci
                    .name
                    .as_ref()
                    .map(|n| n.to_string().trim_matches('`').to_string());
                ddl::create_index(
                    &self.ddl_context(),
                    &ci.table_name,
                    name,
                    &ci.columns,
                    ci.unique,
                )
            }
            S::Kill { modifier, id } => {
                let query_only = match modifier {
                    None | Some(ast::KillType::Connection) => false,
                    Some(ast::KillType::Query) => true,
                    Some(other) => return Err(unsupported(format!("KILL {other}"))),
                };
                let target = u32::try_from(*id).map_err(|_| {
                    SqlError::new(ER_NO_SUCH_THREAD, format!("Unknown thread id: {id}"))
                })?;
                self.server
                    .kill_from(Some(self.conn.connection_id), target, query_only)?;
                Ok(Output::ok())
            }
            // Nothing here keeps table locks or a global read lock: saying OK
            // would promise a protection that is not there.
            S::Flush { .. } => Err(unsupported(
                "FLUSH (there is no table cache to flush and no global read lock; \
                 FLUSH TABLES WITH READ LOCK would not block writers)",
            )),
            S::LockTables { .. } => Err(unsupported(
                "LOCK TABLES (table locks are not implemented; use transactions \
                 and SELECT ... FOR UPDATE / FOR SHARE)",
            )),
            // Releases nothing, as no table locks can be held; MySQL answers
            // OK too when none are.
            S::UnlockTables => Ok(Output::ok()),
            S::Query(_) | S::Insert(_) | S::Update { .. } | S::Delete(_) => {
                unreachable!("planned statements do not get here")
            }
            other => {
                let cx = ShowContext {
                    catalog: &self.server.catalog,
                    started: self.server.started,
                    session: self,
                    vars: &self.vars,
                };
                show::show(&cx, other)?.ok_or_else(|| unsupported(other))
            }
        }
    }

    fn ddl_context(&self) -> DdlContext<'_> {
        DdlContext {
            catalog: &self.server.catalog,
            session: self,
            lock_timeout: self.lock_timeout(),
        }
    }
}

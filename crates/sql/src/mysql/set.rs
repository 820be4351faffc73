//! SET: the session's settings (character set, collation, autocommit),
//! system variables, and SET GLOBAL of the engine's run-time settings.

use super::variables::{default_collation, session_variables, Global, SessionVars, GLOBALS};
use crate::bind::{Binder, SessionInfo};
use crate::catalog::Catalog;
use crate::error::{err_parse, unsupported, SqlError};
use crate::exec::Output;
use crate::types::Value;
use millrace_errcode::{ER_GLOBAL_VARIABLE, ER_UNKNOWN_SYSTEM_VARIABLE, ER_WRONG_VALUE_FOR_VAR};
use sqlparser::ast;
use std::time::Instant;

/// What SET changes in a session (the session implements it).
pub trait SessionSettings {
    fn settings(&mut self) -> &mut SessionVars;
    /// The session as binding sees it (for the value of a SET GLOBAL).
    fn info(&self) -> &dyn SessionInfo;
    /// Commits the open transaction (SET autocommit=1 does, as MySQL).
    fn commit(&mut self) -> Result<(), SqlError>;
}

/// Instance-wide state SET reads.
pub struct SetContext<'a> {
    pub catalog: &'a Catalog,
    pub started: Instant,
}

/// SET: session settings, system variables (SET GLOBAL for the engine's).
pub fn set(
    s: &mut dyn SessionSettings,
    cx: &SetContext<'_>,
    set: &ast::Set,
) -> Result<Output, SqlError> {
    use ast::Set as St;
    match set {
        St::SetNames {
            charset_name,
            collation_name,
        } => {
            let cs = charset_name.value.to_ascii_lowercase();
            s.settings().collation = collation_name
                .clone()
                .map(|c| c.trim_matches('\'').to_ascii_lowercase())
                .unwrap_or_else(|| default_collation(&cs).to_string());
            s.settings().character_set = cs;
            Ok(Output::ok())
        }
        St::SetNamesDefault {} => {
            s.settings().character_set = "utf8mb4".into();
            s.settings().collation = "utf8mb4_general_ci".into();
            Ok(Output::ok())
        }
        St::SingleAssignment {
            scope,
            variable,
            values,
            ..
        } => {
            let v = values
                .first()
                .ok_or_else(|| err_parse("SET without a value"))?;
            set_one(s, cx, scope.as_ref(), &variable.to_string(), v)
        }
        St::MultipleAssignments { assignments } => {
            for a in assignments {
                set_one(s, cx, a.scope.as_ref(), &a.name.to_string(), &a.value)?;
            }
            Ok(Output::ok())
        }
        St::SetTransaction { .. } => Ok(Output::ok()),
        other => Err(unsupported(other)),
    }
}

fn set_one(
    s: &mut dyn SessionSettings,
    cx: &SetContext<'_>,
    scope: Option<&ast::ContextModifier>,
    name: &str,
    value: &ast::Expr,
) -> Result<Output, SqlError> {
    let mut global = matches!(scope, Some(ast::ContextModifier::Global));
    let mut name = name.trim_start_matches("@@").to_ascii_lowercase();
    for (prefix, is_global) in [("global.", true), ("session.", false), ("local.", false)] {
        if let Some(n) = name.strip_prefix(prefix) {
            name = n.to_string();
            global |= is_global;
        }
    }
    if name.starts_with('@') {
        return Err(unsupported("user variables"));
    }
    if let Some((_, g)) = GLOBALS.iter().find(|(n, _)| *n == name) {
        if !global && matches!(g, Global::Setting(..) | Global::Durability) {
            return Err(SqlError::new(
                ER_GLOBAL_VARIABLE,
                format!("Variable '{name}' is a GLOBAL variable and should be set with SET GLOBAL"),
            ));
        }
        let mut binder = Binder::new(cx.catalog, s.info());
        let v = match value {
            ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case("on") => Value::Int(1),
            ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case("off") => Value::Int(0),
            e => binder.expr_const(e)?.eval_const(&[])?,
        };
        g.set(cx.catalog.engine(), &name, &v)?;
        return Ok(Output::ok());
    }
    let word = set_word(value);
    match name.as_str() {
        "autocommit" => match word.as_str() {
            "1" | "on" | "true" => {
                if !s.settings().autocommit {
                    s.commit()?;
                }
                s.settings().autocommit = true;
            }
            "0" | "off" | "false" => s.settings().autocommit = false,
            _ => {
                return Err(SqlError::new(
                    ER_WRONG_VALUE_FOR_VAR,
                    format!("Variable 'autocommit' can't be set to the value of '{word}'"),
                ))
            }
        },
        "names" => {
            s.settings().collation = default_collation(&word).to_string();
            s.settings().character_set = word;
        }
        "character_set_client" | "character_set_connection" | "character_set_results" => {
            if word != "null" {
                s.settings().character_set = word;
            }
        }
        "collation_connection" => s.settings().collation = word,
        _ => {
            let known = session_variables(s.settings(), cx.catalog.engine(), cx.started)
                .iter()
                .any(|(n, _)| *n == name)
                || matches!(
                    name.as_str(),
                    "sql_mode"
                        | "sql_select_limit"
                        | "sql_auto_is_null"
                        | "sql_safe_updates"
                        | "foreign_key_checks"
                        | "unique_checks"
                        | "transaction_isolation"
                        | "tx_isolation"
                        | "transaction_read_only"
                        | "time_zone"
                        | "wait_timeout"
                        | "interactive_timeout"
                        | "net_write_timeout"
                        | "net_read_timeout"
                        | "sql_quote_show_create"
                        | "group_concat_max_len"
                        | "max_execution_time"
                        | "session_track_schema"
                        | "session_track_system_variables"
                        | "session_track_state_change"
                );
            if !known {
                return Err(SqlError::new(
                    ER_UNKNOWN_SYSTEM_VARIABLE,
                    format!("Unknown system variable '{name}'"),
                ));
            }
        }
    }
    Ok(Output::ok())
}

/// The text of a SET value (`ON`, `'utf8'`, 1, ...), for session settings.
fn set_word(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            ast::Value::Boolean(b) => u8::from(*b).to_string(),
            ast::Value::Null => "NULL".into(),
            other => other.to_string(),
        },
        ast::Expr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
    .to_ascii_lowercase()
}

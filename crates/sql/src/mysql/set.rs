//! SET: the session's settings (character set, collation, autocommit),
//! system variables, and SET GLOBAL of the engine's run-time settings.

use super::variables::{default_collation, session_variables, Global, SessionVars, GLOBALS};
use crate::bind::{Binder, SessionInfo};
use crate::catalog::Catalog;
use crate::error::{err_parse, unsupported, SqlError};
use crate::exec::Output;
use crate::types::Value;
use millrace_errcode::{
    ER_GLOBAL_VARIABLE, ER_UNKNOWN_SYSTEM_VARIABLE, ER_WRONG_TYPE_FOR_VAR, ER_WRONG_VALUE_FOR_VAR,
};
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
        St::SetTransaction {
            modes, snapshot, ..
        } => {
            if snapshot.is_some() {
                return Err(unsupported("SET TRANSACTION SNAPSHOT"));
            }
            for m in modes {
                match m {
                    ast::TransactionMode::IsolationLevel(l) => isolation(&l.to_string())?,
                    ast::TransactionMode::AccessMode(ast::TransactionAccessMode::ReadWrite) => {}
                    ast::TransactionMode::AccessMode(a) => {
                        return Err(unsupported(format!("SET TRANSACTION {a}")))
                    }
                }
            }
            Ok(Output::ok())
        }
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
        "transaction_isolation" | "tx_isolation" => isolation(&word.replace('-', " "))?,
        "sql_mode" => sql_mode(&word)?,
        "max_execution_time" => {
            let ms = word.parse::<u64>().map_err(|_| {
                SqlError::new(
                    ER_WRONG_TYPE_FOR_VAR,
                    "Incorrect argument type to variable 'max_execution_time'",
                )
            })?;
            s.settings().max_execution_time_ms = ms;
        }
        "transaction_read_only" | "tx_read_only" => {
            if !matches!(word.as_str(), "0" | "off" | "false") {
                return Err(unsupported("read-only transactions"));
            }
        }
        _ => {
            let known = session_variables(s.settings(), cx.catalog.engine(), cx.started)
                .iter()
                .any(|(n, _)| *n == name)
                || matches!(
                    name.as_str(),
                    "net_write_timeout"
                        | "foreign_key_checks"
                        | "unique_checks"
                        | "group_concat_max_len"
                        | "sql_safe_updates"
                        | "sql_auto_is_null"
                        | "sql_select_limit"
                        | "net_read_timeout"
                        | "sql_quote_show_create"
                        | "session_track_schema"
                        | "session_track_system_variables"
                        | "session_track_state_change"
                );
            if known && !unchanged(s, cx, &name, &word) {
                // A variable whose value we report but whose other values
                // have no effect here: only its current value is accepted.
                return Err(unsupported(format!(
                    "SET {name} to another value than its current one (its \
                     other settings are not implemented)"
                )));
            }
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

/// Whether `word` is the value `name` already has (for the variables whose
/// other values we do not implement). Variables that only concern the
/// network or the client (`net_*_timeout`, `session_track_*`,
/// `sql_quote_show_create`) are accepted at any value.
fn unchanged(s: &mut dyn SessionSettings, cx: &SetContext<'_>, name: &str, word: &str) -> bool {
    match name {
        // No foreign keys exist; unique checks are always made (stricter
        // than asked); there is no GROUP_CONCAT: any value means the same.
        "foreign_key_checks"
        | "unique_checks"
        | "group_concat_max_len"
        | "sql_quote_show_create" => return true,
        "sql_safe_updates" | "sql_auto_is_null" => return matches!(word, "0" | "off" | "false"),
        "sql_select_limit" => return matches!(word, "default" | "18446744073709551615"),
        "time_zone" => return matches!(word, "system" | "+00:00" | "utc"),
        _ if name.starts_with("net_") || name.starts_with("session_track") => return true,
        _ => {}
    }
    let Some((_, v)) = session_variables(s.settings(), cx.catalog.engine(), cx.started)
        .into_iter()
        .find(|(n, _)| n == name)
    else {
        return false;
    };
    v.to_text()
        .is_some_and(|t| String::from_utf8_lossy(&t).eq_ignore_ascii_case(word))
}

/// SET TRANSACTION ISOLATION LEVEL / transaction_isolation: the engine
/// gives each transaction one snapshot (REPEATABLE READ). Its READ
/// COMMITTED takes a view per engine call, not per statement (a statement
/// reading in several batches could see two snapshots), so it is not
/// offered as MySQL's READ COMMITTED; nor are the other levels.
fn isolation(level: &str) -> Result<(), SqlError> {
    let level = level.trim_matches('\'').to_ascii_uppercase();
    if level == "REPEATABLE READ" {
        return Ok(());
    }
    Err(unsupported(format!(
        "transaction isolation level {level} (only REPEATABLE READ is implemented)"
    )))
}

/// The sql_mode flags whose semantics are implemented: strict conversion
/// (an out-of-range or malformed value is an error, never a warning and a
/// clipped value; see `types::coerce`) and the storage engine never being
/// substituted. The default is exactly these.
pub const SQL_MODE: &str = "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION";

fn sql_mode(word: &str) -> Result<(), SqlError> {
    let implemented = [
        "strict_trans_tables",
        "strict_all_tables",
        "no_engine_substitution",
    ];
    let flags: Vec<&str> = word
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    let strict = flags
        .iter()
        .any(|f| matches!(*f, "strict_trans_tables" | "strict_all_tables"));
    if !strict || flags.iter().any(|f| !implemented.contains(f)) {
        return Err(SqlError::new(
            ER_WRONG_VALUE_FOR_VAR,
            format!(
                "Variable 'sql_mode' can't be set to the value of '{word}' (only strict modes \
                 of {SQL_MODE} are implemented)"
            ),
        ));
    }
    Ok(())
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

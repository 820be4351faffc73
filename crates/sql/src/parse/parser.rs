//! The parser: sqlparser with its MySQL dialect, one statement per query,
//! after the statement's depth bound (`depth`) is checked.

use super::depth::{depth_bound, too_deep, MAX_STATEMENT_DEPTH};
use crate::error::{err_parse, unsupported, SqlError};
use millrace_errcode::ER_EMPTY_QUERY;
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

/// The one statement of `sql`. A statement whose tree could be deeper than
/// `MAX_STATEMENT_DEPTH` is refused (1436) before its tree is built. The
/// caller runs statements over `INLINE_DEPTH` on a deep stack.
pub fn parse(sql: &str) -> Result<ast::Statement, SqlError> {
    let bound = depth_bound(sql)?;
    if bound > MAX_STATEMENT_DEPTH {
        return Err(too_deep(bound));
    }
    // sqlparser is a dependency, not the product, and it has panicked on
    // hostile text (0.59's MySQL dialect unwraps the operand of `DIV`:
    // `SELECT 1 DIV`). A panic there touched nothing of ours, so it is a
    // syntax error for this statement, not the end of the connection.
    let parsed =
        std::panic::catch_unwind(|| Parser::parse_sql(&MySqlDialect {}, sql)).map_err(|_| {
            err_parse(
                "the parser could not read this statement (near an operator without its operand?)",
            )
        })?;
    let mut stmts = parsed.map_err(err_parse)?;
    match stmts.len() {
        0 => Err(SqlError::new(ER_EMPTY_QUERY, "Query was empty")),
        1 => Ok(stmts.pop().expect("one")),
        _ => Err(unsupported("several statements in one query")),
    }
}

/// `?` outside quotes, backquotes and comments.
pub fn count_placeholders(sql: &str) -> usize {
    let mut n = 0;
    let mut quote = None;
    for c in sql.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
            None if c == '?' => n += 1,
            None => {}
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_errcode::ER_PARSE_ERROR;

    /// sqlparser 0.59 panics on `x DIV` with nothing after it; that is a
    /// syntax error here (found by the sql_statements fuzz target).
    #[test]
    fn a_panic_in_the_parser_is_a_syntax_error() {
        for sql in ["SELECT 1 DIV", "SELECT 7 DIV 2+, 1"] {
            let e = parse(sql).expect_err(sql);
            assert_eq!(e.code, ER_PARSE_ERROR, "{sql}: {e:?}");
        }
    }
}

//! How deep a statement's syntax tree can be, found from its tokens before
//! the tree is built (see docs/design.md, "Bounds and interruption in the
//! SQL layer").
//!
//! sqlparser bounds its own recursion (50 levels of nested expressions and
//! queries) but builds a chain of infix operators (`a OR b OR ...`,
//! `1+1+...`, `x IS NULL IS NULL ...`, `UNION` chains) in a loop, as a tree
//! as deep as the chain. Every later pass that recurses over that tree
//! (drop, Display, Clone, binding) needs stack in proportion. The bound here
//! is an upper bound of that depth, computed in one pass over the tokens
//! with an explicit stack: within a bracket, every token that can be an
//! operator or a keyword counts one level (identifiers, literals and commas
//! do not); a bracket adds its contents' bound plus `BRACKET_LEVELS`; a
//! comma starts a new sibling (select items, arguments, VALUES rows), while
//! set operators (UNION, INTERSECT, EXCEPT) chain across commas.

use crate::error::{err_parse, SqlError};
use millrace_errcode::ER_STACK_OVERRUN_NEED_MORE;
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

/// Levels of syntax tree one bracket can add (a subquery in parentheses is
/// an expression, a query, a set expression and a select around its
/// contents).
pub const BRACKET_LEVELS: usize = 4;

/// Statements whose bound is at most this are parsed, bound and run on the
/// connection's own thread (2 MiB of stack); deeper ones on a thread with
/// [`DEEP_STACK_BYTES`].
pub const INLINE_DEPTH: usize = 48;

/// The largest bound accepted (error 1436 above it): a chain of 100,000
/// `id=N OR` terms counts 200,000.
pub const MAX_STATEMENT_DEPTH: usize = 250_000;

/// Stack of the thread a deep statement runs on: reserved address space,
/// touched only as deep as the statement goes. Sized so that dropping and
/// walking a tree of [`MAX_STATEMENT_DEPTH`] levels fits with room to spare
/// (a level of drop takes well under 200 bytes).
pub const DEEP_STACK_BYTES: usize = 256 << 20;

struct Frame {
    /// Levels counted since the last comma.
    segment: usize,
    /// The most levels any segment of this bracket counted.
    widest: usize,
    /// Set operators: they chain across commas.
    chained: usize,
    /// The deepest bracket inside.
    inner: usize,
}

impl Frame {
    fn new() -> Frame {
        Frame {
            segment: 0,
            widest: 0,
            chained: 0,
            inner: 0,
        }
    }

    fn bound(&self) -> usize {
        self.chained + self.widest.max(self.segment) + self.inner
    }
}

/// The upper bound of the syntax tree depth of `sql` (see the module
/// comment). A statement that does not tokenize is a parse error.
pub fn depth_bound(sql: &str) -> Result<usize, SqlError> {
    let tokens = Tokenizer::new(&MySqlDialect {}, sql)
        .tokenize()
        .map_err(err_parse)?;
    Ok(bound_of(&tokens))
}

fn bound_of(tokens: &[Token]) -> usize {
    let mut stack = vec![Frame::new()];
    for t in tokens {
        let open = stack.len();
        match t {
            Token::LParen | Token::LBracket | Token::LBrace => {
                stack.push(Frame::new());
                continue;
            }
            Token::RParen | Token::RBracket | Token::RBrace if open > 1 => {
                let inner = stack.pop().expect("checked").bound() + BRACKET_LEVELS;
                let top = stack.last_mut().expect("checked");
                top.inner = top.inner.max(inner);
                continue;
            }
            _ => {}
        }
        let top = stack
            .last_mut()
            .expect("the statement's own frame is never popped");
        match t {
            Token::Comma => {
                top.widest = top.widest.max(top.segment);
                top.segment = 0;
            }
            Token::Word(w)
                if matches!(
                    w.keyword,
                    Keyword::UNION | Keyword::INTERSECT | Keyword::EXCEPT
                ) =>
            {
                top.chained += 1
            }
            Token::Word(w) if w.keyword == Keyword::NoKeyword || w.quote_style.is_some() => {}
            Token::Whitespace(_)
            | Token::EOF
            | Token::SemiColon
            | Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::Placeholder(_) => {}
            _ => top.segment += 1,
        }
    }
    // Unclosed brackets (a parse error later) still count.
    let mut depth = 0;
    while let Some(mut f) = stack.pop() {
        f.inner = f.inner.max(depth);
        depth = f.bound() + BRACKET_LEVELS;
    }
    depth
}

/// Error 1436 for a statement whose bound is over [`MAX_STATEMENT_DEPTH`].
pub fn too_deep(bound: usize) -> SqlError {
    SqlError::new(
        ER_STACK_OVERRUN_NEED_MORE,
        format!(
            "Thread stack overrun: the statement may nest {bound} levels deep, more than the \
             {MAX_STATEMENT_DEPTH} allowed; split long operator chains (use IN (...) lists)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_count_and_siblings_do_not() {
        let or = depth_bound("SELECT 1 FROM t WHERE a=1 OR a=2 OR a=3").unwrap();
        let or_long = depth_bound(&format!(
            "SELECT 1 FROM t WHERE {}",
            vec!["a=1"; 1000].join(" OR ")
        ))
        .unwrap();
        assert!(or_long >= 1000 && or_long > or, "{or} {or_long}");
        let insert = format!("INSERT INTO t VALUES {}", vec!["(1,'a')"; 1000].join(","));
        assert!(depth_bound(&insert).unwrap() < INLINE_DEPTH);
        let nested = format!("SELECT {}1{}", "(".repeat(40), ")".repeat(40));
        assert!(depth_bound(&nested).unwrap() >= 40 * BRACKET_LEVELS);
        let union = vec!["SELECT 1, 2"; 100].join(" UNION ");
        assert!(depth_bound(&union).unwrap() >= 100);
        assert!(depth_bound("SELECT 1 + (2").unwrap() > BRACKET_LEVELS);
    }
}

//! Statement shapes: the text of a DML statement with its literals replaced
//! by `?`, and the literals as values. Text statements of one shape share
//! one cached plan, so a workload sending the same statements with other
//! values is planned once (the shape is found by this one pass over the
//! text, without parsing).
//!
//! A statement whose literals cannot be lifted safely (comments, `0x`
//! literals, `?` or `@` in the text, numbers glued to words) has no shape
//! and is parsed and planned every time.

use super::literal::number;
use crate::types::Value;

/// Statements longer than this are not cached (a bulk INSERT of thousands
/// of rows would only evict useful shapes).
pub const MAX_SHAPE_BYTES: usize = 4096;

/// (shape, literals) of a SELECT/INSERT/UPDATE/DELETE, or None.
pub fn shape(sql: &str) -> Option<(String, Vec<Value>)> {
    if sql.len() > MAX_SHAPE_BYTES {
        return None;
    }
    let first = sql
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()?
        .to_ascii_lowercase();
    if !matches!(first.as_str(), "select" | "insert" | "update" | "delete") {
        return None;
    }
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut lits = Vec::new();
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' | b'"' => {
                let mut v = Vec::new();
                let mut j = i + 1;
                loop {
                    let ch = *b.get(j)?;
                    if ch == b'\\' {
                        let e = *b.get(j + 1)?;
                        // MySQL keeps the backslash of \% and \_ (for LIKE).
                        if e == b'%' || e == b'_' {
                            v.push(b'\\');
                        }
                        v.push(match e {
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'r' => b'\r',
                            b'0' => 0,
                            b'Z' => 26,
                            b'b' => 8,
                            e => e,
                        });
                        j += 2;
                    } else if ch == c {
                        if b.get(j + 1) == Some(&c) {
                            v.push(c);
                            j += 2;
                        } else {
                            break;
                        }
                    } else {
                        v.push(ch);
                        j += 1;
                    }
                }
                lits.push(Value::Bytes(v));
                out.push('?');
                i = j + 1;
            }
            b'`' => {
                let end = i + 1 + b[i + 1..].iter().position(|&x| x == b'`')?;
                out.push_str(&sql[i..=end]);
                i = end + 1;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => return None,
            b'-' if b.get(i + 1) == Some(&b'-') => return None,
            b'#' | b'?' | b'@' => return None,
            b'0'..=b'9' if i == 0 || !(ident(b[i - 1]) || b[i - 1] == b'.') => {
                if c == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X' | b'b' | b'B')) {
                    return None;
                }
                let mut j = i;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
                if b.get(j) == Some(&b'.') {
                    j += 1;
                    while j < b.len() && b[j].is_ascii_digit() {
                        j += 1;
                    }
                }
                if matches!(b.get(j), Some(b'e' | b'E')) {
                    let mut k = j + 1;
                    if matches!(b.get(k), Some(b'+' | b'-')) {
                        k += 1;
                    }
                    if b.get(k).is_some_and(|d| d.is_ascii_digit()) {
                        while k < b.len() && b[k].is_ascii_digit() {
                            k += 1;
                        }
                        j = k;
                    }
                }
                if b.get(j).is_some_and(|&x| ident(x)) {
                    return None;
                }
                lits.push(number(&sql[i..j]).ok()?);
                out.push('?');
                i = j;
            }
            c if c.is_ascii_whitespace() => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
                i += 1;
            }
            _ => {
                // Copy a whole UTF-8 character.
                let len = sql[i..].chars().next()?.len_utf8();
                out.push_str(&sql[i..i + len]);
                i += len;
            }
        }
    }
    Some((out.trim_end().trim_end_matches(';').to_string(), lits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_become_parameters() {
        let (s, l) = shape("SELECT c FROM sbtest1 WHERE id BETWEEN 10 AND 109").unwrap();
        assert_eq!(s, "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?");
        assert_eq!(l, vec![Value::Int(10), Value::Int(109)]);
        let (s, l) =
            shape("INSERT INTO t (id, c) VALUES (0, 'it''s \\n a'), (-2.5, \"x\")").unwrap();
        assert_eq!(s, "INSERT INTO t (id, c) VALUES (?, ?), (-?, ?)");
        assert_eq!(
            l,
            vec![
                Value::Int(0),
                Value::Bytes(b"it's \n a".to_vec()),
                Value::Decimal {
                    unscaled: 25,
                    scale: 1
                },
                Value::Bytes(b"x".to_vec())
            ]
        );
        let (s, _) = shape("select a1, t.b2 from t2 where x=1e3").unwrap();
        assert_eq!(s, "select a1, t.b2 from t2 where x=?");
    }

    #[test]
    fn unsafe_statements_have_no_shape() {
        for sql in [
            "SELECT 0x1f",
            "SELECT /* c */ 1",
            "SELECT @@version",
            "SELECT ? FROM t",
            "SELECT 'unterminated",
            "SHOW TABLES",
            "SELECT 1abc FROM t",
        ] {
            assert!(shape(sql).is_none(), "{sql}");
        }
    }
}

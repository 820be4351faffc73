//! Literals: an SQL literal of the AST, or a number's text, as a value.

use crate::error::{err_parse, unsupported, SqlError};
use crate::types::Value;
use sqlparser::ast;

/// Converts a literal of the AST to a value.
pub fn literal(v: &ast::Value) -> Result<Value, SqlError> {
    Ok(match v {
        ast::Value::Number(s, _) => number(s)?,
        ast::Value::SingleQuotedString(s)
        | ast::Value::DoubleQuotedString(s)
        | ast::Value::EscapedStringLiteral(s)
        | ast::Value::NationalStringLiteral(s) => Value::Bytes(s.clone().into_bytes()),
        ast::Value::HexStringLiteral(h) => {
            let bytes: Option<Vec<u8>> = (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
                .collect();
            Value::Bytes(bytes.ok_or_else(|| err_parse(format!("bad hex literal {h}")))?)
        }
        ast::Value::Boolean(b) => Value::Int(i64::from(*b)),
        ast::Value::Null => Value::Null,
        other => return Err(unsupported(other)),
    })
}

/// A numeric literal: an integer if it is one (BIGINT, or BIGINT UNSIGNED
/// beyond), an exact decimal if it has a point, a double with an exponent.
pub fn number(s: &str) -> Result<Value, SqlError> {
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = s.parse::<u64>() {
        return Ok(Value::UInt(u));
    }
    if !s.contains(['e', 'E']) {
        if let Some((int, frac)) = s.split_once('.') {
            let digits = format!("{int}{frac}");
            if frac.len() <= 30 {
                if let Ok(unscaled) = digits.parse::<i128>() {
                    return Ok(Value::Decimal {
                        unscaled,
                        scale: frac.len() as u8,
                    });
                }
            }
        }
    }
    s.parse::<f64>()
        .map(Value::Double)
        .map_err(|_| err_parse(format!("bad number {s}")))
}

//! Prepared statements' parameters: the binary values of COM_STMT_EXECUTE
//! and the per-connection state of each statement (its parameter count,
//! the parameter types the client bound last, data sent with
//! COM_STMT_SEND_LONG_DATA).
//!
//! A client sends the parameter types with the first execute of a statement
//! (new-params-bound flag 1) and usually not again (flag 0): the types are
//! remembered per statement and reused.

use super::packet::{ProtocolError, Reader};
use millrace_sql::{DateTime, Value};
use std::collections::HashMap;

/// The parameter types a statement was last executed with: two bytes per
/// parameter (the type, then a flags byte whose 0x80 bit means unsigned).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamTypes(Option<Vec<u8>>);

/// Decodes the parameters of COM_STMT_EXECUTE (`params`: what follows the
/// iteration count) for a statement of `count` parameters. `types` are the
/// statement's remembered types: replaced when the packet binds new ones
/// (and the whole packet decodes). `long[i]` is the data sent for
/// parameter `i` with COM_STMT_SEND_LONG_DATA; such a parameter has no
/// value in the packet.
pub fn decode_execute(
    params: &[u8],
    count: u16,
    types: &mut ParamTypes,
    long: &[Option<Vec<u8>>],
) -> Result<Vec<Value>, ProtocolError> {
    let n = usize::from(count);
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut r = Reader::new(params);
    let nulls = r.take(n.div_ceil(8), "null bitmap")?;
    let bound = r.u8("new-params-bound flag")?;
    let new_types = match bound {
        0 => None,
        1 => Some(r.take(2 * n, "parameter types")?),
        _ => return Err(ProtocolError::Malformed("new-params-bound flag")),
    };
    let t: &[u8] = match (new_types, &types.0) {
        (Some(t), _) => t,
        (None, Some(t)) if t.len() == 2 * n => t,
        (None, _) => return Err(ProtocolError::Malformed("parameter types never bound")),
    };
    let mut values = Vec::with_capacity(n);
    for i in 0..n {
        if nulls[i / 8] & (1 << (i % 8)) != 0 {
            values.push(Value::Null);
            continue;
        }
        if let Some(Some(data)) = long.get(i) {
            values.push(Value::Bytes(data.clone()));
            continue;
        }
        let unsigned = t[2 * i + 1] & 0x80 != 0;
        values.push(binary_value(&mut r, t[2 * i], unsigned)?);
    }
    if let Some(t) = new_types {
        types.0 = Some(t.to_vec());
    }
    Ok(values)
}

/// One value of the binary protocol, of MySQL type `ty`.
fn binary_value(r: &mut Reader<'_>, ty: u8, unsigned: bool) -> Result<Value, ProtocolError> {
    const V: &str = "parameter value";
    Ok(match ty {
        // MYSQL_TYPE_NULL
        0x06 => Value::Null,
        // TINY
        0x01 => {
            let b = r.u8(V)?;
            if unsigned {
                Value::UInt(u64::from(b))
            } else {
                Value::Int(i64::from(b as i8))
            }
        }
        // SHORT, YEAR
        0x02 | 0x0d => {
            let v = r.u16(V)?;
            if unsigned {
                Value::UInt(u64::from(v))
            } else {
                Value::Int(i64::from(v as i16))
            }
        }
        // LONG, INT24
        0x03 | 0x09 => {
            let v = r.u32(V)?;
            if unsigned {
                Value::UInt(u64::from(v))
            } else {
                Value::Int(i64::from(v as i32))
            }
        }
        // LONGLONG
        0x08 => {
            let v = r.u64(V)?;
            if unsigned {
                Value::UInt(v)
            } else {
                Value::Int(v as i64)
            }
        }
        // FLOAT, DOUBLE
        0x04 => Value::Double(f64::from(f32::from_bits(r.u32(V)?))),
        0x05 => Value::Double(f64::from_bits(r.u64(V)?)),
        // TIMESTAMP, DATE, DATETIME
        0x07 | 0x0a | 0x0c => binary_datetime(r)?,
        // TIME
        0x0b => binary_time(r)?,
        // DECIMAL, VARCHAR, BIT, JSON, NEWDECIMAL, ENUM, SET, the BLOBs,
        // VAR_STRING, STRING, GEOMETRY: length-encoded bytes.
        0x00 | 0x0f | 0x10 | 0xf5..=0xff => Value::Bytes(r.lenenc_bytes(V)?.to_vec()),
        _ => return Err(ProtocolError::Malformed("parameter type")),
    })
}

/// Length 0, 4 (date), 7 (and time) or 11 (and microseconds).
fn binary_datetime(r: &mut Reader<'_>) -> Result<Value, ProtocolError> {
    const V: &str = "datetime value";
    let len = r.u8(V)?;
    if !matches!(len, 0 | 4 | 7 | 11) {
        return Err(ProtocolError::Malformed(V));
    }
    let b = r.take(usize::from(len), V)?;
    let g = |i: usize| b.get(i).copied().unwrap_or(0);
    Ok(Value::DateTime(DateTime {
        year: u16::from_le_bytes([g(0), g(1)]),
        month: g(2),
        day: g(3),
        hour: g(4),
        minute: g(5),
        second: g(6),
        micro: u32::from_le_bytes([g(7), g(8), g(9), g(10)]),
    }))
}

/// Length 0, 8 or 12: sign, days, hours, minutes, seconds[, micro]; passed
/// on as MySQL's text form `[-]HHH:MM:SS[.ffffff]`.
fn binary_time(r: &mut Reader<'_>) -> Result<Value, ProtocolError> {
    const V: &str = "time value";
    let len = r.u8(V)?;
    if !matches!(len, 0 | 8 | 12) {
        return Err(ProtocolError::Malformed(V));
    }
    let b = r.take(usize::from(len), V)?;
    if b.is_empty() {
        return Ok(Value::Bytes(b"00:00:00".to_vec()));
    }
    let days = u64::from(u32::from_le_bytes([b[1], b[2], b[3], b[4]]));
    let hours = days * 24 + u64::from(b[5]);
    let sign = if b[0] == 1 { "-" } else { "" };
    let mut text = format!("{sign}{hours:02}:{:02}:{:02}", b[6], b[7]);
    if len == 12 {
        let micro = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        text.push_str(&format!(".{micro:06}"));
    }
    Ok(Value::Bytes(text.into_bytes()))
}

/// One prepared statement as the connection keeps it.
#[derive(Debug, Default)]
pub struct StmtState {
    pub params: u16,
    pub types: ParamTypes,
    /// Per parameter, data sent with COM_STMT_SEND_LONG_DATA.
    pub long_data: Vec<Option<Vec<u8>>>,
    long_bytes: usize,
    /// Long data went past the bound: the next execute fails.
    pub long_too_large: bool,
}

impl StmtState {
    pub fn new(params: u16) -> Self {
        StmtState {
            params,
            long_data: vec![None; usize::from(params)],
            ..StmtState::default()
        }
    }

    /// Appends long data to a parameter; past `limit_bytes` in all (for the
    /// statement) the data is dropped and the next execute fails. An
    /// unknown parameter number is ignored (the command has no reply).
    pub fn append_long_data(&mut self, param: u16, data: &[u8], limit_bytes: usize) {
        let Some(slot) = self.long_data.get_mut(usize::from(param)) else {
            return;
        };
        if self.long_too_large || self.long_bytes + data.len() > limit_bytes {
            self.long_too_large = true;
            self.clear_long_data_only();
            return;
        }
        self.long_bytes += data.len();
        slot.get_or_insert_with(Vec::new).extend_from_slice(data);
    }

    fn clear_long_data_only(&mut self) {
        for d in &mut self.long_data {
            *d = None;
        }
        self.long_bytes = 0;
    }

    /// COM_STMT_RESET, and after every execute: long data is forgotten.
    pub fn reset(&mut self) {
        self.clear_long_data_only();
        self.long_too_large = false;
    }
}

/// A connection's prepared statements, by id.
pub type StmtTable = HashMap<u32, StmtState>;

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(nulls: &[u8], bound: u8, types: &[u8], values: &[u8]) -> Vec<u8> {
        let mut p = nulls.to_vec();
        p.push(bound);
        p.extend_from_slice(types);
        p.extend_from_slice(values);
        p
    }

    #[test]
    fn types_are_remembered_from_the_first_execute() {
        let mut t = ParamTypes::default();
        let types = [0xfe, 0, 0x03, 0x80];
        let first = exec(&[0], 1, &types, b"\x01a\xff\xff\xff\xff");
        let v = decode_execute(&first, 2, &mut t, &[None, None]).unwrap();
        assert_eq!(
            v,
            [Value::Bytes(b"a".to_vec()), Value::UInt(u32::MAX.into())]
        );
        let second = exec(&[0], 0, &[], b"\x02bc\xfe\xff\xff\xff");
        let v = decode_execute(&second, 2, &mut t, &[None, None]).unwrap();
        assert_eq!(v, [Value::Bytes(b"bc".to_vec()), Value::UInt(0xffff_fffe)]);
        // NULL in the bitmap; long data in place of a value.
        let third = exec(&[1], 0, &[], b"");
        let long = [None, Some(b"long".to_vec())];
        let v = decode_execute(&third, 2, &mut t, &long).unwrap();
        assert_eq!(v, [Value::Null, Value::Bytes(b"long".to_vec())]);
        // No types ever: an error, and a bad packet does not replace them.
        let mut fresh = ParamTypes::default();
        assert!(decode_execute(&second, 2, &mut fresh, &[None, None]).is_err());
        let bad = exec(&[0], 1, &[0x08, 0, 0x08, 0], b"\x01");
        assert!(decode_execute(&bad, 2, &mut t, &[None, None]).is_err());
        assert_eq!(t.0.as_deref(), Some(&types[..]));
    }

    #[test]
    fn every_binary_type_decodes() {
        let mut t = ParamTypes::default();
        let mut types = Vec::new();
        let mut values = Vec::new();
        let mut add = |ty: u8, flags: u8, bytes: &[u8]| {
            types.extend_from_slice(&[ty, flags]);
            values.extend_from_slice(bytes);
        };
        add(0x01, 0, &[0xff]);
        add(0x01, 0x80, &[0xff]);
        add(0x02, 0, &(-2i16).to_le_bytes());
        add(0x03, 0, &(-3i32).to_le_bytes());
        add(0x08, 0, &(-4i64).to_le_bytes());
        add(0x04, 0, &1.5f32.to_le_bytes());
        add(0x05, 0, &2.25f64.to_le_bytes());
        add(0x0c, 0, &[7, 0xe8, 0x07, 2, 3, 4, 5, 6]);
        add(0x0b, 0, &[8, 1, 1, 0, 0, 0, 2, 3, 4]);
        add(0xf6, 0, b"\x041.50");
        add(0x06, 0, &[]);
        let n = 11;
        let p = exec(&[0, 0], 1, &types, &values);
        let v = decode_execute(&p, n, &mut t, &vec![None; 11]).unwrap();
        assert_eq!(
            v,
            [
                Value::Int(-1),
                Value::UInt(255),
                Value::Int(-2),
                Value::Int(-3),
                Value::Int(-4),
                Value::Double(1.5),
                Value::Double(2.25),
                Value::DateTime(DateTime {
                    year: 2024,
                    month: 2,
                    day: 3,
                    hour: 4,
                    minute: 5,
                    second: 6,
                    micro: 0
                }),
                Value::Bytes(b"-26:03:04".to_vec()),
                Value::Bytes(b"1.50".to_vec()),
                Value::Null,
            ]
        );
        // A datetime of a length the protocol does not have.
        let p = exec(&[0], 1, &[0x0c, 0], &[5, 1, 2, 3, 4, 5]);
        assert!(decode_execute(&p, 1, &mut t, &[None]).is_err());
    }

    #[test]
    fn long_data_is_bounded() {
        let mut s = StmtState::new(2);
        s.append_long_data(1, b"abc", 5);
        s.append_long_data(1, b"de", 5);
        assert_eq!(s.long_data[1].as_deref(), Some(&b"abcde"[..]));
        s.append_long_data(9, b"ignored", 5);
        s.append_long_data(0, b"f", 5);
        assert!(s.long_too_large);
        assert!(s.long_data.iter().all(Option::is_none));
        s.reset();
        assert!(!s.long_too_large);
    }
}

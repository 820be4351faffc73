//! The stored row format of a table (the value of its clustered index).
//!
//! ```text
//! version: u8 = 1
//! columns: u16 LE, the number of columns
//! nulls:   ceil(columns / 8) bytes, bit i (LSB first) set when column i is NULL;
//!          the unused high bits of the last byte are 0
//! then each non-NULL column in order:
//!   TINYINT 1, SMALLINT 2, INT 4, BIGINT 8 bytes, little-endian
//!     (two's complement when signed)
//!   DOUBLE     8 bytes, the IEEE bits little-endian (-0.0 is kept)
//!   DECIMAL    scale u8 (the column's) + unscaled i128 LE (17 bytes)
//!   CHAR, VARCHAR, TEXT, BLOB   length u32 LE + the bytes
//!   DATETIME, TIMESTAMP         the packed datetime, u64 LE
//! ```
//!
//! Decoding checks everything: version, column count, padding bits, lengths,
//! that each value is a stored value of its column type and that no bytes
//! follow the last column.

use crate::types::{scalar, unpack_datetime, ColumnType, Scalar, Value};
use crate::CodecError;

pub const ROW_FORMAT_VERSION: u8 = 1;

fn fixed_size(ty: &ColumnType) -> Option<usize> {
    Some(match ty {
        ColumnType::TinyInt { .. } => 1,
        ColumnType::SmallInt { .. } => 2,
        ColumnType::Int { .. } => 4,
        ColumnType::BigInt { .. } | ColumnType::Double => 8,
        ColumnType::Decimal { .. } => 17,
        ColumnType::DateTime | ColumnType::Timestamp => 8,
        ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::Text | ColumnType::Blob => {
            return None
        }
    })
}

/// Appends the row encoding of `values` (one per type, each NULL or a stored
/// value of its column type, as `Value::coerce` makes them) to `out`. On an
/// error `out` is left as it was.
pub fn encode_row(
    values: &[Value],
    types: &[ColumnType],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    if values.len() != types.len() || types.len() > u16::MAX as usize {
        return Err(CodecError::ColumnCount {
            expected: types.len(),
            got: values.len(),
        });
    }
    let start = out.len();
    out.push(ROW_FORMAT_VERSION);
    out.extend_from_slice(&(types.len() as u16).to_le_bytes());
    let bitmap = out.len();
    out.resize(bitmap + types.len().div_ceil(8), 0);
    for (i, (v, ty)) in values.iter().zip(types).enumerate() {
        if v.is_null() {
            out[bitmap + i / 8] |= 1 << (i % 8);
            continue;
        }
        let Some(s) = scalar(v, ty) else {
            out.truncate(start);
            return Err(CodecError::TypeMismatch { column: i });
        };
        let width = fixed_size(ty).unwrap_or(0);
        match s {
            Scalar::I(x) => out.extend_from_slice(&x.to_le_bytes()[..width]),
            Scalar::U(x) => out.extend_from_slice(&x.to_le_bytes()[..width]),
            Scalar::F(f) => out.extend_from_slice(&f.to_bits().to_le_bytes()),
            Scalar::D(u) => {
                let ColumnType::Decimal { scale, .. } = ty else {
                    unreachable!("a decimal scalar comes from a decimal column")
                };
                out.push(*scale);
                out.extend_from_slice(&u.to_le_bytes());
            }
            Scalar::B(b) => {
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
            Scalar::T(p) => out.extend_from_slice(&p.to_le_bytes()),
        }
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        match self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()) {
            Some(e) => {
                let s = &self.bytes[self.pos..e];
                self.pos = e;
                Ok(s)
            }
            None => Err(CodecError::Truncated { offset: self.pos }),
        }
    }
}

fn malformed(offset: usize, what: &'static str) -> CodecError {
    CodecError::Malformed { offset, what }
}

/// Reads the header; returns the reader (past the bitmap) and the bitmap.
fn header<'a>(bytes: &'a [u8], types: &[ColumnType]) -> Result<(Reader<'a>, &'a [u8]), CodecError> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(1)?[0] != ROW_FORMAT_VERSION {
        return Err(malformed(0, "unknown row format version"));
    }
    let n = u16::from_le_bytes(r.take(2)?.try_into().expect("2 bytes")) as usize;
    if n != types.len() {
        return Err(CodecError::ColumnCount {
            expected: types.len(),
            got: n,
        });
    }
    let at = r.pos;
    let bitmap = r.take(n.div_ceil(8))?;
    if n % 8 != 0 && bitmap[n / 8] >> (n % 8) != 0 {
        return Err(malformed(
            at + n / 8,
            "null bitmap bits beyond the last column",
        ));
    }
    Ok((r, bitmap))
}

fn is_null(bitmap: &[u8], i: usize) -> bool {
    bitmap[i / 8] & (1 << (i % 8)) != 0
}

fn le_u64(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(x)
}

/// Decodes one non-NULL value of type `ty` at the reader's position.
fn read_value(r: &mut Reader<'_>, ty: &ColumnType) -> Result<Value, CodecError> {
    let at = r.pos;
    let v = match ty {
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => {
            let w = fixed_size(ty).expect("fixed");
            let raw = le_u64(r.take(w)?);
            if ty.is_unsigned() {
                Value::UInt(raw)
            } else {
                // Sign-extend from w bytes.
                let shift = 64 - 8 * w as u32;
                Value::Int(((raw << shift) as i64) >> shift)
            }
        }
        ColumnType::Double => Value::Double(f64::from_bits(le_u64(r.take(8)?))),
        ColumnType::Decimal { scale, .. } => {
            if r.take(1)?[0] != *scale {
                return Err(malformed(at, "decimal scale differs from the column's"));
            }
            let u = i128::from_le_bytes(r.take(16)?.try_into().expect("16 bytes"));
            Value::Decimal {
                unscaled: u,
                scale: *scale,
            }
        }
        ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::Text | ColumnType::Blob => {
            let len = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes")) as usize;
            Value::Bytes(r.take(len)?.to_vec())
        }
        ColumnType::DateTime | ColumnType::Timestamp => unpack_datetime(le_u64(r.take(8)?))
            .ok_or(malformed(at, "bits beyond the packed datetime"))?,
    };
    if scalar(&v, ty).is_none() {
        return Err(malformed(at, "value outside its column type"));
    }
    Ok(v)
}

/// Skips one non-NULL value of type `ty` without decoding it.
fn skip_value(r: &mut Reader<'_>, ty: &ColumnType) -> Result<(), CodecError> {
    let n = match fixed_size(ty) {
        Some(n) => n,
        None => u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes")) as usize,
    };
    r.take(n).map(|_| ())
}

/// Decodes a whole row of `types`.
pub fn decode_row(bytes: &[u8], types: &[ColumnType]) -> Result<Vec<Value>, CodecError> {
    let (mut r, bitmap) = header(bytes, types)?;
    let mut values = Vec::with_capacity(types.len());
    for (i, ty) in types.iter().enumerate() {
        if is_null(bitmap, i) {
            values.push(Value::Null);
        } else {
            values.push(read_value(&mut r, ty)?);
        }
    }
    if r.pos != bytes.len() {
        return Err(CodecError::TrailingBytes { offset: r.pos });
    }
    Ok(values)
}

/// Decodes column `index` of a row, skipping the columns before it without
/// decoding them. It checks only the header and the bytes it reads, so it
/// may succeed on a row that `decode_row` rejects for damage elsewhere.
pub fn decode_column(
    bytes: &[u8],
    types: &[ColumnType],
    index: usize,
) -> Result<Value, CodecError> {
    if index >= types.len() {
        return Err(CodecError::NoSuchColumn {
            index,
            columns: types.len(),
        });
    }
    let (mut r, bitmap) = header(bytes, types)?;
    for (i, ty) in types[..index].iter().enumerate() {
        if !is_null(bitmap, i) {
            skip_value(&mut r, ty)?;
        }
    }
    if is_null(bitmap, index) {
        return Ok(Value::Null);
    }
    read_value(&mut r, &types[index])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_as_documented() {
        let types = [
            ColumnType::SmallInt { unsigned: false },
            ColumnType::VarChar(10),
            ColumnType::Double,
        ];
        let mut out = Vec::new();
        encode_row(
            &[Value::Int(-2), Value::Null, Value::Double(1.0)],
            &types,
            &mut out,
        )
        .unwrap();
        let mut want = vec![1, 3, 0, 0b010, 0xFE, 0xFF];
        want.extend_from_slice(&1.0f64.to_bits().to_le_bytes());
        assert_eq!(out, want);
        assert_eq!(decode_column(&out, &types, 2).unwrap(), Value::Double(1.0));
        assert_eq!(decode_column(&out, &types, 1).unwrap(), Value::Null);
        assert_eq!(
            decode_column(&out, &types, 3),
            Err(CodecError::NoSuchColumn {
                index: 3,
                columns: 3
            })
        );
    }

    #[test]
    fn encode_checks_counts_and_types() {
        let types = [ColumnType::TinyInt { unsigned: true }];
        let mut out = vec![9];
        assert_eq!(
            encode_row(&[], &types, &mut out),
            Err(CodecError::ColumnCount {
                expected: 1,
                got: 0
            })
        );
        assert_eq!(
            encode_row(&[Value::UInt(256)], &types, &mut out),
            Err(CodecError::TypeMismatch { column: 0 })
        );
        assert_eq!(out, [9]);
    }

    #[test]
    fn decode_rejects_bad_headers() {
        let types = [ColumnType::Int { unsigned: false }];
        let mut out = Vec::new();
        encode_row(&[Value::Null], &types, &mut out).unwrap();
        assert_eq!(out, [1, 1, 0, 1]);
        assert!(matches!(
            decode_row(&[2, 1, 0, 1], &types),
            Err(CodecError::Malformed { .. })
        ));
        assert!(matches!(
            decode_row(&[1, 1, 0, 3], &types),
            Err(CodecError::Malformed { .. })
        ));
        assert!(matches!(
            decode_row(&[1, 2, 0, 1], &types),
            Err(CodecError::ColumnCount { .. })
        ));
        assert!(matches!(
            decode_row(&[1, 1, 0, 1, 0], &types),
            Err(CodecError::TrailingBytes { .. })
        ));
    }
}

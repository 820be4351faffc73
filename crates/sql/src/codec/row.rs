//! The stored row format of a table (the value of its clustered index).
//!
//! ```text
//! version: u8: 1, or 2 when at least one value is stored out of line
//! columns: u16 LE, the number of columns
//! nulls:   ceil(columns / 8) bytes, bit i (LSB first) set when column i is NULL;
//!          the unused high bits of the last byte are 0
//! external (version 2 only): ceil(columns / 8) bytes, bit i set when column
//!          i is stored out of line; only non-NULL CHAR, VARCHAR, TEXT and
//!          BLOB columns, at least one bit set, unused high bits 0
//! then each non-NULL column in order:
//!   TINYINT 1, SMALLINT 2, INT 4, BIGINT 8 bytes, little-endian
//!     (two's complement when signed)
//!   DOUBLE     8 bytes, the IEEE bits little-endian (-0.0 is kept)
//!   DECIMAL    scale u8 (the column's) + unscaled i128 LE (17 bytes)
//!   CHAR, VARCHAR, TEXT, BLOB   length u32 LE + the bytes, or, stored out
//!     of line, a pointer ([`ExternalRef`], 16 bytes): value id u64 LE,
//!     length u32 LE (1 ..= the type's maximum bytes), crc32c u32 LE of the
//!     whole value
//!   DATETIME, TIMESTAMP         the packed datetime, u64 LE
//! ```
//!
//! A row without out-of-line values is always written as version 1, so rows
//! of tables that never hold long values are what they were before version 2
//! existed, and both versions decode.
//!
//! Decoding checks everything: version, column count, padding bits, lengths,
//! that each value is a stored value of its column type and that no bytes
//! follow the last column. Where the chunks of an out-of-line value live (the
//! table's toast table) is the session's business (`toast.rs`).

use crate::error::CodecError;
use crate::types::{scalar, ColumnType, DateTime, Scalar, Value};
use millrace_io::bytes::{ByteReader, Truncated};

/// The version of a row whose values are all inline.
pub const ROW_FORMAT_VERSION: u8 = 1;
/// The version of a row with at least one value stored out of line.
pub const ROW_FORMAT_EXTERNAL: u8 = 2;
/// The bytes a pointer to an out-of-line value takes in a row.
pub const EXTERNAL_REF_BYTES: usize = 16;

/// Where a value stored out of line is: its id in the table's toast table,
/// its length and the crc32c of all its bytes (so a damaged or missing chunk
/// is found when the value is read, never returned as data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExternalRef {
    pub id: u64,
    pub len: u32,
    pub crc: u32,
}

impl ExternalRef {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.crc.to_le_bytes());
    }
}

/// The pointers of a row's values stored out of line: (column, pointer),
/// ascending columns.
pub type ExternalRefs = Vec<(usize, ExternalRef)>;

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

/// The most bytes a value of a variable-length type can have (CHAR(n) and
/// VARCHAR(n): n characters of at most 4 UTF-8 bytes); `None` for the fixed
/// size types.
pub fn max_value_bytes(ty: &ColumnType) -> Option<usize> {
    match ty {
        ColumnType::Char(n) | ColumnType::VarChar(n) => Some((*n as usize).saturating_mul(4)),
        ColumnType::Text | ColumnType::Blob => Some(crate::types::MAX_TEXT_BYTES),
        _ => None,
    }
}

/// The most bytes the encoding of one non-NULL value of `ty` can take
/// inline (saturating).
pub fn max_encoded_bytes(ty: &ColumnType) -> usize {
    fixed_size(ty).unwrap_or_else(|| max_value_bytes(ty).unwrap_or(0).saturating_add(4))
}

/// Appends the row encoding of `values` (one per type, each NULL or a stored
/// value of its column type, as `Value::coerce` makes them) to `out`. On an
/// error `out` is left as it was.
pub fn encode_row(
    values: &[Value],
    types: &[ColumnType],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    encode_row_external(values, &[], types, out)
}

/// As [`encode_row`], except that the columns named in `external` (column,
/// pointer; ascending columns) are written as pointers to values stored out
/// of line: their entries in `values` are not read. With any such column the
/// row is written as version 2.
pub fn encode_row_external(
    values: &[Value],
    external: &[(usize, ExternalRef)],
    types: &[ColumnType],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    if values.len() != types.len() || types.len() > u16::MAX as usize {
        return Err(CodecError::ColumnCount {
            expected: types.len(),
            got: values.len(),
        });
    }
    for (i, &(c, _)) in external.iter().enumerate() {
        let ascending = i == 0 || external[i - 1].0 < c;
        if !ascending || c >= types.len() || max_value_bytes(&types[c]).is_none() {
            return Err(CodecError::TypeMismatch { column: c });
        }
    }
    let start = out.len();
    out.push(if external.is_empty() {
        ROW_FORMAT_VERSION
    } else {
        ROW_FORMAT_EXTERNAL
    });
    out.extend_from_slice(&(types.len() as u16).to_le_bytes());
    let bitmap = out.len();
    let bitmap_len = types.len().div_ceil(8);
    out.resize(bitmap + bitmap_len, 0);
    if !external.is_empty() {
        out.resize(bitmap + 2 * bitmap_len, 0);
        for &(c, _) in external {
            out[bitmap + bitmap_len + c / 8] |= 1 << (c % 8);
        }
    }
    let mut ext = external.iter().peekable();
    for (i, (v, ty)) in values.iter().zip(types).enumerate() {
        if let Some((_, r)) = ext.next_if(|(c, _)| *c == i) {
            r.encode(out);
            continue;
        }
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

impl From<Truncated> for CodecError {
    fn from(t: Truncated) -> Self {
        CodecError::Truncated { offset: t.at }
    }
}

fn malformed(offset: usize, what: &'static str) -> CodecError {
    CodecError::Malformed { offset, what }
}

/// A row's header: the null bitmap and (version 2) the external bitmap.
struct Header<'a> {
    nulls: &'a [u8],
    external: Option<&'a [u8]>,
}

impl Header<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.nulls[i / 8] & (1 << (i % 8)) != 0
    }

    fn is_external(&self, i: usize) -> bool {
        self.external
            .is_some_and(|b| b[i / 8] & (1 << (i % 8)) != 0)
    }
}

/// Reads and checks the header; returns the reader (past the bitmaps).
fn header<'a>(
    bytes: &'a [u8],
    types: &[ColumnType],
) -> Result<(ByteReader<'a>, Header<'a>), CodecError> {
    let mut r = ByteReader::new(bytes);
    let version = r.u8()?;
    if version != ROW_FORMAT_VERSION && version != ROW_FORMAT_EXTERNAL {
        return Err(malformed(0, "unknown row format version"));
    }
    let n = r.u16()? as usize;
    if n != types.len() {
        return Err(CodecError::ColumnCount {
            expected: types.len(),
            got: n,
        });
    }
    let padding = |at: usize, bitmap: &[u8]| {
        if n % 8 != 0 && bitmap[n / 8] >> (n % 8) != 0 {
            return Err(malformed(at + n / 8, "bitmap bits beyond the last column"));
        }
        Ok(())
    };
    let at = r.position();
    let nulls = r.take(n.div_ceil(8))?;
    padding(at, nulls)?;
    let mut h = Header {
        nulls,
        external: None,
    };
    if version == ROW_FORMAT_EXTERNAL {
        let at = r.position();
        let ext = r.take(n.div_ceil(8))?;
        padding(at, ext)?;
        h.external = Some(ext);
        let mut any = false;
        for (i, ty) in types.iter().enumerate() {
            if h.is_external(i) {
                if h.is_null(i) || max_value_bytes(ty).is_none() {
                    return Err(malformed(
                        at + i / 8,
                        "a NULL or fixed-size column marked out of line",
                    ));
                }
                any = true;
            }
        }
        if !any {
            return Err(malformed(at, "a version 2 row without out-of-line values"));
        }
    }
    Ok((r, h))
}

fn le_u64(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(x)
}

/// Decodes a pointer to an out-of-line value of type `ty`.
fn read_external(r: &mut ByteReader<'_>, ty: &ColumnType) -> Result<ExternalRef, CodecError> {
    let at = r.position();
    let b = r.take(EXTERNAL_REF_BYTES)?;
    let e = ExternalRef {
        id: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
        len: u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
        crc: u32::from_le_bytes(b[12..].try_into().expect("4 bytes")),
    };
    let max = max_value_bytes(ty).unwrap_or(0);
    if e.len == 0 || e.len as usize > max {
        return Err(malformed(
            at + 8,
            "out-of-line value length outside its column type",
        ));
    }
    Ok(e)
}

/// Decodes one non-NULL value of type `ty` at the reader's position.
fn read_value(r: &mut ByteReader<'_>, ty: &ColumnType) -> Result<Value, CodecError> {
    let at = r.position();
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
        ColumnType::Double => Value::Double(f64::from_bits(r.u64()?)),
        ColumnType::Decimal { scale, .. } => {
            if r.u8()? != *scale {
                return Err(malformed(at, "decimal scale differs from the column's"));
            }
            let u = r.i128()?;
            Value::Decimal {
                unscaled: u,
                scale: *scale,
            }
        }
        ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::Text | ColumnType::Blob => {
            let len = r.u32()? as usize;
            Value::Bytes(r.take(len)?.to_vec())
        }
        ColumnType::DateTime | ColumnType::Timestamp => Value::DateTime(
            DateTime::unpack(r.u64()?).ok_or(malformed(at, "bits beyond the packed datetime"))?,
        ),
    };
    if scalar(&v, ty).is_none() {
        return Err(malformed(at, "value outside its column type"));
    }
    Ok(v)
}

/// Skips one non-NULL value of type `ty` without decoding it.
fn skip_value(r: &mut ByteReader<'_>, ty: &ColumnType, external: bool) -> Result<(), CodecError> {
    let n = match fixed_size(ty) {
        _ if external => EXTERNAL_REF_BYTES,
        Some(n) => n,
        None => r.u32()? as usize,
    };
    r.take(n)?;
    Ok(())
}

/// Decodes a whole row of `types` whose values are all inline; a row with
/// an out-of-line value gives `OutOfLine` (use [`decode_row_external`]).
pub fn decode_row(bytes: &[u8], types: &[ColumnType]) -> Result<Vec<Value>, CodecError> {
    let (values, external) = decode_row_external(bytes, types)?;
    match external.first() {
        None => Ok(values),
        Some(&(column, _)) => Err(CodecError::OutOfLine { column }),
    }
}

/// Decodes a whole row of `types` of either version: the values, with NULL
/// in place of each value stored out of line, and the pointers to those
/// (column, pointer; ascending columns; empty for a version 1 row).
pub fn decode_row_external(
    bytes: &[u8],
    types: &[ColumnType],
) -> Result<(Vec<Value>, ExternalRefs), CodecError> {
    let (mut r, h) = header(bytes, types)?;
    let mut values = Vec::with_capacity(types.len());
    let mut external = Vec::new();
    for (i, ty) in types.iter().enumerate() {
        if h.is_external(i) {
            external.push((i, read_external(&mut r, ty)?));
            values.push(Value::Null);
        } else if h.is_null(i) {
            values.push(Value::Null);
        } else {
            values.push(read_value(&mut r, ty)?);
        }
    }
    if r.position() != bytes.len() {
        return Err(CodecError::TrailingBytes {
            offset: r.position(),
        });
    }
    Ok((values, external))
}

/// Decodes column `index` of a row, skipping the columns before it without
/// decoding them. It checks only the header and the bytes it reads, so it
/// may succeed on a row that `decode_row` rejects for damage elsewhere. A
/// column stored out of line gives `OutOfLine`.
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
    let (mut r, h) = header(bytes, types)?;
    for (i, ty) in types[..index].iter().enumerate() {
        if !h.is_null(i) || h.is_external(i) {
            skip_value(&mut r, ty, h.is_external(i))?;
        }
    }
    if h.is_external(index) {
        read_external(&mut r, &types[index])?;
        return Err(CodecError::OutOfLine { column: index });
    }
    if h.is_null(index) {
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
            decode_row(&[3, 1, 0, 1], &types),
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

    fn ext(id: u64, len: u32) -> ExternalRef {
        ExternalRef {
            id,
            len,
            crc: 0xA1B2_C3D4,
        }
    }

    #[test]
    fn external_layout_is_as_documented() {
        let types = [
            ColumnType::TinyInt { unsigned: true },
            ColumnType::Text,
            ColumnType::Blob,
        ];
        let vals = [Value::UInt(7), Value::Null, Value::Bytes(b"ab".to_vec())];
        let mut out = Vec::new();
        // Column 1's value is out of line: its entry in `vals` is not read.
        encode_row_external(&vals, &[(1, ext(0x0102, 5000))], &types, &mut out).unwrap();
        let mut want = vec![2, 3, 0, 0b000, 0b010, 7];
        want.extend_from_slice(&0x0102u64.to_le_bytes());
        want.extend_from_slice(&5000u32.to_le_bytes());
        want.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
        want.extend_from_slice(&[2, 0, 0, 0, b'a', b'b']);
        assert_eq!(out, want);
        let (values, external) = decode_row_external(&out, &types).unwrap();
        assert_eq!(
            values,
            [Value::UInt(7), Value::Null, Value::Bytes(b"ab".to_vec())]
        );
        assert_eq!(external, [(1, ext(0x0102, 5000))]);
        assert_eq!(
            decode_row(&out, &types),
            Err(CodecError::OutOfLine { column: 1 })
        );
        assert_eq!(
            decode_column(&out, &types, 1),
            Err(CodecError::OutOfLine { column: 1 })
        );
        // Columns after an out-of-line one are found past its pointer.
        assert_eq!(
            decode_column(&out, &types, 2).unwrap(),
            Value::Bytes(b"ab".to_vec())
        );
        assert_eq!(decode_column(&out, &types, 0).unwrap(), Value::UInt(7));
        // Without pointers the row is version 1, as before.
        let mut v1 = Vec::new();
        encode_row_external(&vals, &[], &types, &mut v1).unwrap();
        assert_eq!(v1[0], ROW_FORMAT_VERSION);
        assert_eq!(decode_row_external(&v1, &types).unwrap().1, []);
    }

    #[test]
    fn external_encoding_checks_columns() {
        let types = [ColumnType::Int { unsigned: false }, ColumnType::Text];
        let vals = [Value::Int(1), Value::Null];
        let mut out = vec![9];
        for bad in [
            vec![(0, ext(1, 10))],
            vec![(2, ext(1, 10))],
            vec![(1, ext(1, 10)), (1, ext(2, 10))],
        ] {
            assert!(matches!(
                encode_row_external(&vals, &bad, &types, &mut out),
                Err(CodecError::TypeMismatch { .. })
            ));
        }
        assert_eq!(out, [9]);
    }

    #[test]
    fn external_decoding_rejects_damage() {
        let types = [ColumnType::Int { unsigned: false }, ColumnType::VarChar(10)];
        let mut good = Vec::new();
        encode_row_external(
            &[Value::Int(1), Value::Null],
            &[(1, ext(5, 40))],
            &types,
            &mut good,
        )
        .unwrap();
        assert!(decode_row_external(&good, &types).is_ok());
        let damaged = |at: usize, byte: u8| {
            let mut b = good.clone();
            b[at] = byte;
            decode_row_external(&b, &types)
        };
        // Bitmaps: [3] nulls, [4] external.
        assert!(matches!(damaged(4, 0), Err(CodecError::Malformed { .. })));
        assert!(matches!(
            damaged(4, 0b01),
            Err(CodecError::Malformed { .. })
        ));
        assert!(matches!(
            damaged(4, 0b110),
            Err(CodecError::Malformed { .. })
        ));
        assert!(matches!(
            damaged(3, 0b10),
            Err(CodecError::Malformed { .. })
        ));
        // Length 0, or over VARCHAR(10)'s 40 bytes.
        let len_at = 5 + 4 + 8;
        assert!(matches!(
            damaged(len_at, 0),
            Err(CodecError::Malformed { .. })
        ));
        assert!(matches!(
            damaged(len_at, 41),
            Err(CodecError::Malformed { .. })
        ));
        for cut in 0..good.len() {
            assert!(
                decode_row_external(&good[..cut], &types).is_err(),
                "cut {cut}"
            );
            let _ = decode_column(&good[..cut], &types, 1);
        }
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            decode_row_external(&long, &types),
            Err(CodecError::TrailingBytes { .. })
        ));
    }
}

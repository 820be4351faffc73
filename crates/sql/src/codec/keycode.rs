//! The memcomparable key encoding: comparing two encodings with memcmp gives
//! the order of the values (as `types::compare` orders them, column by
//! column), so the B+tree can compare keys as plain byte strings.
//!
//! Per column, a marker byte: 0x00 for NULL (nothing follows, so NULL sorts
//! first) or 0x01, then:
//! - signed integers (any width): the i64, big-endian, sign bit flipped (8 bytes);
//! - unsigned integers: the u64, big-endian (8 bytes);
//! - DOUBLE: the IEEE bits, all flipped when negative, else the sign bit
//!   flipped, big-endian (8 bytes); `-0.0` is written as `0.0` (they compare
//!   equal), NaN cannot be encoded;
//! - DECIMAL(p,s): the unscaled i128 at the column's scale s, sign bit
//!   flipped, big-endian (16 bytes); values of one column share the scale, so
//!   this orders them;
//! - CHAR/VARCHAR/TEXT/BLOB: groups of 8 bytes, the last group padded with
//!   0x00, each followed by a marker `0xFF - padding` (0xFF: a full group
//!   and more follow; 0xF7..=0xFE: the last group). A string whose length is
//!   a multiple of 8 ends with an all-padding group (marker 0xF7), so every
//!   encoding is self-delimiting, and a prefix sorts before its extensions;
//! - DATETIME/TIMESTAMP: the packed datetime (see `types::DateTime::pack`),
//!   big-endian (8 bytes).
//!
//! A tuple encodes as the concatenation of its columns; since each column's
//! encoding is self-delimiting and order-preserving, the concatenations
//! compare like the tuples. Encodings are canonical: each value has exactly
//! one, and the decoder rejects everything else.

use crate::error::CodecError;
use crate::types::{scalar, ColumnType, DateTime, Scalar, Value};

const GROUP: usize = 8;
const MARKER_FULL: u8 = 0xFF;

/// Appends the key encoding of `values` to `out`.
///
/// # Panics
/// When a value is not a stored value of its column type (see
/// [`try_encode_key`]); values from [`Value::coerce`] always are.
pub fn encode_key(values: &[(Value, &ColumnType)], out: &mut Vec<u8>) {
    if let Err(e) = try_encode_key(values, out) {
        panic!("encode_key: {e}");
    }
}

/// Appends the key encoding of `values` to `out`, or fails with
/// `TypeMismatch` (leaving `out` as it was) when a value is not a stored
/// value of its column type: an integer outside the type's range, a NaN, a
/// decimal with another scale or too many digits, a string too long or not
/// UTF-8 for a text type, an invalid datetime, or a value of another kind.
pub fn try_encode_key(
    values: &[(Value, &ColumnType)],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let start = out.len();
    for (column, (value, ty)) in values.iter().enumerate() {
        if value.is_null() {
            out.push(0x00);
            continue;
        }
        let Some(s) = scalar(value, ty) else {
            out.truncate(start);
            return Err(CodecError::TypeMismatch { column });
        };
        out.push(0x01);
        match s {
            Scalar::I(x) => out.extend_from_slice(&((x as u64) ^ (1 << 63)).to_be_bytes()),
            Scalar::U(x) => out.extend_from_slice(&x.to_be_bytes()),
            Scalar::F(f) => {
                let f = if f == 0.0 { 0.0 } else { f };
                let bits = f.to_bits();
                let k = if bits >> 63 == 1 {
                    !bits
                } else {
                    bits | (1 << 63)
                };
                out.extend_from_slice(&k.to_be_bytes());
            }
            Scalar::D(u) => out.extend_from_slice(&((u as u128) ^ (1 << 127)).to_be_bytes()),
            Scalar::B(b) => encode_bytes(b, out),
            Scalar::T(p) => out.extend_from_slice(&p.to_be_bytes()),
        }
    }
    Ok(())
}

fn encode_bytes(b: &[u8], out: &mut Vec<u8>) {
    let mut chunks = b.chunks_exact(GROUP);
    for c in &mut chunks {
        out.extend_from_slice(c);
        out.push(MARKER_FULL);
    }
    let rest = chunks.remainder();
    let pad = GROUP - rest.len();
    out.extend_from_slice(rest);
    out.extend(std::iter::repeat_n(0u8, pad));
    out.push(MARKER_FULL - pad as u8);
}

/// Decodes a whole key: exactly one value per type and no bytes after them.
pub fn decode_key(bytes: &[u8], types: &[ColumnType]) -> Result<Vec<Value>, CodecError> {
    let (values, used) = decode_key_prefix(bytes, types)?;
    if used != bytes.len() {
        return Err(CodecError::TrailingBytes { offset: used });
    }
    Ok(values)
}

/// Decodes one value per type from the start of `bytes`; returns the values
/// and the number of bytes they took (more may follow, e.g. a primary key
/// appended to a secondary key).
pub fn decode_key_prefix(
    bytes: &[u8],
    types: &[ColumnType],
) -> Result<(Vec<Value>, usize), CodecError> {
    let mut pos = 0;
    let mut values = Vec::with_capacity(types.len());
    for ty in types {
        let at = pos;
        let take = |pos: &mut usize, n: usize| -> Result<&[u8], CodecError> {
            let end = pos.checked_add(n).filter(|&e| e <= bytes.len());
            match end {
                Some(e) => {
                    let s = &bytes[*pos..e];
                    *pos = e;
                    Ok(s)
                }
                None => Err(CodecError::Truncated { offset: *pos }),
            }
        };
        let malformed = |what| CodecError::Malformed { offset: at, what };
        match take(&mut pos, 1)?[0] {
            0x00 => {
                values.push(Value::Null);
                continue;
            }
            0x01 => {}
            _ => return Err(malformed("null marker is neither 0x00 nor 0x01")),
        }
        let body = pos;
        let v = match ty {
            ColumnType::TinyInt { .. }
            | ColumnType::SmallInt { .. }
            | ColumnType::Int { .. }
            | ColumnType::BigInt { .. } => {
                let x = u64::from_be_bytes(take(&mut pos, 8)?.try_into().expect("8 bytes"));
                if ty.is_unsigned() {
                    Value::UInt(x)
                } else {
                    Value::Int((x ^ (1 << 63)) as i64)
                }
            }
            ColumnType::Double => {
                let k = u64::from_be_bytes(take(&mut pos, 8)?.try_into().expect("8 bytes"));
                let bits = if k >> 63 == 1 { k ^ (1 << 63) } else { !k };
                let f = f64::from_bits(bits);
                if f.is_nan() {
                    return Err(malformed("NaN is not a key value"));
                }
                if f == 0.0 && f.is_sign_negative() {
                    return Err(malformed("-0.0 is encoded as 0.0"));
                }
                Value::Double(f)
            }
            ColumnType::Decimal { scale, .. } => {
                let k = u128::from_be_bytes(take(&mut pos, 16)?.try_into().expect("16 bytes"));
                Value::Decimal {
                    unscaled: (k ^ (1 << 127)) as i128,
                    scale: *scale,
                }
            }
            ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::Text | ColumnType::Blob => {
                let mut b = Vec::new();
                loop {
                    let group_at = pos;
                    let g = take(&mut pos, GROUP + 1)?;
                    let marker = g[GROUP];
                    if marker == MARKER_FULL {
                        b.extend_from_slice(&g[..GROUP]);
                        continue;
                    }
                    let pad = (MARKER_FULL - marker) as usize;
                    if pad > GROUP {
                        return Err(CodecError::Malformed {
                            offset: group_at,
                            what: "bad group marker",
                        });
                    }
                    let used = GROUP - pad;
                    if g[used..GROUP].iter().any(|&p| p != 0) {
                        return Err(CodecError::Malformed {
                            offset: group_at,
                            what: "non-zero padding",
                        });
                    }
                    b.extend_from_slice(&g[..used]);
                    break;
                }
                Value::Bytes(b)
            }
            ColumnType::DateTime | ColumnType::Timestamp => {
                let p = u64::from_be_bytes(take(&mut pos, 8)?.try_into().expect("8 bytes"));
                Value::DateTime(
                    DateTime::unpack(p).ok_or(malformed("bits beyond the packed datetime"))?,
                )
            }
        };
        if scalar(&v, ty).is_none() {
            return Err(CodecError::Malformed {
                offset: body,
                what: "value outside its column type",
            });
        }
        values.push(v);
    }
    Ok((values, pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(v: Value, t: ColumnType) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key(&[(v, &t)], &mut out);
        out
    }

    #[test]
    fn byte_groups_look_like_the_documented_format() {
        assert_eq!(
            key(Value::Bytes(vec![]), ColumnType::Blob),
            [1, 0, 0, 0, 0, 0, 0, 0, 0, 0xF7]
        );
        assert_eq!(
            key(Value::Bytes(b"abc".to_vec()), ColumnType::Blob),
            [1, b'a', b'b', b'c', 0, 0, 0, 0, 0, 0xFA]
        );
        let eight = key(Value::Bytes(b"12345678".to_vec()), ColumnType::Blob);
        assert_eq!(eight.len(), 1 + 9 + 9);
        assert_eq!(eight[9], 0xFF);
        assert_eq!(eight[18], 0xF7);
        assert_eq!(key(Value::Null, ColumnType::Blob), [0]);
    }

    #[test]
    fn try_encode_rejects_values_that_were_not_coerced() {
        let mut out = vec![7];
        let t = ColumnType::TinyInt { unsigned: false };
        let d = ColumnType::Decimal {
            precision: 5,
            scale: 2,
        };
        let bad = [
            (Value::Int(128), &t),
            (Value::Bytes(b"1".to_vec()), &t),
            (
                Value::Decimal {
                    unscaled: 1,
                    scale: 1,
                },
                &d,
            ),
            (
                Value::Decimal {
                    unscaled: 100_000,
                    scale: 2,
                },
                &d,
            ),
            (Value::Double(f64::NAN), &ColumnType::Double),
            (Value::Bytes(vec![0xFF]), &ColumnType::Text),
            (Value::Bytes("héllo".into()), &ColumnType::VarChar(4)),
        ];
        for b in bad {
            let r = try_encode_key(&[(Value::Int(1), &t), b], &mut out);
            assert_eq!(r, Err(CodecError::TypeMismatch { column: 1 }));
            assert_eq!(out, [7]);
        }
        // Unsigned accepts a non-negative Int and decodes it as UInt.
        let u = ColumnType::Int { unsigned: true };
        try_encode_key(&[(Value::Int(5), &u)], &mut out).unwrap();
        assert_eq!(decode_key(&out[1..], &[u]).unwrap(), [Value::UInt(5)]);
        // "héllo" is 5 characters but 6 bytes.
        assert!(try_encode_key(
            &[(Value::Bytes("héllo".into()), &ColumnType::VarChar(5))],
            &mut out
        )
        .is_ok());
    }

    #[test]
    #[should_panic(expected = "encode_key")]
    fn encode_key_panics_on_a_mismatch() {
        encode_key(&[(Value::Int(1), &ColumnType::Double)], &mut Vec::new());
    }

    #[test]
    fn negative_zero_is_written_as_zero() {
        assert_eq!(
            key(Value::Double(-0.0), ColumnType::Double),
            key(Value::Double(0.0), ColumnType::Double)
        );
        let mut bad = key(Value::Double(-1.0), ColumnType::Double);
        // The encoding -0.0 would have if it were written as is.
        bad[1..].copy_from_slice(&(!(-0.0f64).to_bits()).to_be_bytes());
        assert!(matches!(
            decode_key(&bad, &[ColumnType::Double]),
            Err(CodecError::Malformed { .. })
        ));
    }
}

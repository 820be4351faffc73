//! Property tests of the key and row codecs over seeded random values.

use std::cmp::Ordering;

use millrace_sql::types::MAX_TEXT_BYTES;
use millrace_sql::{
    compare, decode_column, decode_key, decode_key_prefix, decode_row, encode_key, encode_row,
    ColumnType, DateTime, Value,
};
use millrace_sys::rng::SplitMix64;

fn all_types() -> Vec<ColumnType> {
    let mut t = Vec::new();
    for unsigned in [false, true] {
        t.push(ColumnType::TinyInt { unsigned });
        t.push(ColumnType::SmallInt { unsigned });
        t.push(ColumnType::Int { unsigned });
        t.push(ColumnType::BigInt { unsigned });
    }
    t.extend([
        ColumnType::Double,
        ColumnType::Decimal {
            precision: 1,
            scale: 0,
        },
        ColumnType::Decimal {
            precision: 10,
            scale: 2,
        },
        ColumnType::Decimal {
            precision: 38,
            scale: 0,
        },
        ColumnType::Decimal {
            precision: 38,
            scale: 30,
        },
        ColumnType::Char(5),
        ColumnType::VarChar(12),
        ColumnType::Text,
        ColumnType::Blob,
        ColumnType::DateTime,
        ColumnType::Timestamp,
    ]);
    t
}

fn pick<T: Copy>(rng: &mut SplitMix64, xs: &[T]) -> T {
    xs[rng.below(xs.len() as u64) as usize]
}

fn random_u128(rng: &mut SplitMix64) -> u128 {
    ((rng.next_u64() as u128) << 64) | rng.next_u64() as u128
}

fn random_double(rng: &mut SplitMix64) -> f64 {
    loop {
        let f = match rng.below(8) {
            0 => f64::from_bits(rng.next_u64()),
            1 => pick(
                rng,
                &[0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.1, f64::MAX, f64::MIN],
            ),
            2 => pick(
                rng,
                &[
                    f64::MIN_POSITIVE,
                    -f64::MIN_POSITIVE,
                    5e-324,
                    -5e-324,
                    f64::EPSILON,
                ],
            ),
            3 => (rng.below(21) as f64 - 10.0) / 4.0,
            4 => (rng.next_u64() as i64) as f64,
            _ => (rng.next_u64() as i64 as f64) * 1e-10,
        };
        if f.is_finite() {
            return f;
        }
    }
}

fn random_bytes(rng: &mut SplitMix64, text: bool) -> Vec<u8> {
    let len = match rng.below(4) {
        0 => rng.below(3),
        1 => rng.below(20),
        2 => 7 + rng.below(3),
        _ => 15 + rng.below(3),
    } as usize;
    let mut out = Vec::new();
    for _ in 0..len {
        if text {
            let s: &str = pick(rng, &["a", "b", " ", "\0", "é", "\u{10FFFF}", "z"]);
            out.extend_from_slice(s.as_bytes());
        } else {
            out.push(pick(rng, &[0x00, 0x01, b'a', b'b', 0xFE, 0xFF]));
        }
    }
    out
}

/// A random raw value aimed at `ty`, not necessarily coercible.
fn raw_value(rng: &mut SplitMix64, ty: &ColumnType) -> Value {
    match *ty {
        t if t.int_range().is_some() => {
            let (lo, hi) = t.int_range().unwrap();
            let x = match rng.below(4) {
                0 => pick(rng, &[lo, hi, 0, 1, -1, lo + 1, hi - 1]),
                1 => rng.below(21) as i128 - 10,
                _ => lo + (random_u128(rng) % (hi - lo + 1) as u128) as i128,
            };
            if t.is_unsigned() {
                Value::UInt(x.max(0) as u64)
            } else {
                Value::Int(x as i64)
            }
        }
        ColumnType::Double => Value::Double(random_double(rng)),
        ColumnType::Decimal { precision, scale } => {
            let digits = rng.below(precision as u64 + 1) as u32;
            let m = random_u128(rng) % 10u128.pow(digits);
            let m = if rng.chance(1, 2) {
                -(m as i128)
            } else {
                m as i128
            };
            Value::Decimal { unscaled: m, scale }
        }
        ColumnType::Blob => Value::Bytes(random_bytes(rng, false)),
        ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::Text => {
            Value::Bytes(random_bytes(rng, true))
        }
        ColumnType::DateTime | ColumnType::Timestamp => {
            let year = if *ty == ColumnType::Timestamp {
                1970 + rng.below(69) as u16
            } else {
                let any = 1 + rng.below(9999) as u16;
                pick(rng, &[1u16, 1969, 1970, 2000, 2024, 9999, any])
            };
            Value::DateTime(DateTime {
                year,
                month: 1 + rng.below(12) as u8,
                day: 1 + rng.below(31) as u8,
                hour: rng.below(24) as u8,
                minute: rng.below(60) as u8,
                second: rng.below(60) as u8,
                micro: 0,
            })
        }
        _ => unreachable!(),
    }
}

/// A random stored value of `ty` (NULL about one time in ten).
fn value(rng: &mut SplitMix64, ty: &ColumnType) -> Value {
    if rng.chance(1, 10) {
        return Value::Null;
    }
    loop {
        if let Ok(v) = raw_value(rng, ty).coerce(ty) {
            return v;
        }
    }
}

fn key_of(values: &[Value], types: &[ColumnType]) -> Vec<u8> {
    let pairs: Vec<(Value, &ColumnType)> = values.iter().cloned().zip(types.iter()).collect();
    let mut out = Vec::new();
    encode_key(&pairs, &mut out);
    out
}

fn compare_tuples(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match compare(x, y) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    Ordering::Equal
}

#[test]
fn single_column_key_order_is_compare_order() {
    let mut rng = SplitMix64::new(1);
    for ty in all_types() {
        let n = 2000;
        let mut items: Vec<(Vec<u8>, Value)> = (0..n)
            .map(|_| {
                let v = value(&mut rng, &ty);
                (key_of(std::slice::from_ref(&v), &[ty]), v)
            })
            .collect();
        // Sort by the encodings; neighbours must then be in compare order,
        // with equal encodings exactly for equal values.
        items.sort_by(|a, b| a.0.cmp(&b.0));
        for w in items.windows(2) {
            let c = compare(&w[0].1, &w[1].1);
            let e = w[0].0.cmp(&w[1].0);
            assert_eq!(c, e, "{ty:?}: {:?} vs {:?}", w[0].1, w[1].1);
        }
        // Sorting by compare gives the same sequence of values.
        let mut by_value: Vec<Value> = items.iter().map(|i| i.1.clone()).collect();
        by_value.sort_by(compare);
        for (a, b) in by_value.iter().zip(&items) {
            assert_eq!(compare(a, &b.1), Ordering::Equal, "{ty:?}");
        }
        // And pairwise on a sample.
        for i in 0..150 {
            for j in 0..150 {
                let (a, b) = (&items[i * 13 % n], &items[j * 7 % n]);
                assert_eq!(
                    a.0.cmp(&b.0),
                    compare(&a.1, &b.1),
                    "{ty:?}: {:?} vs {:?}",
                    a.1,
                    b.1
                );
            }
        }
    }
}

#[test]
fn composite_keys_compare_like_tuples() {
    let mut rng = SplitMix64::new(2);
    let types = all_types();
    for _round in 0..40 {
        let cols = 1 + rng.below(4) as usize;
        let tys: Vec<ColumnType> = (0..cols).map(|_| pick(&mut rng, &types)).collect();
        // Small pools per column so that tuples share prefixes and tie.
        let pools: Vec<Vec<Value>> = tys
            .iter()
            .map(|t| (0..4).map(|_| value(&mut rng, t)).collect())
            .collect();
        let tuples: Vec<Vec<Value>> = (0..120)
            .map(|_| pools.iter().map(|p| pick_value(&mut rng, p)).collect())
            .collect();
        let keys: Vec<Vec<u8>> = tuples.iter().map(|t| key_of(t, &tys)).collect();
        for i in 0..tuples.len() {
            for j in 0..tuples.len() {
                assert_eq!(
                    keys[i].cmp(&keys[j]),
                    compare_tuples(&tuples[i], &tuples[j]),
                    "{tys:?}: {:?} vs {:?}",
                    tuples[i],
                    tuples[j]
                );
            }
            assert_eq!(decode_key(&keys[i], &tys).unwrap(), tuples[i]);
        }
    }
}

fn pick_value(rng: &mut SplitMix64, pool: &[Value]) -> Value {
    pool[rng.below(pool.len() as u64) as usize].clone()
}

fn random_row(rng: &mut SplitMix64, types: &[ColumnType]) -> (Vec<ColumnType>, Vec<Value>) {
    let cols = rng.below(12) as usize;
    let tys: Vec<ColumnType> = (0..cols).map(|_| pick(rng, types)).collect();
    let vals = tys.iter().map(|t| value(rng, t)).collect();
    (tys, vals)
}

#[test]
fn key_and_row_round_trip() {
    let mut rng = SplitMix64::new(3);
    let types = all_types();
    for _ in 0..3000 {
        let (tys, vals) = random_row(&mut rng, &types);
        let key = key_of(&vals, &tys);
        assert_eq!(decode_key(&key, &tys).unwrap(), vals);
        let mut longer = key.clone();
        longer.extend_from_slice(&[0xAB, 0x00, 0xFF]);
        let (prefix, used) = decode_key_prefix(&longer, &tys).unwrap();
        assert_eq!((prefix, used), (vals.clone(), key.len()));

        let mut row = Vec::new();
        encode_row(&vals, &tys, &mut row).unwrap();
        assert_eq!(decode_row(&row, &tys).unwrap(), vals);
        for (i, v) in vals.iter().enumerate() {
            assert_eq!(&decode_column(&row, &tys, i).unwrap(), v);
        }
    }
}

#[test]
fn nulls_sort_first_in_every_type() {
    let mut rng = SplitMix64::new(4);
    for ty in all_types() {
        let null = key_of(&[Value::Null], &[ty]);
        assert_eq!(null, [0]);
        for _ in 0..200 {
            let v = value(&mut rng, &ty);
            if !v.is_null() {
                assert!(null < key_of(std::slice::from_ref(&v), &[ty]));
                assert_eq!(compare(&Value::Null, &v), Ordering::Less);
            }
        }
    }
}

/// Checks that `vals`, given in ascending order, encode in ascending order.
fn assert_ascending(ty: ColumnType, vals: &[Value]) {
    for w in vals.windows(2) {
        assert_eq!(
            compare(&w[0], &w[1]),
            Ordering::Less,
            "{:?} < {:?}",
            w[0],
            w[1]
        );
        assert!(
            key_of(&w[..1], &[ty]) < key_of(&w[1..], &[ty]),
            "{ty:?}: {:?} < {:?}",
            w[0],
            w[1]
        );
    }
    for v in vals {
        assert_eq!(
            decode_key(&key_of(std::slice::from_ref(v), &[ty]), &[ty]).unwrap(),
            std::slice::from_ref(v)
        );
    }
}

#[test]
fn edge_values_order() {
    assert_ascending(
        ColumnType::BigInt { unsigned: false },
        &[i64::MIN, -1_000_000, -256, -1, 0, 1, 255, 256, i64::MAX].map(Value::Int),
    );
    assert_ascending(
        ColumnType::TinyInt { unsigned: false },
        &[-128, -127, -1, 0, 1, 127].map(Value::Int),
    );
    assert_ascending(
        ColumnType::BigInt { unsigned: true },
        &[0, 1, 255, 256, 1 << 63, u64::MAX].map(Value::UInt),
    );
    assert_ascending(
        ColumnType::Double,
        &[
            f64::MIN,
            -1e300,
            -1.0,
            -f64::MIN_POSITIVE,
            -5e-324,
            0.0,
            5e-324,
            f64::MIN_POSITIVE,
            0.1,
            1.0,
            1e300,
            f64::MAX,
        ]
        .map(Value::Double),
    );
    let d = |u: i128| Value::Decimal {
        unscaled: u,
        scale: 30,
    };
    assert_ascending(
        ColumnType::Decimal {
            precision: 38,
            scale: 30,
        },
        &[
            d(-(10i128.pow(38) - 1)),
            d(-1),
            d(0),
            d(1),
            d(10i128.pow(38) - 1),
        ],
    );
    let b = |s: &[u8]| Value::Bytes(s.to_vec());
    assert_ascending(
        ColumnType::Blob,
        &[
            b(b""),
            b(b"\x00"),
            b(b"\x00\x00"),
            b(b"\x00\x00\x00\x00\x00\x00\x00"),
            b(b"\x00\x00\x00\x00\x00\x00\x00\x00"),
            b(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
            b(b"\x00\x01"),
            b(b"a"),
            b(b"abcdefg"),
            b(b"abcdefgh"),
            b(b"abcdefgh\x00"),
            b(b"abcdefghi"),
            b(b"abcdefgi"),
            b(b"\xFF"),
            b(b"\xFF\x00"),
            b(b"\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF"),
            b(b"\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF"),
        ],
    );
    let dt = |year, month, day, second| {
        Value::DateTime(DateTime {
            year,
            month,
            day,
            hour: 0,
            minute: 0,
            second,
            micro: 0,
        })
    };
    assert_ascending(
        ColumnType::DateTime,
        &[
            dt(1, 1, 1, 0),
            dt(1999, 12, 31, 59),
            dt(2000, 1, 1, 0),
            dt(2000, 1, 1, 1),
            dt(9999, 12, 31, 59),
        ],
    );
    // -0.0 and 0.0 are the same key and compare equal.
    let z = key_of(&[Value::Double(-0.0)], &[ColumnType::Double]);
    assert_eq!(z, key_of(&[Value::Double(0.0)], &[ColumnType::Double]));
    assert_eq!(
        compare(&Value::Double(-0.0), &Value::Double(0.0)),
        Ordering::Equal
    );
    assert_eq!(
        decode_key(&z, &[ColumnType::Double]).unwrap(),
        [Value::Double(0.0)]
    );
    // Rows keep -0.0 bit for bit.
    let mut row = Vec::new();
    encode_row(&[Value::Double(-0.0)], &[ColumnType::Double], &mut row).unwrap();
    let back = decode_row(&row, &[ColumnType::Double]).unwrap();
    assert!(matches!(back[0], Value::Double(f) if f == 0.0 && f.is_sign_negative()));
    // Empty and maximal strings round trip in rows.
    let big = Value::Bytes(vec![0xFF; MAX_TEXT_BYTES]);
    let tys = [ColumnType::Blob, ColumnType::Blob];
    let mut row = Vec::new();
    encode_row(&[b(b""), big.clone()], &tys, &mut row).unwrap();
    assert_eq!(decode_row(&row, &tys).unwrap(), [b(b""), big]);
}

#[test]
fn decoders_reject_every_truncation() {
    let mut rng = SplitMix64::new(5);
    let types = all_types();
    for _ in 0..400 {
        let (tys, vals) = random_row(&mut rng, &types);
        let key = key_of(&vals, &tys);
        for cut in 0..key.len() {
            assert!(
                decode_key(&key[..cut], &tys).is_err(),
                "{tys:?} {vals:?} cut {cut}"
            );
        }
        let mut row = Vec::new();
        encode_row(&vals, &tys, &mut row).unwrap();
        for cut in 0..row.len() {
            assert!(
                decode_row(&row[..cut], &tys).is_err(),
                "{tys:?} {vals:?} cut {cut}"
            );
            for i in 0..tys.len() {
                // Never panics; may succeed when the column lies before the cut.
                let _ = decode_column(&row[..cut], &tys, i);
            }
        }
    }
}

#[test]
fn decoders_survive_random_and_damaged_bytes() {
    let mut rng = SplitMix64::new(6);
    let types = all_types();
    for _ in 0..3000 {
        let (tys, vals) = random_row(&mut rng, &types);
        // Pure noise.
        let mut noise = vec![0u8; rng.below(64) as usize];
        rng.fill(&mut noise);
        if rng.chance(1, 2) && !noise.is_empty() {
            noise[0] = 1; // a plausible row version / not-null marker
        }
        let _ = decode_key(&noise, &tys);
        let _ = decode_key_prefix(&noise, &tys);
        let _ = decode_row(&noise, &tys);
        for i in 0..=tys.len() {
            let _ = decode_column(&noise, &tys, i);
        }
        // Valid encodings with a few bytes changed: errors or, when they
        // decode, canonical (re-encoding gives the same bytes).
        let mut key = key_of(&vals, &tys);
        let mut row = Vec::new();
        encode_row(&vals, &tys, &mut row).unwrap();
        for buf in [&mut key, &mut row] {
            if buf.is_empty() {
                continue;
            }
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(buf.len() as u64) as usize;
                buf[at] = match rng.below(3) {
                    0 => rng.next_u64() as u8,
                    1 => buf[at] ^ (1 << rng.below(8)),
                    _ => pick(&mut rng, &[0x00, 0x01, 0xF7, 0xFE, 0xFF]),
                };
            }
        }
        if let Ok(v) = decode_key(&key, &tys) {
            assert_eq!(key_of(&v, &tys), key);
        }
        if let Ok(v) = decode_row(&row, &tys) {
            let mut again = Vec::new();
            encode_row(&v, &tys, &mut again).unwrap();
            assert_eq!(again, row);
        }
        for i in 0..tys.len() {
            let _ = decode_column(&row, &tys, i);
        }
    }
}

//! mysql_native_password: the server's scramble (salt), the check of a
//! client's response against the stored SHA1(SHA1(password)), and the ERR
//! packet a refused client gets.

use millrace_errcode::ErrorCode;
use sha1::{Digest, Sha1};
use std::time::Instant;

/// SHA1(SHA1(password)), MySQL's stored form; `None`: the empty password.
pub(crate) fn password_stage2(password: &str) -> Option<[u8; 20]> {
    (!password.is_empty()).then(|| Sha1::digest(Sha1::digest(password.as_bytes())).into())
}

/// A random 20-byte scramble of printable characters, none of them `$`
/// (as MySQL makes them).
pub(crate) fn new_salt() -> [u8; 20] {
    use std::io::Read;
    let mut raw = [0u8; 20];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut raw));
    if from_os.is_err() {
        // Unlikely; fall back on std's randomly keyed hasher.
        use std::hash::{BuildHasher, Hasher};
        for (i, chunk) in raw.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(Instant::now().elapsed().as_nanos());
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
    raw.map(|b| match b % 94 + 33 {
        b'$' => b'%',
        c => c,
    })
}

/// mysql_native_password: the client sends SHA1(pw) XOR SHA1(salt ++
/// SHA1(SHA1(pw))); knowing SHA1(SHA1(pw)) the server recovers SHA1(pw)
/// and checks that it hashes to the stored value. An empty password
/// accepts only an empty response.
pub(crate) fn native_password_ok(stage2: Option<&[u8; 20]>, salt: &[u8], response: &[u8]) -> bool {
    let Some(stage2) = stage2 else {
        return response.is_empty();
    };
    if response.len() != 20 {
        return false;
    }
    let mask = Sha1::new()
        .chain_update(salt)
        .chain_update(stage2)
        .finalize();
    let stage1: Vec<u8> = response.iter().zip(mask).map(|(r, m)| r ^ m).collect();
    let candidate = Sha1::digest(&stage1);
    // Constant time: no early exit on the first differing byte.
    candidate
        .iter()
        .zip(stage2)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// An ERR packet's payload (protocol 4.1: with the SQLSTATE).
pub(crate) fn err_payload(code: ErrorCode, message: &str) -> Vec<u8> {
    let mut p = vec![0xff];
    p.extend_from_slice(&code.number().to_le_bytes());
    p.push(b'#');
    p.extend_from_slice(code.sqlstate().as_bytes());
    p.extend_from_slice(message.as_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_errcode::ER_ACCESS_DENIED_ERROR;

    /// What a client computes (libmariadb's ma_scramble_41).
    fn client_scramble(password: &str, salt: &[u8]) -> Vec<u8> {
        let stage1 = Sha1::digest(password.as_bytes());
        let stage2 = Sha1::digest(stage1);
        let mask = Sha1::new()
            .chain_update(salt)
            .chain_update(stage2)
            .finalize();
        stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
    }

    #[test]
    fn native_password_check() {
        let salt = new_salt();
        assert!(salt.iter().all(|&b| (33..=126).contains(&b) && b != b'$'));
        let stage2: [u8; 20] = Sha1::digest(Sha1::digest(b"s3cret")).into();
        assert!(native_password_ok(
            Some(&stage2),
            &salt,
            &client_scramble("s3cret", &salt)
        ));
        assert!(!native_password_ok(
            Some(&stage2),
            &salt,
            &client_scramble("wrong", &salt)
        ));
        assert!(!native_password_ok(Some(&stage2), &salt, b""));
        assert!(native_password_ok(None, &salt, b""));
        assert!(!native_password_ok(
            None,
            &salt,
            &client_scramble("x", &salt)
        ));
    }

    #[test]
    fn err_payload_carries_number_and_sqlstate() {
        let p = err_payload(ER_ACCESS_DENIED_ERROR, "no");
        assert_eq!(p, b"\xff\x15\x04#28000no");
    }
}

//! mysql_native_password: the server's scramble (salt) and the check of a
//! client's response against the stored SHA1(SHA1(password)); and the
//! back-off after failed logins (`LoginThrottle`).

use sha1::{Digest, Sha1};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// Each failed login from a host adds this much to the wait before the
/// next failure from that host is answered.
const BACKOFF_STEP: Duration = Duration::from_millis(200);
/// The longest wait before a failure is answered.
const BACKOFF_MAX: Duration = Duration::from_secs(3);
/// A host's failures are forgotten this long after its last one (or at
/// its next successful login).
const BACKOFF_FORGET: Duration = Duration::from_secs(600);
/// Hosts remembered at most; when full, the oldest half is forgotten.
const BACKOFF_HOSTS_MAX: usize = 4096;

/// The wait before answering the `failures`-th failed login of a host:
/// grows by `BACKOFF_STEP` per failure, at most `BACKOFF_MAX`. It slows a
/// password guesser on one connection slot to one try per 3 s; the
/// connection limit bounds how many slots one host can hold.
pub(crate) fn backoff_delay(failures: u32) -> Duration {
    BACKOFF_STEP.saturating_mul(failures).min(BACKOFF_MAX)
}

/// Failed logins per client host.
#[derive(Default)]
pub(crate) struct LoginThrottle {
    hosts: Mutex<HashMap<String, (u32, Instant)>>,
}

impl LoginThrottle {
    /// Records a failure; returns how long to wait before answering it.
    pub(crate) fn failed(&self, host: &str) -> Duration {
        let now = Instant::now();
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        if hosts.len() >= BACKOFF_HOSTS_MAX && !hosts.contains_key(host) {
            let mut ages: Vec<Instant> = hosts.values().map(|v| v.1).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            hosts.retain(|_, v| v.1 > cut);
        }
        let e = hosts.entry(host.to_string()).or_insert((0, now));
        if now.duration_since(e.1) > BACKOFF_FORGET {
            e.0 = 0;
        }
        e.0 = e.0.saturating_add(1);
        e.1 = now;
        backoff_delay(e.0)
    }

    /// A successful login forgets the host's failures.
    pub(crate) fn succeeded(&self, host: &str) {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        hosts.remove(host);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn failed_logins_back_off_per_host_up_to_a_bound() {
        assert_eq!(backoff_delay(1), Duration::from_millis(200));
        assert_eq!(backoff_delay(5), Duration::from_secs(1));
        assert_eq!(backoff_delay(u32::MAX), BACKOFF_MAX);
        let t = LoginThrottle::default();
        assert_eq!(t.failed("a"), Duration::from_millis(200));
        assert_eq!(t.failed("a"), Duration::from_millis(400));
        assert_eq!(t.failed("b"), Duration::from_millis(200));
        t.succeeded("a");
        assert_eq!(t.failed("a"), Duration::from_millis(200));
        for i in 0..BACKOFF_HOSTS_MAX + 10 {
            t.failed(&format!("h{i}"));
        }
        assert!(t.hosts.lock().unwrap().len() <= BACKOFF_HOSTS_MAX);
    }
}

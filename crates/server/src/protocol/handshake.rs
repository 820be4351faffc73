//! The connection phase: the server's HandshakeV10, the client's
//! HandshakeResponse41, the AuthSwitchRequest that asks a client for
//! mysql_native_password when it started with another plugin, and the
//! COM_CHANGE_USER payload (which carries the same fields).
//!
//! Authentication is a small state machine (`AuthStep`): the first
//! response either can be verified, or the server switches the client to
//! mysql_native_password and verifies the answer to that. Plugins with more
//! round trips (caching_sha2_password's AuthMoreData) add states here.

use super::flags::{caps, COLLATION_UTF8MB4};
use super::packet::{ProtocolError, Reader};

/// The one plugin millrace verifies.
pub const NATIVE_PASSWORD: &[u8] = b"mysql_native_password";

/// The scramble's length (20 bytes, as mysql_native_password uses it).
pub const SCRAMBLE_BYTES: usize = 20;

/// HandshakeV10's payload.
pub fn greeting(out: &mut Vec<u8>, conn_id: u32, version: &str, scramble: &[u8; 20], status: u16) {
    out.push(10);
    out.extend_from_slice(version.as_bytes());
    out.push(0);
    out.extend_from_slice(&conn_id.to_le_bytes());
    out.extend_from_slice(&scramble[..8]);
    out.push(0);
    out.extend_from_slice(&(caps::SERVER as u16).to_le_bytes());
    out.push(COLLATION_UTF8MB4);
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&((caps::SERVER >> 16) as u16).to_le_bytes());
    out.push(SCRAMBLE_BYTES as u8 + 1);
    out.extend_from_slice(&[0; 10]);
    out.extend_from_slice(&scramble[8..]);
    out.push(0);
    out.extend_from_slice(NATIVE_PASSWORD);
    out.push(0);
}

/// AuthSwitchRequest to mysql_native_password with the connection's
/// scramble.
pub fn auth_switch_request(out: &mut Vec<u8>, scramble: &[u8; 20]) {
    out.push(0xfe);
    out.extend_from_slice(NATIVE_PASSWORD);
    out.push(0);
    out.extend_from_slice(scramble);
    out.push(0);
}

/// HandshakeResponse41, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeResponse<'a> {
    pub caps: u32,
    pub max_packet: u32,
    pub collation: u8,
    pub user: &'a [u8],
    pub auth: &'a [u8],
    pub database: Option<&'a [u8]>,
    pub plugin: Option<&'a [u8]>,
}

/// Decodes HandshakeResponse41. Clients that do not speak protocol 4.1, or
/// ask for TLS (not offered yet), are refused.
pub fn decode_handshake_response(payload: &[u8]) -> Result<HandshakeResponse<'_>, ProtocolError> {
    let mut r = Reader::new(payload);
    let client_caps = r.u32("capability flags")?;
    if client_caps & caps::PROTOCOL_41 == 0 {
        return Err(ProtocolError::Malformed("handshake: protocol 4.1 required"));
    }
    if client_caps & caps::SSL != 0 {
        return Err(ProtocolError::Malformed("handshake: TLS is not offered"));
    }
    let max_packet = r.u32("max packet size")?;
    let collation = r.u8("character set")?;
    r.take(23, "filler")?;
    let user = r.nul_str("user name")?;
    let auth = auth_response(&mut r, client_caps)?;
    let database = if client_caps & caps::CONNECT_WITH_DB != 0 && !r.is_empty() {
        Some(r.nul_str_or_rest())
    } else {
        None
    };
    let plugin = if client_caps & caps::PLUGIN_AUTH != 0 && !r.is_empty() {
        Some(r.nul_str_or_rest())
    } else {
        None
    };
    if client_caps & caps::CONNECT_ATTRS != 0 && !r.is_empty() {
        skip_attrs(&mut r)?;
    }
    Ok(HandshakeResponse {
        caps: client_caps,
        max_packet,
        collation,
        user,
        auth,
        database,
        plugin,
    })
}

fn auth_response<'a>(r: &mut Reader<'a>, client_caps: u32) -> Result<&'a [u8], ProtocolError> {
    if client_caps & caps::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        r.lenenc_bytes("auth response")
    } else if client_caps & caps::SECURE_CONNECTION != 0 {
        let n = r.u8("auth response length")?;
        r.take(usize::from(n), "auth response")
    } else {
        r.nul_str("auth response")
    }
}

/// Connection attributes: checked for their lengths, not kept.
fn skip_attrs(r: &mut Reader<'_>) -> Result<(), ProtocolError> {
    let all = r.lenenc_bytes("connection attributes")?;
    let mut a = Reader::new(all);
    // Bounded: every pair consumes at least two bytes of `all`.
    while !a.is_empty() {
        a.lenenc_bytes("attribute name")?;
        a.lenenc_bytes("attribute value")?;
    }
    Ok(())
}

/// COM_CHANGE_USER's fields (after the command byte).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeUser<'a> {
    pub user: &'a [u8],
    pub auth: &'a [u8],
    pub database: &'a [u8],
    pub plugin: Option<&'a [u8]>,
}

/// Decodes COM_CHANGE_USER's fields; `client_caps` are the connection's.
pub fn decode_change_user(
    payload: &[u8],
    client_caps: u32,
) -> Result<ChangeUser<'_>, ProtocolError> {
    let mut r = Reader::new(payload);
    let user = r.nul_str("user name")?;
    let auth = if client_caps & caps::SECURE_CONNECTION != 0 {
        let n = r.u8("auth response length")?;
        r.take(usize::from(n), "auth response")?
    } else {
        r.nul_str("auth response")?
    };
    let database = r.nul_str_or_rest();
    let mut plugin = None;
    if r.remaining() >= 2 {
        r.u16("character set")?;
        if client_caps & caps::PLUGIN_AUTH != 0 && !r.is_empty() {
            plugin = Some(r.nul_str_or_rest());
        }
        if client_caps & caps::CONNECT_ATTRS != 0 && !r.is_empty() {
            skip_attrs(&mut r)?;
        }
    }
    Ok(ChangeUser {
        user,
        auth,
        database,
        plugin,
    })
}

/// What to do with a client's first auth response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthStep {
    /// It is a mysql_native_password response: verify it.
    Verify,
    /// The client used another plugin: send an AuthSwitchRequest to
    /// mysql_native_password and verify the next packet.
    SwitchToNative,
}

/// The first step for a client that named `plugin` (none: protocol 4.1
/// clients without CLIENT_PLUGIN_AUTH use mysql_native_password).
pub fn first_auth_step(plugin: Option<&[u8]>) -> AuthStep {
    match plugin {
        None => AuthStep::Verify,
        Some(p) if p == NATIVE_PASSWORD || p.is_empty() => AuthStep::Verify,
        Some(_) => AuthStep::SwitchToNative,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(caps: u32, tail: &[u8]) -> Vec<u8> {
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(tail);
        p
    }

    #[test]
    fn greeting_layout() {
        let mut out = Vec::new();
        let scramble = *b"abcdefghijklmnopqrst";
        greeting(&mut out, 7, "8.0.36-x", &scramble, 2);
        assert_eq!(out[0], 10);
        assert_eq!(&out[1..9], b"8.0.36-x");
        assert_eq!(&out[10..14], &7u32.to_le_bytes());
        assert_eq!(&out[14..22], b"abcdefgh");
        assert!(out.ends_with(b"ijklmnopqrst\0mysql_native_password\0"));
    }

    #[test]
    fn handshake_responses_decode_in_each_layout() {
        let c = caps::PROTOCOL_41 | caps::SECURE_CONNECTION | caps::PLUGIN_AUTH;
        let p = response(
            c | caps::CONNECT_WITH_DB,
            b"root\0\x02xyshop\0caching_sha2_password\0",
        );
        let r = decode_handshake_response(&p).unwrap();
        assert_eq!(r.user, b"root");
        assert_eq!(r.auth, b"xy");
        assert_eq!(r.database, Some(&b"shop"[..]));
        assert_eq!(r.plugin, Some(&b"caching_sha2_password"[..]));
        assert_eq!(first_auth_step(r.plugin), AuthStep::SwitchToNative);
        let lenenc = c | caps::PLUGIN_AUTH_LENENC_CLIENT_DATA | caps::CONNECT_ATTRS;
        let p = response(lenenc, b"bob\0\x01zmysql_native_password\0\x06\x01a\x03bcd");
        let r = decode_handshake_response(&p).unwrap();
        assert_eq!((r.user, r.auth), (&b"bob"[..], &b"z"[..]));
        assert_eq!(first_auth_step(r.plugin), AuthStep::Verify);
        // Attributes that claim more than is there; an auth length beyond
        // the payload; no protocol 4.1; TLS asked for.
        assert!(decode_handshake_response(&response(lenenc, b"u\0\x00p\0\x09\x01a")).is_err());
        assert!(decode_handshake_response(&response(c, b"u\0\x30ab")).is_err());
        assert!(decode_handshake_response(&response(caps::SECURE_CONNECTION, b"u\0\0")).is_err());
        assert!(decode_handshake_response(&response(c | caps::SSL, b"u\0\0")).is_err());
        assert!(decode_handshake_response(&[1, 2, 0, 0]).is_err());
    }

    #[test]
    fn change_user_decodes() {
        let c = caps::PROTOCOL_41 | caps::SECURE_CONNECTION | caps::PLUGIN_AUTH;
        let u = decode_change_user(b"root\0\x01kdb\0\x2d\0mysql_native_password\0", c).unwrap();
        assert_eq!(
            (u.user, u.auth, u.database),
            (&b"root"[..], &b"k"[..], &b"db"[..])
        );
        assert_eq!(u.plugin, Some(NATIVE_PASSWORD));
        assert!(decode_change_user(b"root\0\x09k", c).is_err());
        assert!(decode_change_user(b"root", c).is_err());
    }
}

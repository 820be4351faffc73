//! A small MySQL text-protocol client for tests that must survive the
//! server dying under them: every call returns a `Result`, and a lost
//! connection (`ClientError::Io`) is told apart from an answer the server
//! gave (`ClientError::Server`). Protocol 4.1, mysql_native_password,
//! COM_QUERY only, no CLIENT_DEPRECATE_EOF: the plain protocol any MySQL
//! server speaks.

use sha1::{Digest, Sha1};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A payload larger than this is refused as a protocol error (the tests'
/// results are small; a wild length means we lost the framing).
const MAX_PAYLOAD_BYTES: usize = 16 << 20;

#[derive(Debug)]
pub enum ClientError {
    /// The connection failed or closed: the outcome of the command in
    /// flight is unknown.
    Io(std::io::Error),
    /// The server answered with an ERR packet.
    Server {
        code: u16,
        state: String,
        msg: String,
    },
    /// Bytes that do not parse as the protocol: treated like a lost
    /// connection by callers, reported with what was wrong.
    Protocol(String),
}

impl ClientError {
    /// The server's error code, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            ClientError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "connection: {e}"),
            ClientError::Server { code, state, msg } => write!(f, "ERROR {code} ({state}): {msg}"),
            ClientError::Protocol(what) => write!(f, "protocol: {what}"),
        }
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// One row of a text result set: a value per column, `None` for NULL.
pub type Row = Vec<Option<String>>;

pub struct Client {
    stream: TcpStream,
    seq: u8,
    /// Set by the first lost connection or protocol error: the connection
    /// is of no further use.
    broken: bool,
}

impl Client {
    /// Connects and logs in; `timeout` bounds every later read and write.
    pub fn connect(
        addr: SocketAddr,
        user: &str,
        password: &str,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let mut c = Client {
            stream,
            seq: 0,
            broken: false,
        };
        let salt = c.greeting()?;
        // LONG_PASSWORD | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION |
        // PLUGIN_AUTH
        let caps: u32 = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x8_0000;
        let auth = scramble(password, &salt);
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(45); // utf8mb4_general_ci
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(auth.len() as u8);
        p.extend_from_slice(&auth);
        p.extend_from_slice(b"mysql_native_password\0");
        c.write_packet(&p)?;
        let mut answer = c.read_packet()?;
        if answer.first() == Some(&0xfe) {
            // Auth switch: plugin name NUL, then the new salt.
            let rest = &answer[1..];
            let nul = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| proto("auth switch without plugin name"))?;
            if &rest[..nul] != b"mysql_native_password" {
                return Err(proto("auth switch to an unknown plugin"));
            }
            let mut salt = rest[nul + 1..].to_vec();
            if salt.last() == Some(&0) {
                salt.pop();
            }
            c.write_packet(&scramble(password, &salt))?;
            answer = c.read_packet()?;
        }
        match answer.first() {
            Some(0x00) => Ok(c),
            Some(0xff) => Err(server_error(&answer)),
            _ => Err(proto("unexpected answer to the login")),
        }
    }

    /// The salt of the initial handshake packet.
    fn greeting(&mut self) -> Result<Vec<u8>, ClientError> {
        let p = self.read_packet()?;
        if p.first() == Some(&0xff) {
            return Err(server_error(&p));
        }
        let nul = p
            .get(1..)
            .and_then(|r| r.iter().position(|&b| b == 0))
            .ok_or_else(|| proto("greeting without version"))?
            + 1;
        let mut i = nul + 1 + 4; // connection id
        let mut salt = p
            .get(i..i + 8)
            .ok_or_else(|| proto("short greeting"))?
            .to_vec();
        i += 8 + 1 + 2 + 1 + 2 + 2; // filler, caps low, charset, status, caps high
        let auth_len = *p.get(i).ok_or_else(|| proto("short greeting"))? as usize;
        i += 1 + 10;
        let part2 = auth_len.saturating_sub(8).max(13);
        salt.extend_from_slice(
            p.get(i..i + part2 - 1)
                .ok_or_else(|| proto("short greeting salt"))?,
        );
        Ok(salt)
    }

    fn read_packet(&mut self) -> Result<Vec<u8>, ClientError> {
        let mut header = [0u8; 4];
        self.stream.read_exact(&mut header)?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        if len > MAX_PAYLOAD_BYTES {
            return Err(proto("payload too long"));
        }
        self.seq = header[3].wrapping_add(1);
        let mut payload = vec![0; len];
        self.stream.read_exact(&mut payload)?;
        Ok(payload)
    }

    fn write_packet(&mut self, payload: &[u8]) -> Result<(), ClientError> {
        let len = (payload.len() as u32).to_le_bytes();
        let mut packet = vec![len[0], len[1], len[2], self.seq];
        packet.extend_from_slice(payload);
        self.stream.write_all(&packet)?;
        self.seq = self.seq.wrapping_add(1);
        Ok(())
    }

    /// Whether the connection was lost (or its framing) by an earlier call.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Runs one statement (COM_QUERY). `Ok(None)` for an OK packet,
    /// `Ok(Some(rows))` for a result set.
    pub fn query(&mut self, sql: &str) -> Result<Option<Vec<Row>>, ClientError> {
        if self.broken {
            return Err(proto("the connection was lost earlier"));
        }
        let answer = self.query_once(sql);
        if matches!(answer, Err(ClientError::Io(_) | ClientError::Protocol(_))) {
            self.broken = true;
        }
        answer
    }

    fn query_once(&mut self, sql: &str) -> Result<Option<Vec<Row>>, ClientError> {
        self.seq = 0;
        let mut p = vec![0x03];
        p.extend_from_slice(sql.as_bytes());
        self.write_packet(&p)?;
        let first = self.read_packet()?;
        match first.first() {
            Some(0x00) => return Ok(None),
            Some(0xff) => return Err(server_error(&first)),
            None => return Err(proto("empty answer")),
            _ => {}
        }
        let (columns, _) = lenenc_int(&first, 0).ok_or_else(|| proto("column count"))?;
        // Column definitions, then EOF.
        for _ in 0..columns {
            self.read_packet()?;
        }
        let eof = self.read_packet()?;
        if !is_eof(&eof) {
            return Err(proto("no EOF after the column definitions"));
        }
        let mut rows = Vec::new();
        loop {
            let p = self.read_packet()?;
            if p.first() == Some(&0xff) {
                return Err(server_error(&p));
            }
            if is_eof(&p) {
                return Ok(Some(rows));
            }
            let mut row = Vec::with_capacity(columns as usize);
            let mut at = 0;
            for _ in 0..columns {
                if p.get(at) == Some(&0xfb) {
                    row.push(None);
                    at += 1;
                    continue;
                }
                let (len, next) = lenenc_int(&p, at).ok_or_else(|| proto("row value length"))?;
                let end = next
                    .checked_add(len as usize)
                    .filter(|&e| e <= p.len())
                    .ok_or_else(|| proto("row value past the packet"))?;
                row.push(Some(String::from_utf8_lossy(&p[next..end]).into_owned()));
                at = end;
            }
            rows.push(row);
        }
    }

    /// A statement that must answer OK (not a result set).
    pub fn exec(&mut self, sql: &str) -> Result<(), ClientError> {
        match self.query(sql)? {
            None => Ok(()),
            Some(_) => Err(proto("a result set where OK was expected")),
        }
    }

    /// A statement that must answer a result set.
    pub fn rows(&mut self, sql: &str) -> Result<Vec<Row>, ClientError> {
        self.query(sql)?
            .ok_or_else(|| proto("OK where a result set was expected"))
    }
}

fn proto(what: &str) -> ClientError {
    ClientError::Protocol(what.to_string())
}

fn is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xfe) && p.len() < 9
}

fn server_error(p: &[u8]) -> ClientError {
    if p.len() < 9 || p[3] != b'#' {
        return proto("short ERR packet");
    }
    ClientError::Server {
        code: u16::from_le_bytes([p[1], p[2]]),
        state: String::from_utf8_lossy(&p[4..9]).into_owned(),
        msg: String::from_utf8_lossy(&p[9..]).into_owned(),
    }
}

/// A length-encoded integer at `at`: (value, offset after it).
fn lenenc_int(p: &[u8], at: usize) -> Option<(u64, usize)> {
    let first = *p.get(at)?;
    let width = match first {
        0..=0xfa => return Some((first as u64, at + 1)),
        0xfc => 2,
        0xfd => 3,
        0xfe => 8,
        _ => return None,
    };
    let bytes = p.get(at + 1..at + 1 + width)?;
    let mut v = 0u64;
    for (i, b) in bytes.iter().enumerate() {
        v |= (*b as u64) << (8 * i);
    }
    Some((v, at + 1 + width))
}

/// mysql_native_password: SHA1(pw) XOR SHA1(salt ++ SHA1(SHA1(pw))).
fn scramble(password: &str, salt: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = Sha1::digest(password.as_bytes());
    let mask = Sha1::new()
        .chain_update(salt)
        .chain_update(Sha1::digest(stage1))
        .finalize();
    stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
}

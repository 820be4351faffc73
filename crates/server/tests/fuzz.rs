//! Fuzz target `protocol` (docs/design.md, "Fuzzing"): hostile bytes from a
//! client. The input's first byte picks the client capability flags and the
//! parameter count of executes; the rest is a byte stream as it arrives on
//! the socket, read with the server's `PacketReader` (bounded, several
//! packets per read, multi-packet messages) and every message decoded as a
//! handshake response, a COM_CHANGE_USER payload and a command, executes
//! through `decode_execute` with the statement's remembered types. Every
//! decoder must return an error, never panic, and the reader must stop at
//! its bound.
//! `MILLRACE_FUZZ_SECS=300 cargo test -p millrace-server --test fuzz -- --nocapture`

use millrace_server::protocol::packet::PacketReader;
use millrace_server::protocol::prepared::ParamTypes;
use millrace_server::protocol::{
    caps, decode_change_user, decode_command, decode_execute, decode_handshake_response, Command,
};
use millrace_sys::fuzz::{corpus_dir, fuzz_target_with, write_seeds, Options};

/// The reader's bound in this target: small, so that mutated lengths reach it.
const LIMIT_BYTES: usize = 64 << 10;
/// Messages decoded per input, at most (a stream of empty packets is long).
const MAX_MESSAGES: usize = 256;

fn run(input: &[u8]) {
    let Some((&head, stream)) = input.split_first() else {
        return;
    };
    let client_caps = if head & 0x80 == 0 {
        caps::SERVER
    } else {
        // Some flags missing: the decoders' other branches.
        caps::SERVER & !(u32::from(head) << 9)
    };
    let count = u16::from(head & 0x0f);
    let mut src = stream;
    let mut reader = PacketReader::new();
    let mut message = Vec::new();
    let mut types = ParamTypes::default();
    let long = vec![None; usize::from(count)];
    for _ in 0..MAX_MESSAGES {
        // Ends at the end of the stream (UnexpectedEof) or at the bound.
        if reader
            .read_message(&mut src, &mut message, LIMIT_BYTES)
            .is_err()
        {
            break;
        }
        assert!(message.len() <= LIMIT_BYTES, "a message past the bound");
        let _ = decode_handshake_response(&message);
        let _ = decode_change_user(&message, client_caps);
        if let Ok(Command::StmtExecute(e)) = decode_command(&message, client_caps) {
            let _ = decode_execute(e.params, count, &mut types, &long);
        }
    }
}

/// One packet: 3-byte length, sequence number, payload.
fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_le_bytes();
    let mut p = vec![len[0], len[1], len[2], seq];
    p.extend_from_slice(payload);
    p
}

/// A stream: the selector byte, then the packets.
fn stream(head: u8, packets: &[Vec<u8>]) -> Vec<u8> {
    let mut s = vec![head];
    for p in packets {
        s.extend_from_slice(p);
    }
    s
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut login = Vec::new();
    login.extend_from_slice(&caps::SERVER.to_le_bytes());
    login.extend_from_slice(&(16u32 << 20).to_le_bytes());
    login.push(45);
    login.extend_from_slice(&[0; 23]);
    login.extend_from_slice(b"root\0\x14");
    login.extend_from_slice(&[7; 20]);
    login.extend_from_slice(b"d\0mysql_native_password\0\x0a\x04_pid\x0412");
    let mut execute = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1];
    execute.extend_from_slice(&[0x08, 0, 0xfd, 0, 0x0c, 0]);
    execute.extend_from_slice(&5i64.to_le_bytes());
    execute.extend_from_slice(b"\x03abc");
    execute.extend_from_slice(&[7, 0xe8, 7, 1, 2, 3, 4, 5]);
    let typeless = [
        0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0,
    ];
    let mut change = vec![0x11];
    change.extend_from_slice(b"root\0\x14");
    change.extend_from_slice(&[9; 20]);
    change.extend_from_slice(b"db\0\x2d\0mysql_native_password\0");
    vec![
        ("login", stream(0, &[packet(1, &login)])),
        (
            "query-close-query",
            stream(
                0,
                &[
                    packet(0, b"\x03SELECT 1"),
                    packet(0, &[0x19, 1, 0, 0, 0]),
                    packet(0, b"\x03SELECT 2"),
                ],
            ),
        ),
        (
            "prepare-execute",
            stream(
                3,
                &[
                    packet(0, b"\x16SELECT ?, ?, ?"),
                    packet(0, &execute),
                    packet(0, &typeless),
                ],
            ),
        ),
        (
            "long-data-reset",
            stream(
                1,
                &[
                    packet(0, &[0x18, 1, 0, 0, 0, 0, 0, b'x']),
                    packet(0, &[0x1a, 1, 0, 0, 0]),
                ],
            ),
        ),
        ("change-user", stream(0x81, &[packet(0, &change)])),
        (
            "ping-kill-reset",
            stream(
                0,
                &[
                    packet(0, &[0x0e]),
                    packet(0, &[0x0c, 5, 0, 0, 0]),
                    packet(0, &[0x1f]),
                ],
            ),
        ),
    ]
}

#[test]
fn fuzz_protocol() {
    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "protocol");
    write_seeds(&dir, &seeds());
    // The seeds run even where the corpus was not written.
    for (_, s) in seeds() {
        run(&s);
    }
    let opts = Options::new(200_000).dictionary(&[
        &[0x17u8][..],
        &[0x16],
        &[0x18],
        &[0x11],
        &[0xfc, 0xff, 0xff],
        &[0xfd, 0xff, 0xff, 0xff],
        &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        &[0xff, 0xff, 0xff, 0x00],
    ]);
    let stats = fuzz_target_with("protocol", &dir, opts, run);
    eprintln!(
        "protocol: {} inputs in {:?} (seed {:#x})",
        stats.inputs, stats.elapsed, stats.seed
    );
}

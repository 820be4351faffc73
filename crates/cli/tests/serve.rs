//! `millrace serve` end to end: the built binary on a free loopback port
//! with a temporary data directory. A small raw-protocol client checks the
//! handshake, authentication and commands without a client library; when
//! the `mariadb` command exists (CI installs Debian's mariadb-client) it is
//! run against the server too.

use sha1::{Digest, Sha1};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{have_command, temp_dir, Server, PASSWORD};

/// A minimal MySQL protocol client (protocol 4.1, mysql_native_password).
struct RawClient {
    stream: TcpStream,
    seq: u8,
}

struct Greeting {
    protocol: u8,
    version: String,
    salt: Vec<u8>,
    plugin: String,
}

impl RawClient {
    fn open(addr: SocketAddr) -> RawClient {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        RawClient { stream, seq: 0 }
    }

    fn read_packet(&mut self) -> Vec<u8> {
        let mut header = [0u8; 4];
        self.stream.read_exact(&mut header).expect("packet header");
        let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        self.seq = header[3].wrapping_add(1);
        let mut payload = vec![0; len];
        self.stream
            .read_exact(&mut payload)
            .expect("packet payload");
        payload
    }

    fn write_packet(&mut self, payload: &[u8]) {
        let len = (payload.len() as u32).to_le_bytes();
        let mut packet = vec![len[0], len[1], len[2], self.seq];
        packet.extend_from_slice(payload);
        self.stream.write_all(&packet).unwrap();
    }

    fn greeting(&mut self) -> Greeting {
        let p = self.read_packet();
        let protocol = p[0];
        let nul = p[1..].iter().position(|&b| b == 0).unwrap() + 1;
        let version = String::from_utf8(p[1..nul].to_vec()).unwrap();
        let mut i = nul + 1 + 4; // connection id
        let mut salt = p[i..i + 8].to_vec();
        i += 8 + 1 + 2 + 1 + 2 + 2; // filler, caps low, charset, status, caps high
        let auth_len = p[i] as usize;
        i += 1 + 10;
        let part2 = auth_len.saturating_sub(8).max(13);
        salt.extend_from_slice(&p[i..i + part2 - 1]); // without its NUL
        i += part2;
        let end = p[i..]
            .iter()
            .position(|&b| b == 0)
            .map_or(p.len(), |e| i + e);
        let plugin = String::from_utf8(p[i..end].to_vec()).unwrap();
        Greeting {
            protocol,
            version,
            salt,
            plugin,
        }
    }

    /// Handshake and authentication; returns the server's answer (an OK or
    /// ERR payload).
    fn login(addr: SocketAddr, user: &str, password: &str) -> (RawClient, Vec<u8>) {
        let mut c = RawClient::open(addr);
        let g = c.greeting();
        assert_eq!(g.plugin, "mysql_native_password");
        let auth = if password.is_empty() {
            Vec::new()
        } else {
            let stage1 = Sha1::digest(password.as_bytes());
            let mask = Sha1::new()
                .chain_update(&g.salt)
                .chain_update(Sha1::digest(stage1))
                .finalize();
            stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
        };
        // LONG_PASSWORD | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION |
        // PLUGIN_AUTH
        let caps: u32 = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x8_0000;
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(45); // utf8mb4_general_ci
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(auth.len() as u8);
        p.extend_from_slice(&auth);
        p.extend_from_slice(b"mysql_native_password\0");
        c.write_packet(&p);
        let answer = c.read_packet();
        (c, answer)
    }

    /// Sends a command; returns every packet of the answer (one for OK or
    /// ERR, a whole result set otherwise).
    fn command(&mut self, cmd: u8, arg: &[u8]) -> Vec<Vec<u8>> {
        self.seq = 0;
        let mut p = vec![cmd];
        p.extend_from_slice(arg);
        self.write_packet(&p);
        let first = self.read_packet();
        if matches!(first[0], 0x00 | 0xff) {
            return vec![first];
        }
        // Column count, columns, EOF, rows, EOF (no CLIENT_DEPRECATE_EOF).
        let mut packets = vec![first];
        let mut eofs = 0;
        while eofs < 2 {
            let p = self.read_packet();
            if p[0] == 0xff {
                packets.push(p);
                break;
            }
            if p[0] == 0xfe && p.len() < 9 {
                eofs += 1;
            }
            packets.push(p);
        }
        packets
    }

    fn query(&mut self, sql: &str) -> Vec<Vec<u8>> {
        self.command(0x03, sql.as_bytes())
    }
}

/// (code, sqlstate, message) of an ERR payload.
fn err(p: &[u8]) -> (u16, String, String) {
    assert_eq!(p[0], 0xff, "expected ERR, got {p:?}");
    assert_eq!(p[3], b'#');
    (
        u16::from_le_bytes([p[1], p[2]]),
        String::from_utf8_lossy(&p[4..9]).into_owned(),
        String::from_utf8_lossy(&p[9..]).into_owned(),
    )
}

fn contains(packets: &[Vec<u8>], text: &str) -> bool {
    packets
        .iter()
        .any(|p| p.windows(text.len()).any(|w| w == text.as_bytes()))
}

#[test]
fn handshake_is_protocol_10_with_millrace_version() {
    let dir = temp_dir("handshake");
    let server = Server::start(&dir, &[]);
    let mut c = RawClient::open(server.addr);
    let g = c.greeting();
    assert_eq!(g.protocol, 10);
    assert!(g.version.starts_with("8.0."), "{}", g.version);
    assert!(g.version.contains("millrace"), "{}", g.version);
    assert_eq!(g.salt.len(), 20);
    drop(c);
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn raw_protocol_auth_commands_and_connection_limit() {
    let dir = temp_dir("raw");
    let server = Server::start(&dir, &["--max-connections", "2"]);
    let addr = server.addr;

    let (_, answer) = RawClient::login(addr, "root", "wrong");
    let (code, state, msg) = err(&answer);
    assert_eq!((code, state.as_str()), (1045, "28000"));
    assert_eq!(
        msg,
        "Access denied for user 'root'@'127.0.0.1' (using password: YES)"
    );
    let (_, answer) = RawClient::login(addr, "root", "");
    assert!(err(&answer).2.ends_with("(using password: NO)"));
    let (_, answer) = RawClient::login(addr, "bob", PASSWORD);
    assert_eq!(err(&answer).0, 1045);

    let (mut c, answer) = RawClient::login(addr, "root", PASSWORD);
    assert_eq!(answer[0], 0x00, "OK after login: {answer:?}");
    assert_eq!(c.command(0x0e, b"")[0][0], 0x00, "COM_PING");
    let r = c.query("select @@version_comment limit 1");
    assert!(contains(&r, "millrace"));
    let (code, _, msg) = err(&c.command(0x02, b"shop")[0]);
    assert_eq!(code, 1049, "COM_INIT_DB of a missing database: {msg}");
    assert_eq!(c.query("CREATE DATABASE shop")[0][0], 0x00);
    assert_eq!(c.command(0x02, b"shop")[0][0], 0x00, "COM_INIT_DB");
    assert!(contains(&c.query("SELECT DATABASE()"), "shop"));
    assert_eq!(c.query("SET NAMES utf8mb4")[0][0], 0x00);
    let (code, state, _) = err(&c.query("CREATE TABLE t (a INT")[0]);
    assert_eq!((code, state.as_str()), (1064, "42000"));
    let (code, state, _) = err(&c.query("SELECT * FROM nope")[0]);
    assert_eq!((code, state.as_str()), (1146, "42S02"));
    let prep = c.command(0x16, b"SELECT ?");
    assert_eq!(prep[0][0], 0x00, "COM_STMT_PREPARE");
    // One parameter and one column definition, each list ended by EOF.
    for _ in 0..4 {
        c.read_packet();
    }
    let (code, _, _) = err(&c.command(0x16, b"SET @@autocommit = ?")[0]);
    assert_eq!(
        code, 1295,
        "COM_STMT_PREPARE of a statement that cannot be prepared"
    );

    // A garbage packet closes that connection only.
    let mut bad = RawClient::open(addr);
    let _ = bad.greeting();
    bad.write_packet(&[0xff; 7]);
    drop(bad);

    // Two connections are allowed: the third gets 1040. (The refused and
    // bad connections above give their slots back as their tasks end.)
    let _c2 = login_when_free(addr);
    let (_, answer) = RawClient::login(addr, "root", PASSWORD);
    let (code, state, msg) = err(&answer);
    assert_eq!(
        (code, state.as_str(), msg.as_str()),
        (1040, "08004", "Too many connections")
    );

    // COM_QUIT frees the slot.
    c.seq = 0;
    c.write_packet(&[0x01]);
    let mut rest = Vec::new();
    let _ = c.stream.read_to_end(&mut rest);
    let mut c3 = login_when_free(addr);
    assert!(contains(&c3.query("SELECT 1"), "1"));

    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Logs in as root, retrying while the server answers 1040 (a slot is
/// given back when the connection's task ends, a moment after the close).
fn login_when_free(addr: SocketAddr) -> RawClient {
    let t0 = Instant::now();
    loop {
        let (c, answer) = RawClient::login(addr, "root", PASSWORD);
        if answer[0] == 0x00 {
            return c;
        }
        assert_eq!(err(&answer).0, 1040, "{answer:?}");
        assert!(t0.elapsed() < Duration::from_secs(5), "no slot freed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mariadb(addr: SocketAddr, password: &str, sql: &str) -> Output {
    Command::new("mariadb")
        .arg("-h127.0.0.1")
        .arg(format!("-P{}", addr.port()))
        .arg("-uroot")
        .arg(format!("-p{password}"))
        .arg("--connect-timeout=5")
        .arg("-e")
        .arg(sql)
        .output()
        .expect("run mariadb")
}

/// `--socket PATH`: the mariadb client connects over the Unix socket too,
/// and a clean stop removes the socket file.
#[test]
fn unix_socket_serves_the_mariadb_client() {
    assert!(
        have_command("mariadb"),
        "`mariadb` is not installed: apt-get install mariadb-client (.ci/run does)"
    );
    let dir = temp_dir("socket");
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("millrace.sock");
    let server = Server::start(&dir.join("data"), &["--socket", sock.to_str().unwrap()]);
    let out = Command::new("mariadb")
        .arg(format!("--socket={}", sock.display()))
        .arg("-uroot")
        .arg(format!("-p{PASSWORD}"))
        .arg("--connect-timeout=5")
        .args(["-N", "-e", "SELECT 40 + 2"])
        .output()
        .expect("run mariadb");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.trim() == "42",
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, _) = server.stop();
    assert!(status.success());
    assert!(!sock.exists(), "a clean stop removes the socket file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mariadb_client_connects_and_runs_status() {
    assert!(
        have_command("mariadb"),
        "`mariadb` is not installed: apt-get install mariadb-client (.ci/run does)"
    );
    let dir = temp_dir("mariadb");
    let server = Server::start(&dir, &[]);
    // `status` is a client command: recognised at the start of a line.
    let out = mariadb(
        server.addr,
        PASSWORD,
        "select @@version_comment limit 1;\nstatus",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("millrace"), "{stdout}");
    assert!(stdout.contains("8.0.36-millrace"), "{stdout}");
    assert!(
        stdout.contains("Current user:\t\troot@127.0.0.1"),
        "{stdout}"
    );

    let out = mariadb(server.addr, "not-the-password", "select 1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("ERROR 1045 (28000)"), "{stderr}");
    assert!(stderr.contains("Access denied"), "{stderr}");

    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_stops_cleanly_and_restart_works() {
    let dir = temp_dir("restart");
    let server = Server::start(&dir, &[]);
    // An idle authenticated client does not hold shutdown up.
    let (mut idle, answer) = RawClient::login(server.addr, "root", PASSWORD);
    assert_eq!(answer[0], 0x00);
    assert!(contains(&idle.query("SELECT 1"), "1"));
    let t0 = Instant::now();
    let (status, stdout) = server.stop();
    assert!(status.success(), "exit: {status:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(stdout.iter().any(|l| l == "millrace stopped"), "{stdout:?}");

    let server = Server::start(&dir, &[]);
    let (mut c, answer) = RawClient::login(server.addr, "root", PASSWORD);
    assert_eq!(answer[0], 0x00);
    assert!(contains(&c.query("SELECT @@version"), "millrace"));
    // kill -9, then a restart recovers.
    server.signal(libc::SIGKILL);
    drop(server);
    let server = Server::start(&dir, &[]);
    let (_, answer) = RawClient::login(server.addr, "root", PASSWORD);
    assert_eq!(answer[0], 0x00);
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn empty_password_refuses_non_loopback() {
    let dir = temp_dir("refuse");
    let out = Command::new(env!("CARGO_BIN_EXE_millrace"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(&dir)
        .env_remove("MILLRACE_ROOT_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("empty root password"), "{stderr}");
    assert!(!dir.exists(), "nothing is opened before the check");
}

/// Settings come from the file named by --config, and flags win over it;
/// a mistake in the file stops the server with an error that names it.
#[test]
fn config_file_settings_apply_and_mistakes_are_named() {
    let dir = temp_dir("config");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("millrace.toml");
    std::fs::write(
        &file,
        "max_connections = 1\nmetrics = false\n[engine]\nflush_log_at_trx_commit = 2\n\
         buffer_pool_size = \"96M\"\n",
    )
    .unwrap();
    let data = dir.join("data");
    let config = file.to_str().unwrap();
    let server = Server::start(&data, &["--config", config]);
    let out = server.stdout.lock().unwrap().join("\n");
    assert!(out.contains("settings from"), "{out}");
    // The flag (128M, from Server::start) wins over the file's 96M.
    assert!(out.contains("buffer pool 128.0 MiB"), "{out}");
    assert!(out.contains("flush_log_at_trx_commit 2"), "{out}");
    assert!(!out.contains("metrics at"), "{out}");
    let _c = login_when_free(server.addr);
    let (_, answer) = RawClient::login(server.addr, "root", PASSWORD);
    assert_eq!(err(&answer).0, 1040, "max_connections = 1 from the file");
    let (status, _) = server.stop();
    assert!(status.success());

    std::fs::write(&file, "[engine]\nbufer_pool_size = \"1G\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_millrace"))
        .args(["serve", "--config", config, "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bufer_pool_size"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Prometheus endpoint serves every engine metric; other paths are 404.
#[test]
fn metrics_endpoint_serves_the_registry() {
    use std::io::{Read, Write};
    let dir = temp_dir("metrics");
    let server = Server::start(&dir, &[]);
    let t0 = std::time::Instant::now();
    let addr: SocketAddr = loop {
        let found = server.stdout.lock().unwrap().iter().find_map(|l| {
            l.strip_prefix("metrics at http://")
                .map(|r| r.trim_end_matches("/metrics").to_string())
        });
        if let Some(a) = found {
            break a.parse().unwrap();
        }
        assert!(t0.elapsed().as_secs() < 10, "no metrics line");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let page = get("/metrics");
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    for name in [
        "millrace_log_fsyncs",
        "millrace_buffer_pages_total",
        "millrace_trx_history_len",
        "millrace_lock_waits",
    ] {
        assert!(page.contains(&format!("\n{name} ")), "{name} missing");
    }
    assert!(page.contains("# TYPE millrace_log_fsyncs counter"));
    assert!(get("/other").starts_with("HTTP/1.1 404"));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// kill -9 during sysbench oltp_write_only at 64 threads: after the restart
/// every acknowledged commit of a verifying workload (counters incremented
/// in autocommit statements) is there, and nothing else but the one in
/// flight per client.
#[test]
fn kill9_during_oltp_write_only_loses_no_acknowledged_commit() {
    assert!(
        have_command("sysbench"),
        "`sysbench` is not installed: apt-get install sysbench (.ci/run does)"
    );
    let dir = temp_dir("kill9");
    let server = Server::start(&dir, &[]);
    let addr = server.addr;
    let (mut c, _) = RawClient::login(addr, "root", PASSWORD);
    for sql in [
        "CREATE DATABASE sbtest",
        "CREATE TABLE sbtest.counters (id INT PRIMARY KEY, n BIGINT NOT NULL)",
        "INSERT INTO sbtest.counters VALUES (0,0),(1,0),(2,0),(3,0)",
    ] {
        assert_eq!(c.query(sql)[0][0], 0x00, "{sql}");
    }
    let sysbench = |step: &str, threads: &str| {
        Command::new("sysbench")
            .args([
                "oltp_write_only",
                "--db-driver=mysql",
                "--mysql-host=127.0.0.1",
                "--mysql-user=root",
                "--mysql-db=sbtest",
                "--tables=2",
                "--table-size=1000",
                "--time=30",
                "--report-interval=0",
            ])
            .arg(format!("--mysql-port={}", addr.port()))
            .arg(format!("--mysql-password={PASSWORD}"))
            .arg(format!("--threads={threads}"))
            .arg(step)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run sysbench")
    };
    assert!(sysbench("prepare", "1").wait().unwrap().success());
    let mut load = sysbench("run", "64");
    let acked: Arc<Vec<std::sync::atomic::AtomicU64>> = Arc::new(
        (0..4)
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect(),
    );
    let counters: Vec<_> = (0..4)
        .map(|i| {
            let acked = acked.clone();
            std::thread::spawn(move || {
                let (mut c, _) = RawClient::login(addr, "root", PASSWORD);
                let sql = format!("UPDATE sbtest.counters SET n = n + 1 WHERE id = {i}");
                loop {
                    // Ends with a panic of the client when the server dies.
                    if c.query(&sql)[0][0] != 0x00 {
                        continue;
                    }
                    acked[i].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    server.signal(libc::SIGKILL);
    drop(server);
    for t in counters {
        let _ = t.join();
    }
    let _ = load.kill();
    let _ = load.wait();
    let server = Server::start(&dir, &[]);
    let (mut c, _) = RawClient::login(server.addr, "root", PASSWORD);
    let rows = c.query("SELECT id, n FROM sbtest.counters ORDER BY id");
    let total: u64 = acked
        .iter()
        .map(|a| a.load(std::sync::atomic::Ordering::SeqCst))
        .sum();
    assert!(total > 0, "no commit was acknowledged before the kill");
    for i in 0..4 {
        let want = acked[i].load(std::sync::atomic::Ordering::SeqCst);
        // Row packets follow the column count, 2 definitions and an EOF;
        // each is two length-prefixed strings: id, n.
        let p = &rows[4 + i];
        let l1 = p[0] as usize;
        let l2 = p[1 + l1] as usize;
        let n: u64 = std::str::from_utf8(&p[2 + l1..2 + l1 + l2])
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            n == want || n == want + 1,
            "counter {i}: {want} increments acknowledged, {n} after recovery"
        );
    }
    // The sysbench tables are usable after recovery.
    let r = c.query("SELECT COUNT(*) FROM sbtest.sbtest1");
    assert!(r[0][0] != 0xff, "{r:?}");
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// The protocol layer (issue 11): each test failed against the opensrv-mysql
// adapter it replaced.

impl RawClient {
    /// Writes bytes as they are: several packets at once, or a bad one.
    fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads the rest of a reply whose first packet was `first` (a result
    /// set without CLIENT_DEPRECATE_EOF: columns, EOF, rows, EOF).
    fn rest_of_result(&mut self, first: Vec<u8>) -> Vec<Vec<u8>> {
        if matches!(first[0], 0x00 | 0xff) {
            return vec![first];
        }
        let mut packets = vec![first];
        let mut eofs = 0;
        while eofs < 2 {
            let p = self.read_packet();
            let end = p[0] == 0xff;
            if p[0] == 0xfe && p.len() < 9 {
                eofs += 1;
            }
            packets.push(p);
            if end {
                break;
            }
        }
        packets
    }

    /// COM_STMT_PREPARE; returns the statement id, after reading the
    /// parameter and column definitions.
    fn prepare(&mut self, sql: &str) -> u32 {
        let r = self.command(0x16, sql.as_bytes());
        let ok = &r[0];
        assert_eq!(ok[0], 0x00, "prepare {sql}: {ok:?}");
        let id = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
        let columns = u16::from_le_bytes([ok[5], ok[6]]);
        let params = u16::from_le_bytes([ok[7], ok[8]]);
        for n in [params, columns] {
            if n > 0 {
                for _ in 0..=n {
                    self.read_packet();
                }
            }
        }
        id
    }

    /// Whether the server closed the connection (EOF or reset on read).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
    }
}

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_le_bytes();
    let mut p = vec![len[0], len[1], len[2], seq];
    p.extend_from_slice(payload);
    p
}

fn logged_in(addr: SocketAddr) -> RawClient {
    let (c, answer) = RawClient::login(addr, "root", PASSWORD);
    assert_eq!(answer[0], 0x00, "login: {answer:?}");
    c
}

/// COM_STMT_CLOSE (no reply) and the next command in one write: both are
/// read from one buffer, and the second is answered.
#[test]
fn stmt_close_and_query_in_one_write() {
    let dir = temp_dir("twopackets");
    let server = Server::start(&dir, &[]);
    let mut c = logged_in(server.addr);
    for round in 0..20 {
        let id = c.prepare("SELECT 1");
        let mut close = vec![0x19];
        close.extend_from_slice(&id.to_le_bytes());
        let mut bytes = packet(0, &close);
        let query = format!("\x03SELECT {round} + 1000");
        bytes.extend_from_slice(&packet(0, query.as_bytes()));
        c.write_raw(&bytes);
        let first = c.read_packet();
        let r = c.rest_of_result(first);
        assert!(
            contains(&r, &(round + 1000).to_string()),
            "round {round}: {r:?}"
        );
    }
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Truncated and malformed COM_STMT_EXECUTE packets get an ERR; the
/// connection and the server go on.
#[test]
fn malformed_stmt_execute_gets_an_error() {
    let dir = temp_dir("badexec");
    let server = Server::start(&dir, &[]);
    let mut c = logged_in(server.addr);
    let id = c.prepare("SELECT ?, ?").to_le_bytes();
    let head = |rest: &[u8]| {
        let mut p = vec![0x17];
        p.extend_from_slice(&id);
        p.extend_from_slice(&[0, 1, 0, 0, 0]);
        p.extend_from_slice(rest);
        p
    };
    let bad: Vec<Vec<u8>> = vec![
        vec![0x17, 1],                               // truncated id
        head(&[]),                                   // no null bitmap
        head(&[0]),                                  // no new-params-bound flag
        head(&[0, 1, 0xfd]),                         // types cut short
        head(&[0, 0]),                               // no types ever sent
        head(&[0, 1, 0xfd, 0, 0xfd, 0, 0xfc, 0xff]), // lenenc beyond payload
        head(&[0, 1, 0xfd, 0, 0xfd, 0, 0x05]),       // string length past end
        head(&[0, 1, 0x08, 0, 0x08, 0, 1, 2, 3]),    // integer cut short
        head(&[0, 1, 0x0c, 0, 0x0c, 0, 11, 1, 2]),   // datetime cut short
        head(&[0, 1, 0x42, 0, 0x42, 0, 1, 1]),       // unknown type
    ];
    for (i, p) in bad.iter().enumerate() {
        let r = c.command(p[0], &p[1..]);
        assert_eq!(r[0][0], 0xff, "case {i}: {r:?}");
    }
    // A good execute with both parameters still works.
    let mut good = head(&[0, 1, 0x08, 0, 0xfd, 0]);
    good.extend_from_slice(&7i64.to_le_bytes());
    good.extend_from_slice(b"\x03abc");
    let r = c.command(good[0], &good[1..]);
    assert!(r[0][0] != 0xff, "{r:?}");
    assert!(contains(&r, "abc"), "{r:?}");
    let mut other = logged_in(server.addr);
    assert!(contains(&other.query("SELECT 4242"), "4242"));
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command larger than max_allowed_packet gets ER_NET_PACKET_TOO_LARGE
/// and the connection is closed; before authentication too.
#[test]
fn packets_over_max_allowed_packet_get_1153() {
    let dir = temp_dir("bigpacket");
    let server = Server::start(&dir, &["--max-allowed-packet", "1M"]);
    let mut c = logged_in(server.addr);
    // The variable reports the limit the server enforces.
    assert!(contains(&c.query("SELECT @@max_allowed_packet"), "1048576"));
    // A query just under the limit is fine.
    let mut q = b"SELECT '".to_vec();
    q.extend(std::iter::repeat_n(b'x', 1000 * 1000));
    q.extend_from_slice(b"' = ''");
    let r = c.query(std::str::from_utf8(&q).unwrap());
    assert!(r[0][0] != 0xff, "{:?}", &r[0]);
    // Over it: the header alone says so.
    let mut bytes = packet(0, &[0x03]);
    bytes[0..3].copy_from_slice(&[0x00, 0x00, 0x20]); // 2 MiB
    bytes.extend_from_slice(&[b'x'; 1000]);
    c.write_raw(&bytes);
    let (code, state, _) = err(&c.read_packet());
    assert_eq!((code, state.as_str()), (1153, "08S01"));
    assert!(c.closed());
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Before authentication only a small packet is read: a huge handshake
/// response gets 1153 and the connection is closed.
#[test]
fn huge_handshake_response_gets_1153() {
    let dir = temp_dir("bighandshake");
    let server = Server::start(&dir, &[]);
    let mut c = RawClient::open(server.addr);
    let _ = c.greeting();
    let mut bytes = vec![0xff, 0xff, 0xff, 1];
    bytes.extend_from_slice(&[0u8; 1000]);
    c.write_raw(&bytes);
    let (code, _, _) = err(&c.read_packet());
    assert_eq!(code, 1153);
    assert!(c.closed());
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// max_prepared_stmt_count (16382, MySQL's default) over the server: the
/// next prepare gets 1461; closing one makes room.
#[test]
fn too_many_prepared_statements_get_1461() {
    let dir = temp_dir("manystmts");
    let server = Server::start(&dir, &[]);
    let mut a = logged_in(server.addr);
    let mut b = logged_in(server.addr);
    let mut last = 0;
    for i in 0..16382 {
        let c = if i % 2 == 0 { &mut a } else { &mut b };
        last = c.prepare("COMMIT");
    }
    let (code, state, _) = err(&a.command(0x16, b"COMMIT")[0]);
    assert_eq!((code, state.as_str()), (1461, "42000"));
    b.seq = 0;
    let mut close = vec![0x19];
    close.extend_from_slice(&last.to_le_bytes());
    b.write_packet(&close);
    // COM_STMT_CLOSE has no reply: a ping makes sure it was handled.
    assert_eq!(b.command(0x0e, b"")[0][0], 0x00);
    a.prepare("COMMIT");
    // A connection that goes away gives its statements back.
    drop(b);
    let t0 = Instant::now();
    loop {
        let r = a.command(0x16, b"COMMIT");
        if r[0][0] == 0x00 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "{r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// COM_RESET_CONNECTION rolls back the open transaction and releases its
/// row locks: another connection can then update the row.
#[test]
fn reset_connection_rolls_back_and_releases_locks() {
    let dir = temp_dir("reset");
    let server = Server::start(&dir, &[]);
    let mut a = logged_in(server.addr);
    for sql in [
        "CREATE DATABASE d",
        "CREATE TABLE d.t (id INT PRIMARY KEY, n INT)",
        "INSERT INTO d.t VALUES (1, 10)",
        "BEGIN",
        "UPDATE d.t SET n = 11 WHERE id = 1",
    ] {
        assert_eq!(a.query(sql)[0][0], 0x00, "{sql}");
    }
    let id = a.prepare("SELECT 1");
    let ok = a.command(0x1f, b"");
    assert_eq!(ok[0][0], 0x00, "COM_RESET_CONNECTION: {ok:?}");
    // Status flags of the OK: not in a transaction.
    assert_eq!(ok[0][3] & 1, 0, "{ok:?}");
    let mut b = logged_in(server.addr);
    assert_eq!(
        b.query("SET GLOBAL innodb_lock_wait_timeout = 1")[0][0],
        0x00
    );
    let r = b.query("UPDATE d.t SET n = 12 WHERE id = 1");
    assert_eq!(r[0][0], 0x00, "the row lock was released: {r:?}");
    assert!(contains(&a.query("SELECT n FROM d.t WHERE id = 1"), "12"));
    // Prepared statements are gone.
    let mut exec = vec![];
    exec.extend_from_slice(&id.to_le_bytes());
    exec.extend_from_slice(&[0, 1, 0, 0, 0]);
    let (code, _, _) = err(&a.command(0x17, &exec)[0]);
    assert_eq!(code, 1243);
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

fn change_user_payload(user: &str, password: &str, salt: &[u8]) -> Vec<u8> {
    let auth: Vec<u8> = if password.is_empty() {
        Vec::new()
    } else {
        let stage1 = Sha1::digest(password.as_bytes());
        let mask = Sha1::new()
            .chain_update(salt)
            .chain_update(Sha1::digest(stage1))
            .finalize();
        stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
    };
    let mut p = user.as_bytes().to_vec();
    p.push(0);
    p.push(auth.len() as u8);
    p.extend_from_slice(&auth);
    p.push(0); // no database
    p.extend_from_slice(&45u16.to_le_bytes());
    p.extend_from_slice(b"mysql_native_password\0");
    p
}

/// COM_CHANGE_USER checks the password: a wrong one is refused with 1045
/// and the connection closed; the right one gets a fresh session.
#[test]
fn change_user_checks_the_password() {
    let dir = temp_dir("changeuser");
    let server = Server::start(&dir, &[]);
    // Log in keeping the scramble.
    let mut c = RawClient::open(server.addr);
    let g = c.greeting();
    let auth = {
        let stage1 = Sha1::digest(PASSWORD.as_bytes());
        let mask = Sha1::new()
            .chain_update(&g.salt)
            .chain_update(Sha1::digest(stage1))
            .finalize();
        stage1
            .iter()
            .zip(mask)
            .map(|(a, b)| a ^ b)
            .collect::<Vec<u8>>()
    };
    let caps: u32 = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x8_0000;
    let mut p = caps.to_le_bytes().to_vec();
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(b"root\0");
    p.push(20);
    p.extend_from_slice(&auth);
    p.extend_from_slice(b"mysql_native_password\0");
    c.write_packet(&p);
    assert_eq!(c.read_packet()[0], 0x00);
    assert_eq!(c.query("BEGIN")[0][0], 0x00);
    let ok = c.command(0x11, &change_user_payload("root", PASSWORD, &g.salt));
    assert_eq!(ok[0][0], 0x00, "right password: {ok:?}");
    let status = u16::from_le_bytes([ok[0][3], ok[0][4]]);
    assert_eq!(status & 1, 0, "no transaction after the change");
    let r = c.command(0x11, &change_user_payload("root", "wrong", &g.salt));
    let (code, state, _) = err(&r[0]);
    assert_eq!((code, state.as_str()), (1045, "28000"));
    assert!(c.closed());
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Commands millrace does not implement get ER_UNKNOWN_COM_ERROR, not OK.
#[test]
fn unknown_commands_get_1047() {
    let dir = temp_dir("unknowncom");
    let server = Server::start(&dir, &[]);
    let mut c = logged_in(server.addr);
    for cmd in [0x04u8, 0x0d, 0x1b, 0x63, 0xfe] {
        let (code, state, _) = err(&c.command(cmd, b"t\0")[0]);
        assert_eq!((code, state.as_str()), (1047, "08S01"), "command {cmd:#x}");
    }
    assert!(contains(&c.query("SELECT 5 * 5"), "25"));
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Connections over max_connections are refused without a thread each.
#[test]
fn connections_over_the_limit_get_no_thread() {
    let dir = temp_dir("nothread");
    let server = Server::start(&dir, &["--max-connections", "1"]);
    let threads = || {
        std::fs::read_dir(format!("/proc/{}/task", server.child.id()))
            .unwrap()
            .count()
    };
    let _held = logged_in(server.addr);
    let before = threads();
    // Connected, never answering the handshake.
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let during = threads();
    assert!(
        during < before + 5,
        "{before} threads before, {during} with 40 refused connections open"
    );
    drop(idle);
    let (_, answer) = RawClient::login(server.addr, "root", PASSWORD);
    let (code, state, _) = err(&answer);
    assert_eq!((code, state.as_str()), (1040, "08004"));
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--socket` refuses a path holding something that is not a stale socket.
#[test]
fn socket_path_holding_a_file_is_not_deleted() {
    let dir = temp_dir("sockfile");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("precious.txt");
    std::fs::write(&path, "keep me").unwrap();
    let mut child = Command::new(common::server_binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-metrics",
            "--socket",
        ])
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env_remove("MILLRACE_ROOT_PASSWORD")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server started on a path that held a regular file");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a socket"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client that starts with another plugin (MySQL 8's default,
/// caching_sha2_password) is switched to mysql_native_password; with
/// CLIENT_DEPRECATE_EOF a result set has no EOF packets and ends with an
/// OK packet whose header is 0xfe.
#[test]
fn auth_switch_and_deprecate_eof() {
    let dir = temp_dir("authswitch");
    let server = Server::start(&dir, &[]);
    let mut c = RawClient::open(server.addr);
    let _ = c.greeting();
    // LONG_PASSWORD | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION |
    // PLUGIN_AUTH | PLUGIN_AUTH_LENENC_CLIENT_DATA | DEPRECATE_EOF
    let caps: u32 = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x8_0000 | 0x20_0000 | 0x100_0000;
    let mut p = caps.to_le_bytes().to_vec();
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(b"root\0");
    p.push(32);
    p.extend_from_slice(&[7; 32]);
    p.extend_from_slice(b"caching_sha2_password\0");
    c.write_packet(&p);
    let switch = c.read_packet();
    assert_eq!(switch[0], 0xfe, "{switch:?}");
    let rest = &switch[1..];
    let nul = rest.iter().position(|&b| b == 0).unwrap();
    assert_eq!(&rest[..nul], b"mysql_native_password");
    let salt = &rest[nul + 1..nul + 21];
    let stage1 = Sha1::digest(PASSWORD.as_bytes());
    let mask = Sha1::new()
        .chain_update(salt)
        .chain_update(Sha1::digest(stage1))
        .finalize();
    let answer: Vec<u8> = stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect();
    c.write_packet(&answer);
    let ok = c.read_packet();
    assert_eq!(ok[0], 0x00, "{ok:?}");
    // SELECT 1, 'a': count, 2 columns, 1 row, OK-as-EOF.
    c.seq = 0;
    c.write_packet(b"\x03SELECT 1, 'a'");
    let packets: Vec<Vec<u8>> = (0..5).map(|_| c.read_packet()).collect();
    assert_eq!(packets[0], [2]);
    assert_eq!(packets[3], b"\x011\x01a");
    assert_eq!(packets[4][0], 0xfe);
    assert!(packets[4].len() >= 7, "{:?}", packets[4]);
    assert_eq!(c.command(0x0e, b"")[0][0], 0x00, "COM_PING");
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The connection id of a logged-in client (SELECT CONNECTION_ID()).
fn connection_id(c: &mut RawClient) -> u32 {
    let r = c.query("SELECT CONNECTION_ID()");
    // Column count, column, EOF, row, EOF: the row is one lenenc string.
    let row = &r[3];
    let text = std::str::from_utf8(&row[1..1 + usize::from(row[0])]).unwrap();
    text.parse().unwrap()
}

/// KILL QUERY over the wire stops a statement waiting for a row lock (1317)
/// and leaves its connection usable; COM_PROCESS_KILL (KILL CONNECTION)
/// closes an idle connection.
#[test]
fn kill_query_and_kill_connection_over_the_wire() {
    let dir = temp_dir("kill");
    let server = Server::start(&dir, &[]);
    let mut a = logged_in(server.addr);
    for sql in [
        "CREATE DATABASE d",
        "CREATE TABLE d.t (id INT PRIMARY KEY, n INT)",
        "INSERT INTO d.t VALUES (1, 10)",
        "BEGIN",
        "UPDATE d.t SET n = 11 WHERE id = 1",
    ] {
        assert_eq!(a.query(sql)[0][0], 0x00, "{sql}");
    }
    let mut b = logged_in(server.addr);
    b.stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let b_id = connection_id(&mut b);
    let waiter = std::thread::spawn(move || {
        let r = b.query("UPDATE d.t SET n = 12 WHERE id = 1");
        (b, r)
    });
    let mut c = logged_in(server.addr);
    std::thread::sleep(Duration::from_millis(300));
    let killed_at = Instant::now();
    assert_eq!(c.query(&format!("KILL QUERY {b_id}"))[0][0], 0x00);
    let (mut b, r) = waiter.join().unwrap();
    assert!(
        killed_at.elapsed() < Duration::from_secs(5),
        "the lock wait ended by the kill, not its timeout"
    );
    assert_eq!(err(&r[0]).0, 1317, "{r:?}");
    assert_eq!(b.query("SELECT 1")[0][0], 0x01, "b is still connected");
    // COM_PROCESS_KILL: the idle connection b is closed.
    let ok = c.command(0x0c, &b_id.to_le_bytes());
    assert_eq!(ok[0][0], 0x00, "COM_PROCESS_KILL: {ok:?}");
    b.stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut byte = [0u8; 1];
    match b.stream.read(&mut byte) {
        Ok(0) => {}
        Err(e)
            if !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!("b's connection was not closed by the kill: {other:?}"),
    }
    // An unknown id.
    let r = c.query("KILL 999999");
    assert_eq!(err(&r[0]).0, 1094, "{r:?}");
    let (status, _) = server.stop();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

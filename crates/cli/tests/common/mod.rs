//! Shared by the end-to-end tests: a `millrace serve` child process on a
//! free loopback port with a temporary data directory.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const PASSWORD: &str = "s3cret-pw";

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("millrace-serve-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A running `millrace serve`; killed on drop if still running.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub stdout: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(server_binary())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--root-password",
                PASSWORD,
                "--metrics-listen",
                "127.0.0.1:0",
                // Small: many servers run side by side in the tests.
                "--buffer-pool-size",
                "128M",
            ])
            .arg("--data-dir")
            .arg(dir)
            .args(extra)
            .env_remove("MILLRACE_ROOT_PASSWORD")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start millrace serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = Vec::new();
        let addr = loop {
            let line = match lines.next() {
                Some(Ok(line)) => line,
                _ => panic!("server exited before listening; stdout: {seen:?}"),
            };
            seen.push(line.clone());
            if let Some(rest) = line.strip_prefix("listening on ") {
                if let Ok(addr) = rest.split(';').next().unwrap().parse() {
                    break addr;
                }
            }
        };
        let stdout = Arc::new(Mutex::new(seen));
        let sink = stdout.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            addr,
            stdout,
        }
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// SIGTERM, then waits (bounded) for the exit.
    pub fn stop(mut self) -> (std::process::ExitStatus, Vec<String>) {
        self.signal(libc::SIGTERM);
        let t0 = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "server did not stop within 10 s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader thread sees EOF right after the exit.
        std::thread::sleep(Duration::from_millis(50));
        let out = self.stdout.lock().unwrap().clone();
        (status, out)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `millrace` binary under test: this build's, or $MILLRACE_TEST_BIN
/// (to check that a new test fails against an older build).
pub fn server_binary() -> std::ffi::OsString {
    std::env::var_os("MILLRACE_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_millrace").into())
}

/// Whether `cmd --version` runs.
pub fn have_command(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub mod client;

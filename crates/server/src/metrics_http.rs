//! The Prometheus text endpoint: `GET /metrics` on a loopback port, every
//! metric of the engine's registry as `millrace_<name>` (counters and
//! gauges, with their help text). Rendering reads gauges that may touch
//! engine pages, so it runs on tokio's blocking pool, never on an async
//! worker. Requests are bounded (8 KiB of headers, 5 s).

use millrace_metrics::{Kind, Registry};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MAX_REQUEST_BYTES: usize = 8192;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The registry in Prometheus text exposition format (version 0.0.4).
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    for m in registry.snapshot() {
        let help = m.help.replace('\\', "\\\\").replace('\n', "\\n");
        let kind = match m.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# HELP millrace_{} {help}", m.name);
        let _ = writeln!(out, "# TYPE millrace_{} {kind}", m.name);
        let _ = writeln!(out, "millrace_{} {}", m.name, m.value);
    }
    out
}

pub async fn serve(listener: tokio::net::TcpListener, registry: Arc<Registry>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, registry)).await;
        });
    }
}

async fn answer(mut stream: tokio::net::TcpStream, registry: Arc<Registry>) -> std::io::Result<()> {
    let mut req = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || req.len() + n > MAX_REQUEST_BYTES {
            return Ok(());
        }
        req.extend_from_slice(&buf[..n]);
    }
    let first = req.split(|&b| b == b'\r').next().unwrap_or_default();
    let (status, body) = if first.starts_with(b"GET /metrics ") || first == b"GET /metrics" {
        let body = tokio::task::spawn_blocking(move || render(&registry))
            .await
            .unwrap_or_default();
        ("200 OK", body)
    } else {
        ("404 Not Found", "try GET /metrics\n".to_string())
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_gauges() {
        let r = Registry::new();
        r.counter("log", "log_fsyncs", "fdatasync calls").add(7);
        r.gauge("trx", "trx_history_len", "history\\length", || 3);
        let text = render(&r);
        assert!(
            text.contains("# TYPE millrace_log_fsyncs counter\nmillrace_log_fsyncs 7\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP millrace_trx_history_len history\\\\length\n"),
            "{text}"
        );
        assert!(text.contains("millrace_trx_history_len 3\n"));
    }
}

//! The span exporter's thread: where it sends and how it batches, from the standard variables
//! (`OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`, `_HEADERS`, `_TIMEOUT`, `OTEL_BSP_*`), and the loop
//! that takes a batch from [`super::spans`]' queue when it is full, when the schedule's delay
//! has passed or when a flush is asked for, and posts it as one OTLP/HTTP protobuf request
//! ([`super::wire`]). A batch the collector does not take is dropped and counted, never kept.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::spans::{Queue, Record, Waiting, drop_spans};
use super::wire::Prefix;

/// Where and how the exporter sends, and how it batches: the standard variables.
pub(super) struct Settings {
    endpoint: reqwest::Url,
    headers: HeaderMap,
    pub(super) timeout: Duration,
    pub(super) queue: usize,
    pub(super) batch: usize,
    delay: Duration,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn number(name: &str, default: u64) -> u64 {
    var(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

impl Settings {
    /// The settings the variables ask for; an error when the endpoint is not an http(s) URL
    /// (not said: it may carry credentials). A header that is not a valid name or value is left out and
    /// said, by name only.
    pub(super) fn from_env() -> Result<Settings, String> {
        let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").unwrap_or_else(|| {
            let base = var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default();
            format!("{}/v1/traces", base.trim_end_matches('/'))
        });
        let endpoint = reqwest::Url::parse(&endpoint)
            .map_err(|e| format!("the OTLP traces endpoint is not a URL: {e}"))?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(
                "the OTLP traces endpoint is not a URL: its scheme is not http or https".into(),
            );
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            for (k, v) in var(name).as_deref().map(parse_headers).unwrap_or_default() {
                match (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v)) {
                    (Ok(k), Ok(v)) => {
                        headers.insert(k, v);
                    }
                    _ => {
                        tracing::warn!(header = %k, "{name} names a header that is not valid; it is left out")
                    }
                }
            }
        }
        let timeout = var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_TIMEOUT"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        let queue = number("OTEL_BSP_MAX_QUEUE_SIZE", 2048).max(1) as usize;
        Ok(Settings {
            endpoint,
            headers,
            timeout: Duration::from_millis(timeout),
            queue,
            batch: (number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512).max(1) as usize).min(queue),
            // At least a millisecond, so that an idle exporter never spins.
            delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", 5000).max(1)),
        })
    }
}

/// `key=value` pairs separated by commas, values percent-decoded (the OTLP exporter
/// specification's format); a pair without `=` is left out.
fn parse_headers(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Starts the exporter's thread on `queue`, with its HTTP client, exporting under `resource`.
pub(super) fn spawn(
    settings: Settings,
    queue: Arc<Queue>,
    resource: &opentelemetry_sdk::Resource,
) -> Result<(), String> {
    let client = reqwest::blocking::Client::builder()
        .timeout(settings.timeout)
        .build()
        .map_err(|e| format!("the OTLP span exporter's HTTP client: {e}"))?;
    let exporter = Exporter {
        queue,
        client,
        settings,
        prefix: Prefix::new(resource),
    };
    std::thread::Builder::new()
        .name("mcpspec-spans".into())
        .spawn(move || exporter.run())
        .map_err(|e| format!("the span exporter's thread: {e}"))?;
    Ok(())
}

/// The exporter thread's state.
struct Exporter {
    queue: Arc<Queue>,
    client: reqwest::blocking::Client,
    settings: Settings,
    prefix: Prefix,
}

impl Exporter {
    /// Exports a batch when it is full, when a flush is asked for, or when the schedule's
    /// delay has passed with spans waiting.
    fn run(self) {
        loop {
            let Waiting { spans, flushes } = self.queue.take(self.settings.delay);
            let mut spans = spans.into_iter();
            loop {
                let batch: Vec<Record> = spans.by_ref().take(self.settings.batch).collect();
                if batch.is_empty() {
                    break;
                }
                self.export(batch);
            }
            for ack in flushes {
                let _ = ack.send(());
            }
        }
    }

    /// Posts `batch` as one OTLP request; counts its spans as dropped when the collector does
    /// not take it.
    fn export(&self, batch: Vec<Record>) {
        let spans = batch.len() as u64;
        let body = super::wire::encode(&self.prefix, &batch);
        let request = self
            .client
            .post(self.settings.endpoint.clone())
            .headers(self.settings.headers.clone());
        match request.body(body).send() {
            // Read to its end, so that the connection is kept for the next batch.
            Ok(r) if r.status().is_success() => {
                let _ = r.bytes();
            }
            Ok(r) => drop_spans(
                spans,
                &format!("the collector answered {} to a batch", r.status()),
            ),
            Err(e) => drop_spans(
                spans,
                // Without its URL: the endpoint may carry credentials.
                &format!("the collector did not take a batch ({})", e.without_url()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn headers_are_pairs_with_percent_decoded_values() {
        assert_eq!(
            super::parse_headers("x-team=blue, authorization=Basic%20dXNlcjpwdw==,broken,=x"),
            vec![
                ("x-team".to_string(), "blue".to_string()),
                (
                    "authorization".to_string(),
                    "Basic dXNlcjpwdw==".to_string()
                ),
            ]
        );
        assert_eq!(super::percent_decode("100%"), "100%");
        assert_eq!(super::percent_decode("%e2%9c%93"), "✓");
    }
}

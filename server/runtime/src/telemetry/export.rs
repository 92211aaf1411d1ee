//! Where the exporters send, from the standard variables
//! (`OTEL_EXPORTER_OTLP_[<SIGNAL>_]ENDPOINT`, `_HEADERS`, `_TIMEOUT`, `_COMPRESSION`) and how
//! one export is posted, shared by the span and metric exporters; and the span exporter's
//! thread: how it batches (`OTEL_BSP_*`), and the loop that takes what [`super::spans`]' queue
//! holds when half of it is waiting, when the schedule's delay has passed or when a flush is
//! asked for, and posts it in batches, each one OTLP/HTTP protobuf request ([`super::wire`]).
//! A batch the collector does not take is dropped and counted, never kept.

use std::sync::Arc;
use std::time::Duration;

use ureq::http::{HeaderName, HeaderValue, Uri};

use super::queue::{Queue, Waiting};
use super::record::{Record, drop_spans};
use super::wire::Prefix;

/// The span queue's default size: 8,192 spans (about 2 MB when full), where the
/// specification's is 2,048. The exporter is woken when half the queue is waiting and then
/// posts it in batches of 512 back to back; at 2,048 it was woken for every two exports, and
/// on a loaded server of two cores a wake-up of its thread costs more than the batches'
/// encoding: at 8,192 the exporter's thread took 1.4 % of the server's CPU where it took 2.0 %
/// at 2,048 (`BENCHMARKS.md`, "Fewer wake-ups"). Each export stays the specification's 512
/// spans.
const QUEUE: u64 = 8192;

/// Where an exporter sends one signal's exports, from the standard variables.
pub(super) struct Endpoint {
    url: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    pub(super) timeout: Duration,
    /// Whether each export's body is gzipped (`_COMPRESSION=gzip`).
    gzip: bool,
}

/// Where and how the span exporter sends, and how it batches: the standard variables.
pub(super) struct Settings {
    endpoint: Endpoint,
    pub(super) queue: usize,
    pub(super) batch: usize,
    delay: Duration,
}

pub(super) fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

pub(super) fn number(name: &str, default: u64) -> u64 {
    var(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

impl Endpoint {
    /// Where `signal` (`TRACES`, `METRICS`) goes: `OTEL_EXPORTER_OTLP_<signal>_ENDPOINT`, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/<signal>`; the headers of both `_HEADERS`
    /// variables; the `_TIMEOUT` and the `_COMPRESSION`, the signal's own variable first. An
    /// error when the endpoint is not an http(s) URL (not said: it may carry credentials) or
    /// the compression is neither `gzip` nor `none`. A header that is not a valid name or value
    /// is left out and said, by name only.
    pub(super) fn from_env(signal: &str) -> Result<Endpoint, String> {
        let lower = signal.to_ascii_lowercase();
        let url = var(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")).unwrap_or_else(|| {
            let base = var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default();
            format!("{}/v1/{lower}", base.trim_end_matches('/'))
        });
        let url = Uri::try_from(url)
            .map_err(|e| format!("the OTLP {lower} endpoint is not a URL: {e}"))?;
        if !matches!(url.scheme_str(), Some("http" | "https")) || url.host().is_none() {
            return Err(format!(
                "the OTLP {lower} endpoint is not a URL: it is not http or https with a host"
            ));
        }
        let mut headers = vec![(
            ureq::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        )];
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS".to_string(),
            format!("OTEL_EXPORTER_OTLP_{signal}_HEADERS"),
        ] {
            for (k, v) in var(&name).as_deref().map(parse_headers).unwrap_or_default() {
                match (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v)) {
                    (Ok(k), Ok(v)) => {
                        // The signal's own variable comes second and wins.
                        headers.retain(|(name, _)| *name != k);
                        headers.push((k, v));
                    }
                    _ => {
                        tracing::warn!(header = %k, "{name} names a header that is not valid; it is left out")
                    }
                }
            }
        }
        let signal_var = |name: &str| {
            var(&format!("OTEL_EXPORTER_OTLP_{signal}_{name}"))
                .or_else(|| var(&format!("OTEL_EXPORTER_OTLP_{name}")))
        };
        let timeout = signal_var("TIMEOUT")
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        let compression = signal_var("COMPRESSION").map(|v| v.to_ascii_lowercase());
        let gzip = match compression.as_deref() {
            None | Some("none") => false,
            Some("gzip") => true,
            Some(other) => {
                return Err(format!(
                    "the OTLP {lower} compression is `{other}`: it is gzip or none"
                ));
            }
        };
        if gzip {
            // After the variables' headers, so that the body is always said as it is sent.
            headers.retain(|(name, _)| *name != ureq::http::header::CONTENT_ENCODING);
            headers.push((
                ureq::http::header::CONTENT_ENCODING,
                HeaderValue::from_static("gzip"),
            ));
        }
        Ok(Endpoint {
            url,
            headers,
            timeout: Duration::from_millis(timeout),
            gzip,
        })
    }

    /// How long a flush waits for an export: the export timeout and a second.
    pub(super) fn flush_wait(&self) -> Duration {
        self.timeout + Duration::from_secs(1)
    }

    /// A blocking HTTP client for this endpoint, for an exporter's own thread: the exchange
    /// runs on the calling thread, with no thread of the client's own. The timeout bounds
    /// each step (connecting, sending, waiting for the answer, reading it); the host's name is
    /// looked up by the system's resolver and its own timeouts, since ureq looks a name up on
    /// a new thread for each request when a timeout covers it. An https endpoint is checked
    /// against the system's roots. A status is an answer, not an error.
    pub(super) fn client(&self) -> ureq::Agent {
        let each = Some(self.timeout);
        let config = ureq::Agent::config_builder()
            .timeout_connect(each)
            .timeout_send_request(each)
            .timeout_send_body(each)
            .timeout_recv_response(each)
            .timeout_recv_body(each)
            .http_status_as_error(false);
        // The system's roots are read only for an https endpoint.
        let config = if self.url.scheme_str() == Some("https") {
            config.tls_config(crate::roots::system())
        } else {
            config
        };
        config.build().new_agent()
    }

    /// Posts one protobuf export; what went wrong, without the URL (it may carry
    /// credentials), when the collector did not take it.
    pub(super) fn post(&self, client: &ureq::Agent, body: &[u8]) -> Result<(), String> {
        let gzipped;
        let body = if self.gzip {
            gzipped = gzip(body);
            &gzipped
        } else {
            body
        };
        let mut request = client.post(&self.url);
        for (k, v) in &self.headers {
            request = request.header(k, v);
        }
        match request.send(body) {
            // Read to its end, so that the connection is kept for the next export.
            Ok(mut r) if r.status().is_success() => {
                let _ = std::io::copy(&mut r.body_mut().as_reader(), &mut std::io::sink());
                Ok(())
            }
            Ok(r) => Err(format!("the collector answered {}", r.status())),
            Err(e) => Err(format!("the collector did not answer ({})", quiet(&e))),
        }
    }
}

/// `body` gzipped, at the fastest level: an export's protobuf repeats its keys and names in
/// every span, which the fastest level already finds, and the exporter's thread shares the
/// cores with the calls.
fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut out = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::fast(),
    );
    out.write_all(body)
        .and_then(|()| out.finish())
        .expect("gzip into memory does not fail")
}

/// What went wrong in an export, said without the URL (it may carry credentials).
fn quiet(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::Io(io) => io.kind().to_string(),
        ureq::Error::HostNotFound => "its host was not found".into(),
        ureq::Error::ConnectionFailed => "the connection failed".into(),
        ureq::Error::Tls(why) => format!("TLS: {why}"),
        ureq::Error::Rustls(why) => format!("TLS: {why}"),
        _ => "the exchange failed".into(),
    }
}

impl Settings {
    /// The span exporter's settings: its endpoint, and its batching from `OTEL_BSP_*`. The
    /// batch and the delay default to the specification's values (512 spans, 5 s); the queue
    /// to [`QUEUE`], not its 2,048.
    pub(super) fn from_env() -> Result<Settings, String> {
        let endpoint = Endpoint::from_env("TRACES")?;
        let queue = number("OTEL_BSP_MAX_QUEUE_SIZE", QUEUE).max(1) as usize;
        Ok(Settings {
            endpoint,
            queue,
            batch: (number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512).max(1) as usize).min(queue),
            // At least a millisecond, so that an idle exporter never spins.
            delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", 5000).max(1)),
        })
    }

    /// How long a flush waits: the endpoint's.
    pub(super) fn flush_wait(&self) -> Duration {
        self.endpoint.flush_wait()
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
    let client = settings.endpoint.client();
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
    client: ureq::Agent,
    settings: Settings,
    prefix: Prefix,
}

impl Exporter {
    /// Exports what is waiting, in batches, when half the queue is waiting, when a flush is
    /// asked for, or when the schedule's delay has passed.
    fn run(self) {
        // The request's body, kept between batches.
        let mut body = Vec::new();
        loop {
            let Waiting { mut rings, flushes } = self.queue.take(self.settings.delay);
            self.queue.drain(&mut rings, self.settings.batch, |batch| {
                self.export(batch, &mut body)
            });
            self.queue.give_back(rings);
            for ack in flushes {
                let _ = ack.send(());
            }
        }
    }

    /// Posts `batch` as one OTLP request; counts its spans as dropped when the collector does
    /// not take it.
    fn export(&self, batch: &[&Record], body: &mut Vec<u8>) {
        let spans = batch.len() as u64;
        let request = super::wire::encode(&self.prefix, batch, body);
        if let Err(why) = self.settings.endpoint.post(&self.client, request) {
            drop_spans(spans, &format!("a batch of spans: {why}"));
        }
    }
}

#[cfg(test)]
mod tests {
    /// A gzipped body decodes to the body, and is smaller for an export's repeated names.
    #[test]
    fn a_gzipped_body_decodes_to_the_body() {
        use std::io::Read as _;
        let body = b"mcp.method.name tools/call gen_ai.tool.name kb_search ".repeat(100);
        let gzipped = super::gzip(&body);
        assert!(gzipped.len() < body.len() / 10, "{} bytes", gzipped.len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gzipped[..])
            .read_to_end(&mut back)
            .expect("gzip");
        assert_eq!(back, body);
    }

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

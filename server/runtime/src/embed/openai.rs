//! An embedding provider that speaks the OpenAI embeddings API (`POST {base}/embeddings`),
//! which OpenAI, Ollama, vLLM, llama.cpp's server and TEI serve.
//!
//! Calls that want vectors while a request is in flight wait, and the next request carries
//! all their texts (up to the spec's `batch`; more go in further requests): ten concurrent
//! `kb_add` calls make two requests, not ten, and a lone call waits for nothing. The first
//! caller to find no request in flight sends for everyone waiting (group commit, as a
//! database's log writer does), so no timer or thread of its own is needed.
//!
//! A request that fails for a reason that may pass (no answer, a timeout, 429, 5xx) is tried
//! again after a backoff with jitter, doubling from 250 ms; an answer's `Retry-After` (seconds
//! or an HTTP date) says how long instead. No wait runs past the call's deadline. A key that
//! is refused (401, 403) is not tried again. The key is sent only in `Authorization`; the
//! provider's own words are quoted in errors with any copy of the key blanked, and the URL is
//! shown without credentials.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use super::{EmbedError, Vector};
use crate::def::EmbeddingDef;

/// The longest answer read: 64 MiB (2,048 vectors of 3,072 dimensions as JSON fit).
const MAX_ANSWER: u64 = 64 << 20;
/// The first backoff; each retry doubles it, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// How long before the call's deadline a request gives up: a fifth of the time the call had
/// left when it asked, within these bounds, so that the rest of the call (the rollback, the
/// answer) fits after it even on a loaded machine. A fixed 250 ms was not enough with both
/// cores busy: the call's own deadline came first and the hang was said as a timeout.
const MARGIN_MIN: Duration = Duration::from_millis(250);
const MARGIN_MAX: Duration = Duration::from_secs(2);
/// The longest `Retry-After` taken at its word.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A client of one provider and model.
pub struct Client {
    agent: ureq::Agent,
    url: String,
    shown: String,
    model: String,
    dims: u32,
    /// `Bearer KEY`, when the key's variable is set.
    authorization: Option<String>,
    /// The key, to blank it in a provider's words.
    key: Option<String>,
    key_env: &'static str,
    batch: usize,
    retries: u32,
    timeout: Duration,
    queue: Mutex<Queue>,
    turn: Condvar,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Arc<Job>>,
    /// Whether a caller is sending a batch now.
    sending: bool,
}

/// One call's texts, and their vectors once a batch brought them.
struct Job {
    texts: Vec<String>,
    done: Mutex<Option<Result<Vec<Vector>, EmbedError>>>,
}

/// Why one request failed, and whether trying again may help.
struct Failure {
    message: String,
    again: bool,
    /// How long the provider asked to wait (`Retry-After`).
    after: Option<Duration>,
}

impl Client {
    /// A client of `base_url`'s embeddings for `model`, with the key read from the variable
    /// the definition names (none when it is unset: a local server may need none).
    pub fn new(
        def: &'static EmbeddingDef,
        base_url: &str,
        model: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Client, String> {
        let url = format!("{}/embeddings", base_url.trim_end_matches('/'));
        let parsed: ureq::http::Uri = url
            .parse()
            .map_err(|_| format!("`{}` is not a URL", sqlscan::redact(base_url)))?;
        let https = match parsed.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(format!(
                    "`{}` is not an http or https URL",
                    sqlscan::redact(base_url)
                ));
            }
        };
        let key = env(def.key_env).filter(|k| !k.trim().is_empty());
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(def.timeout_ms)));
        let config = if https {
            config.tls_config(crate::roots::system())
        } else {
            config
        };
        Ok(Client {
            agent: config.build().new_agent(),
            shown: sqlscan::redact(base_url),
            url,
            model: model.to_string(),
            dims: def.dimensions,
            authorization: key.as_ref().map(|k| format!("Bearer {}", k.trim())),
            key: key.map(|k| k.trim().to_string()),
            key_env: def.key_env,
            batch: def.batch.max(1) as usize,
            retries: def.retries,
            timeout: Duration::from_millis(def.timeout_ms.max(1)),
            queue: Mutex::new(Queue::default()),
            turn: Condvar::new(),
        })
    }

    /// The base URL, without credentials.
    pub fn url_shown(&self) -> &str {
        &self.shown
    }

    /// Texts waiting for a batch.
    pub fn queued(&self) -> usize {
        let q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.waiting.iter().map(|j| j.texts.len()).sum()
    }

    /// The vectors of `texts`, sent with other calls' texts waiting at the same time.
    pub fn embed(
        &self,
        texts: &[&str],
        deadline: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Vector>, EmbedError> {
        let job = Arc::new(Job {
            texts: texts.iter().map(|t| t.to_string()).collect(),
            done: Mutex::new(None),
        });
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.waiting.push(job.clone());
        queued(texts.len() as i64);
        loop {
            if let Some(done) = job.done.lock().unwrap_or_else(|p| p.into_inner()).take() {
                return done;
            }
            if !q.sending {
                q.sending = true;
                let batch = self.take(&mut q);
                drop(q);
                self.send(&batch, deadline, cancelled);
                q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                q.sending = false;
                self.turn.notify_all();
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || cancelled() {
                // Still waiting: taken out, so that no batch sends it for nobody.
                if let Some(i) = q.waiting.iter().position(|j| Arc::ptr_eq(j, &job)) {
                    q.waiting.remove(i);
                    queued(-(texts.len() as i64));
                }
                return Err(EmbedError::Stopped);
            }
            // Woken when a batch is done, and at least every 100 ms to notice a cancellation.
            q = self
                .turn
                .wait_timeout(q, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The jobs the next batch sends: the first waiting, and those after it while their texts
    /// fit in one request.
    fn take(&self, q: &mut Queue) -> Vec<Arc<Job>> {
        let mut texts = 0;
        let mut n = 0;
        for j in &q.waiting {
            if n > 0 && texts + j.texts.len() > self.batch {
                break;
            }
            texts += j.texts.len();
            n += 1;
        }
        let taken: Vec<Arc<Job>> = q.waiting.drain(..n).collect();
        queued(-(texts as i64));
        taken
    }

    /// Sends `jobs`' texts in requests of at most `batch` texts, and gives each job its
    /// vectors, or the failure of the first request that failed.
    fn send(&self, jobs: &[Arc<Job>], deadline: Instant, cancelled: &dyn Fn() -> bool) {
        let texts: Vec<&str> = jobs
            .iter()
            .flat_map(|j| j.texts.iter().map(String::as_str))
            .collect();
        let mut vectors: Vec<Vector> = Vec::with_capacity(texts.len());
        let mut failed = None;
        for chunk in texts.chunks(self.batch) {
            match self.request_with_retries(chunk, deadline, cancelled) {
                Ok(v) => vectors.extend(v),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let mut at = 0;
        for j in jobs {
            let result = match &failed {
                Some(e) => Err(e.clone()),
                None => Ok(vectors[at..at + j.texts.len()].to_vec()),
            };
            at += j.texts.len();
            *j.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        }
    }

    /// One request, tried again while it fails for a reason that may pass, its retries last
    /// and the deadline allows.
    fn request_with_retries(
        &self,
        texts: &[&str],
        deadline: Instant,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Vector>, EmbedError> {
        let mut attempt = 0;
        let margin = margin(deadline.saturating_duration_since(Instant::now()));
        loop {
            // A request ends a little before the call's deadline, so that a provider that does
            // not answer is said as such rather than as the call's timeout.
            let left = deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(margin);
            if left.is_zero() || cancelled() {
                return Err(EmbedError::Stopped);
            }
            let f = match self.request(texts, left.min(self.timeout)) {
                Ok(v) => return Ok(v),
                Err(f) => f,
            };
            let tries = attempt + 1;
            if !f.again || attempt >= self.retries {
                let after = if f.again && tries > 1 {
                    format!(" (after {tries} tries)")
                } else {
                    String::new()
                };
                return Err(EmbedError::Failed(format!("{}{after}", f.message)));
            }
            let wait = f.after.unwrap_or_else(|| backoff(attempt));
            if Instant::now() + wait + margin >= deadline {
                return Err(EmbedError::Failed(format!(
                    "{} (tried {tries} times; the call's time runs out before the next try)",
                    f.message
                )));
            }
            tracing::warn!(
                provider = %self.shown,
                attempt = tries,
                wait_ms = wait.as_millis() as u64,
                "embedding request failed, trying again: {}",
                f.message
            );
            pause(wait, cancelled);
            attempt += 1;
        }
    }

    /// One request for `texts`' vectors, within `timeout`.
    fn request(&self, texts: &[&str], timeout: Duration) -> Result<Vec<Vector>, Failure> {
        let body = json!({
            "model": self.model,
            "input": texts,
            "dimensions": self.dims,
            "encoding_format": "float",
        });
        let mut request = self
            .agent
            .post(&self.url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("content-type", "application/json");
        if let Some(a) = &self.authorization {
            request = request.header("authorization", a);
        }
        let mut answer = request
            .send(body.to_string().as_bytes())
            .map_err(|e| Failure {
                message: format!(
                    "the embedding provider at {} did not answer ({})",
                    self.shown,
                    quiet(&e)
                ),
                again: true,
                after: None,
            })?;
        let status = answer.status().as_u16();
        let after = answer
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after);
        let text = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_string()
            .map_err(|e| Failure {
                message: format!(
                    "the embedding provider's answer could not be read ({})",
                    quiet(&e)
                ),
                again: true,
                after: None,
            })?;
        match status {
            200..=299 => self.vectors(&text, texts.len()),
            401 | 403 => Err(Failure {
                message: format!(
                    "the embedding provider refused the key in {} (HTTP {status})",
                    self.key_env
                ),
                again: false,
                after: None,
            }),
            408 | 409 | 429 | 500..=599 => Err(Failure {
                message: format!(
                    "the embedding provider answered HTTP {status}{}",
                    self.said(&text)
                ),
                again: true,
                after,
            }),
            _ => Err(Failure {
                message: format!(
                    "the embedding provider answered HTTP {status}{}",
                    self.said(&text)
                ),
                again: false,
                after: None,
            }),
        }
    }

    /// The vectors of a successful answer, in the order of the texts.
    fn vectors(&self, text: &str, n: usize) -> Result<Vec<Vector>, Failure> {
        let bad = |why: &str| Failure {
            message: format!("the embedding provider's answer {why}"),
            again: false,
            after: None,
        };
        let v: Value = serde_json::from_str(text).map_err(|_| bad("is not JSON"))?;
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("has no `data` list"))?;
        if data.len() != n {
            return Err(bad(&format!("has {} vectors for {n} texts", data.len())));
        }
        let mut out: Vec<Option<Vector>> = vec![None; n];
        for (i, item) in data.iter().enumerate() {
            let at = item
                .get("index")
                .and_then(Value::as_u64)
                .map_or(i, |x| x as usize);
            let numbers = item
                .get("embedding")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("has an item without an `embedding` list"))?;
            let mut vector: Vec<f32> = numbers
                .iter()
                .map(|x| x.as_f64().map(|x| x as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("has an embedding that is not a list of numbers"))?;
            if vector.len() != self.dims as usize {
                return Err(bad(&format!(
                    "has vectors of {} dimensions where {} were asked for",
                    vector.len(),
                    self.dims
                )));
            }
            normalise(&mut vector);
            match out.get_mut(at) {
                Some(slot @ None) => *slot = Some(vector.into()),
                _ => return Err(bad("has an index that is out of place")),
            }
        }
        out.into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("misses a text's vector"))
    }

    /// What the provider said about an error (`error.message`, or its first 200
    /// characters), with any copy of the key blanked; empty when it said nothing.
    fn said(&self, text: &str) -> String {
        let v: Option<Value> = serde_json::from_str(text).ok();
        let message = v
            .as_ref()
            .and_then(|v| v.pointer("/error/message").or_else(|| v.get("error")))
            .and_then(Value::as_str)
            .map_or_else(|| text.to_string(), str::to_string);
        let mut message: String = message.chars().take(200).collect();
        if let Some(k) = &self.key
            && k.len() >= 4
        {
            message = message.replace(k.as_str(), "***");
        }
        let message = message.trim();
        if message.is_empty() {
            String::new()
        } else {
            let message: String = message
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            format!(": {message}")
        }
    }
}

/// `v` scaled to length one (left as it is when it is all zeros).
fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// How long before the deadline a call with `left` to run stops asking the provider.
fn margin(left: Duration) -> Duration {
    (left / 5).clamp(MARGIN_MIN, MARGIN_MAX)
}

/// The wait before retry `attempt` (from 0): doubling from [`FIRST_BACKOFF`], at most
/// [`MAX_BACKOFF`], with full jitter over its second half.
fn backoff(attempt: u32) -> Duration {
    let full = FIRST_BACKOFF
        .saturating_mul(1 << attempt.min(16))
        .min(MAX_BACKOFF);
    let mut bytes = [0u8; 8];
    let jitter = getrandom::fill(&mut bytes).map_or(0.5, |()| {
        (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
    });
    full.mul_f64(0.5 + 0.5 * jitter)
}

/// A `Retry-After` value: seconds, or an HTTP date; at most [`MAX_RETRY_AFTER`].
fn retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    let wait = match v.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => {
            let at = httpdate(v)?;
            at.duration_since(SystemTime::now()).unwrap_or_default()
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP dates are sent in.
fn httpdate(v: &str) -> Option<SystemTime> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as i64
        + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    // Days since the epoch of a civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + m * 60 + s;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

/// What went wrong in an exchange, without the URL (it may carry credentials).
fn quiet(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::Io(io) => io.kind().to_string(),
        ureq::Error::HostNotFound => "its host was not found".into(),
        ureq::Error::ConnectionFailed => "the connection failed".into(),
        ureq::Error::Tls(why) => format!("TLS: {why}"),
        ureq::Error::Rustls(why) => format!("TLS: {why}"),
        ureq::Error::BodyExceedsLimit(_) => "the answer is too long".into(),
        _ => "the exchange failed".into(),
    }
}

/// Moves the metric of texts waiting for a batch.
fn queued(by: i64) {
    #[cfg(feature = "http")]
    crate::metrics::embedding_queued(by);
    #[cfg(not(feature = "http"))]
    let _ = by;
}

/// Waits `wait`, noticing a cancellation within 50 ms.
fn pause(wait: Duration, cancelled: &dyn Fn() -> bool) {
    let until = Instant::now() + wait;
    while !cancelled() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(" 120 "), Some(MAX_RETRY_AFTER));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(
            httpdate("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(retry_after("soon"), None);
    }

    #[test]
    fn backoff_doubles_within_its_bounds() {
        for attempt in 0..20 {
            let full = FIRST_BACKOFF
                .saturating_mul(1 << attempt.min(16))
                .min(MAX_BACKOFF);
            let b = backoff(attempt);
            assert!(b >= full / 2 && b <= full, "{attempt}: {b:?}");
        }
    }

    #[test]
    fn the_margin_is_a_fifth_of_the_time_left_within_its_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(margin(ms(3_000)), ms(600));
        assert_eq!(margin(ms(500)), MARGIN_MIN);
        assert_eq!(margin(Duration::ZERO), MARGIN_MIN);
        assert_eq!(margin(ms(60_000)), MARGIN_MAX);
    }
}

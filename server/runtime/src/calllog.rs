//! The call log: one line on stderr per call, at target `mcpspec::call`.
//!
//! The line is a `tracing` event. tracing-subscriber's formatter, though, costs as much as the
//! rest of a primary-key call together (about 12,000 instructions: field visitors, `Debug`
//! formatting, a styled timestamp). So when [`cli`](crate::cli) has installed its own
//! subscriber, it also installs the line's format here, and a call's line is written
//! directly: the same bytes that subscriber would write (held to them by this module's tests),
//! through one `write` to stderr. The filter still decides (`MCPSPEC_LOG`), and a call inside
//! an enabled span, or in a program with a subscriber of its own, goes through `tracing`.

use std::cell::RefCell;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// How the installed subscriber writes its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// tracing-subscriber's `Full` text format, without colours.
    Text,
    /// tracing-subscriber's JSON format.
    Json,
}

static FORMAT: OnceLock<Format> = OnceLock::new();

/// Says that the process's subscriber writes lines to stderr in `format`, so a call's line can
/// be written without it. Only the subscriber's installer may say so; the first word stands.
pub fn install(format: Format) {
    let _ = FORMAT.set(format);
}

/// What the log says of one call.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The engine's number for the call.
    pub request: u64,
    /// The caller's subject, for a call an OAuth access token made.
    pub sub: Option<&'a str>,
    /// The tool's wire name.
    pub tool: &'a str,
    /// `ok`, or the error code.
    pub outcome: &'a str,
    /// Wall time, in milliseconds rounded to the microsecond.
    pub duration_ms: f64,
    /// The result's approximate size as JSON, or the error message's length.
    pub result_bytes: usize,
    /// The arguments as the client sent them (`None`: none sent); the line carries them
    /// [`Sanitized`].
    pub arguments: Option<&'a Value>,
}

impl Call<'_> {
    /// The arguments as the line shows them.
    fn logged_arguments(&self) -> Sanitized<'_> {
        Sanitized(self.arguments.unwrap_or(&Value::Null))
    }
}

/// The time since `started`, in milliseconds rounded to the microsecond, as a call's line
/// gives its duration.
pub(crate) fn millis_since(started: std::time::Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

/// Whether the filter lets `mcpspec::call` through at INFO: ask before building a [`Call`].
pub fn enabled() -> bool {
    tracing::enabled!(target: "mcpspec::call", tracing::Level::INFO)
}

/// Logs `call`; [`enabled`] said it should be.
pub fn log(call: &Call<'_>) {
    match FORMAT.get() {
        Some(&format) if tracing::Span::current().is_none() => {
            LINE.with_borrow_mut(|line| {
                line.clear();
                write_line(line, format, now(), call);
                // As tracing-subscriber does: a log that cannot be written is not the call's
                // failure.
                let _ = std::io::stderr().lock().write_all(line);
                // A huge line (a long list of arguments) is not kept for the thread's life.
                if line.capacity() > KEPT_LINE {
                    *line = Vec::new();
                }
            });
        }
        _ => event(call),
    }
}

/// `call` as a `tracing` event, to whatever subscriber there is.
fn event(call: &Call<'_>) {
    // A caller's subject when there is one; `None` records no field at all.
    tracing::info!(
        target: "mcpspec::call",
        request = call.request,
        sub = call.sub,
        tool = call.tool,
        outcome = call.outcome,
        duration_ms = call.duration_ms,
        result_bytes = call.result_bytes,
        arguments = %call.logged_arguments(),
        "call"
    );
}

/// The most room a thread's line keeps between calls.
const KEPT_LINE: usize = 64 * 1024;

thread_local! {
    /// A thread's line, kept between calls.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The wall clock as seconds and microseconds since the Unix epoch.
fn now() -> (u64, u32) {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_secs(), t.subsec_micros())
}

/// Appends `call`'s line, newline included, as the subscriber would write it at `time`.
fn write_line(out: &mut Vec<u8>, format: Format, time: (u64, u32), call: &Call<'_>) {
    match format {
        Format::Text => {
            write_time(out, time);
            out.extend_from_slice(b"  INFO mcpspec::call: call request=");
            write_json(out, call.request);
            if let Some(sub) = call.sub {
                out.extend_from_slice(b" sub=");
                write_debug_str(out, sub);
            }
            out.extend_from_slice(b" tool=");
            write_debug_str(out, call.tool);
            out.extend_from_slice(b" outcome=");
            write_debug_str(out, call.outcome);
            out.extend_from_slice(b" duration_ms=");
            write_debug_f64(out, call.duration_ms);
            out.extend_from_slice(b" result_bytes=");
            write_json(out, call.result_bytes);
            out.extend_from_slice(b" arguments=");
            let at = out.len();
            write_json(out, call.logged_arguments());
            // serde_json leaves DEL, C1 and the separators raw.
            crate::logsafe::escape_tail(out, at);
        }
        Format::Json => {
            out.extend_from_slice(b"{\"timestamp\":\"");
            write_time(out, time);
            out.extend_from_slice(
                b"\",\"level\":\"INFO\",\"fields\":{\"message\":\"call\",\"request\":",
            );
            write_json(out, call.request);
            if let Some(sub) = call.sub {
                out.extend_from_slice(b",\"sub\":");
                write_json(out, sub);
            }
            out.extend_from_slice(b",\"tool\":");
            write_json(out, call.tool);
            out.extend_from_slice(b",\"outcome\":");
            write_json(out, call.outcome);
            out.extend_from_slice(b",\"duration_ms\":");
            write_json(out, call.duration_ms);
            out.extend_from_slice(b",\"result_bytes\":");
            write_json(out, call.result_bytes);
            out.extend_from_slice(b",\"arguments\":");
            // The subscriber records the arguments with `Display`: JSON text, as a string.
            let arguments = call.logged_arguments();
            let at = out.len();
            write_json(out, arguments.to_string());
            crate::logsafe::escape_tail(out, at);
            out.extend_from_slice(b"},\"target\":\"mcpspec::call\"}");
        }
    }
    out.push(b'\n');
}

/// Appends `s` as `{:?}` writes it: a caller's value, quoted (see [`crate::logsafe`]).
fn write_debug_str(out: &mut Vec<u8>, s: &str) {
    crate::logsafe::write_quoted(out, s);
}

/// Appends `x` as `{:?}` writes it.
fn write_debug_f64(out: &mut Vec<u8>, x: f64) {
    // Between these bounds `{:?}` writes plain decimals, as serde_json does, only slower;
    // outside them the two write exponents differently (`1e16` against `1e+16`).
    if x == 0.0 || (1e-4..1e16).contains(&x.abs()) {
        write_json(out, x);
    } else {
        let _ = write!(out, "{x:?}");
    }
}

/// Appends `v` as JSON, which for integers and values is also how `{:?}` and `{}` write them.
fn write_json(out: &mut Vec<u8>, v: impl serde::Serialize) {
    // Writing to a Vec cannot fail, and these values always serialise.
    let _ = serde_json::to_writer(out, &v);
}

/// Appends the UTC time as RFC 3339 with microseconds (`2026-11-24T10:06:54.552191Z`), as
/// tracing-subscriber's `SystemTime` writes it.
fn write_time(out: &mut Vec<u8>, (secs, micros): (u64, u32)) {
    let (year, month, day) = civil_date(secs / 86_400);
    let of_day = secs % 86_400;
    let fields = [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (of_day / 3600, 2, b':'),
        (of_day / 60 % 60, 2, b':'),
        (of_day % 60, 2, b'.'),
        (u64::from(micros), 6, b'Z'),
    ];
    for (n, width, then) in fields {
        write_padded(out, n, width);
        out.push(then);
    }
}

/// Appends `n` in decimal with at least `width` digits.
fn write_padded(out: &mut Vec<u8>, n: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    let mut rest = n;
    while rest > 0 || digits.len() - at < width {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out.extend_from_slice(&digits[at..]);
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_date(days: u64) -> (u64, u64, u64) {
    // Count from 0000-03-01, so that a leap day ends its 400-year era's year.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

/// Keys whose values are never logged, matched without regard to case anywhere in the key.
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "credential",
    "private_key",
];

/// Prefixes of strings that look like credentials, never logged.
const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "ghp_",
    "gho_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "AKIA",
    "Bearer ",
];

/// Strings longer than this many characters are cut in the log.
const LOGGED_CHARS: usize = 200;

/// What stands in the log for a secret.
const REDACTED: &str = "[redacted]";

/// A value as logged: long text cut, secret-looking values redacted. It serialises (and
/// displays, as JSON) without building a copy.
#[derive(Debug, Clone, Copy)]
pub struct Sanitized<'a>(pub &'a Value);

impl serde::Serialize for Sanitized<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::String(text) if SECRET_PREFIXES.iter().any(|p| text.starts_with(p)) => {
                s.serialize_str(REDACTED)
            }
            Value::String(text) => match text.char_indices().nth(LOGGED_CHARS) {
                Some((cut, _)) => {
                    let chars = LOGGED_CHARS + text[cut..].chars().count();
                    s.collect_str(&format_args!("{}…({chars} chars)", &text[..cut]))
                }
                None => s.serialize_str(text),
            },
            Value::Array(items) => s.collect_seq(items.iter().map(Sanitized)),
            Value::Object(fields) => s.collect_map(fields.iter().map(|(k, v)| {
                let field = if is_secret_key(k) {
                    Field::Redacted
                } else {
                    Field::Shown(Sanitized(v))
                };
                (k, field)
            })),
            other => other.serialize(s),
        }
    }
}

/// A field's value in the log.
enum Field<'a> {
    Shown(Sanitized<'a>),
    /// Under a secret's key: never shown.
    Redacted,
}

impl serde::Serialize for Field<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Shown(v) => v.serialize(s),
            Field::Redacted => s.serialize_str(REDACTED),
        }
    }
}

impl std::fmt::Display for Sanitized<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

/// Whether a field named `key` holds a secret.
fn is_secret_key(key: &str) -> bool {
    SECRET_KEYS.iter().any(|secret| {
        key.as_bytes()
            .windows(secret.len())
            .any(|w| w.eq_ignore_ascii_case(secret.as_bytes()))
    })
}

/// Arguments as logged: long text cut, secret-looking values redacted.
pub fn sanitize_arguments(v: &Value) -> Value {
    serde_json::to_value(Sanitized(v)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::*;

    /// What tracing-subscriber itself writes for `call`'s event in `format`, as `cli`
    /// configures it.
    fn subscriber_line(format: Format, call: &Call<'_>) -> String {
        let sink = Arc::new(Mutex::new(Vec::<u8>::new()));
        let writer = {
            let sink = sink.clone();
            move || Writer(sink.clone())
        };
        let builder = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"));
        let emit = || event(call);
        match format {
            Format::Text => tracing::subscriber::with_default(builder.finish(), emit),
            Format::Json => tracing::subscriber::with_default(builder.json().finish(), emit),
        }
        String::from_utf8(sink.lock().unwrap().clone()).unwrap()
    }

    /// A writer into a shared buffer.
    struct Writer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Writer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Our line for `call` at `time`.
    fn our_line(format: Format, time: (u64, u32), call: &Call<'_>) -> String {
        let mut out = Vec::new();
        write_line(&mut out, format, time, call);
        String::from_utf8(out).unwrap()
    }

    /// The line without its timestamp, which differs between the two clocks.
    fn untimed(format: Format, line: &str) -> String {
        let stamp = "2026-11-24T10:06:54.552191Z".len();
        match format {
            Format::Text => line[stamp..].to_string(),
            Format::Json => {
                let mut v: Value = serde_json::from_str(line).unwrap();
                v["timestamp"] = Value::Null;
                // Byte order matters too: compare the text with the stamp cut out.
                let at = line.find("\",\"level\"").unwrap();
                format!("{v}|{}", &line[at..])
            }
        }
    }

    #[test]
    fn a_call_line_is_what_the_subscriber_writes() {
        let arguments = [
            Some(json!({"id": "L-00017"})),
            Some(json!({"query": "a \"quoted\" line\nand a tab\t, é, \u{1F600}", "limit": 5})),
            Some(json!({"tags": ["x", "y"], "nested": {"n": null, "f": 1.5, "b": true}})),
            Some(json!({"Api_Token": "abc", "note": "sk-live-1", "long": "é".repeat(300)})),
            Some(Value::Null),
            Some(json!({})),
            None,
        ];
        let tools = ["get_learning", "weird tool\"\\\u{7}"];
        let subs = [None, Some("alice"), Some("user \"x\"@example.com\u{7}")];
        let outcomes = ["ok", "NOT_FOUND", "INVALID_ARGUMENT"];
        let durations = [
            0.0,
            -0.0,
            0.001,
            0.012,
            1.855,
            250.5,
            1e7,
            123_456_789.0,
            1e15,
            9.999e15,
            1e16,
            1.5e17,
            1e-4,
            1.000_01e-4,
            9.999e-5,
            1e-5,
            -2.5,
        ];
        for (i, arguments) in arguments.iter().enumerate() {
            for tool in tools {
                for outcome in outcomes {
                    for duration_ms in durations {
                        let call = Call {
                            request: i as u64 * 1_000_003,
                            sub: subs[i % subs.len()],
                            tool,
                            outcome,
                            duration_ms,
                            result_bytes: i * 4099,
                            arguments: arguments.as_ref(),
                        };
                        for format in [Format::Text, Format::Json] {
                            let theirs = subscriber_line(format, &call);
                            let ours = our_line(format, (1_795_514_814, 552_191), &call);
                            assert_eq!(
                                untimed(format, &ours),
                                untimed(format, &theirs),
                                "{format:?} {call:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_time_is_written_as_rfc_3339_in_utc() {
        let cases = [
            ((0, 0), "1970-01-01T00:00:00.000000Z"),
            ((951_782_400, 1), "2000-02-29T00:00:00.000001Z"),
            ((951_868_799, 999_999), "2000-02-29T23:59:59.999999Z"),
            ((1_709_164_800, 42), "2024-02-29T00:00:00.000042Z"),
            ((1_735_689_599, 500_000), "2024-12-31T23:59:59.500000Z"),
            ((1_795_514_814, 552_191), "2026-11-24T10:06:54.552191Z"),
            ((4_107_542_400, 0), "2100-03-01T00:00:00.000000Z"),
            ((253_402_300_799, 0), "9999-12-31T23:59:59.000000Z"),
        ];
        for (time, expected) in cases {
            let mut out = Vec::new();
            write_time(&mut out, time);
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{time:?}");
        }
    }

    #[test]
    fn the_clock_is_written_as_the_subscriber_writes_it() {
        use tracing_subscriber::fmt::format::Writer;
        use tracing_subscriber::fmt::time::FormatTime as _;
        // The subscriber's clock is read between two readings of ours, so its minute is one
        // of theirs.
        let ours = |time| {
            let mut out = Vec::new();
            write_time(&mut out, time);
            String::from_utf8(out).unwrap()
        };
        let before = ours(now());
        let mut theirs = String::new();
        tracing_subscriber::fmt::time::SystemTime
            .format_time(&mut Writer::new(&mut theirs))
            .unwrap();
        let after = ours(now());
        let minute = "2026-11-24T10:06".len();
        assert_eq!(theirs.len(), before.len(), "{theirs} against {before}");
        assert!(
            [&before[..minute], &after[..minute]].contains(&&theirs[..minute]),
            "{theirs} not between {before} and {after}"
        );
    }

    #[test]
    fn secrets_and_long_text_are_kept_out_of_the_log() {
        let long = "a".repeat(250);
        let cut = format!("{}…(250 chars)", "a".repeat(200));
        let wide = "é".repeat(201);
        let wide_cut = format!("{}…(201 chars)", "é".repeat(200));
        let cases = [
            (
                json!({"id": "L-1", "n": 3, "ok": true}),
                json!({"id": "L-1", "n": 3, "ok": true}),
            ),
            (
                json!({"password": "hunter2"}),
                json!({"password": "[redacted]"}),
            ),
            (
                json!({"DB_PassWord_2": 7}),
                json!({"DB_PassWord_2": "[redacted]"}),
            ),
            (
                json!({"x-apikey": {"a": 1}}),
                json!({"x-apikey": "[redacted]"}),
            ),
            (json!({"note": "sk-live-9"}), json!({"note": "[redacted]"})),
            (json!({"h": "Bearer abc"}), json!({"h": "[redacted]"})),
            (json!({"h": "bearer abc"}), json!({"h": "bearer abc"})),
            (
                json!(["ghp_x", "plain", ["AKIA1"]]),
                json!(["[redacted]", "plain", ["[redacted]"]]),
            ),
            (json!({"body": long}), json!({"body": cut})),
            (
                json!({"body": "a".repeat(200)}),
                json!({"body": "a".repeat(200)}),
            ),
            (json!({"body": wide}), json!({"body": wide_cut})),
            (
                json!({"deep": {"token_id": 1, "v": [{"secret": 2}]}}),
                json!({"deep": {"token_id": "[redacted]", "v": [{"secret": "[redacted]"}]}}),
            ),
            (Value::Null, Value::Null),
            (json!("sk-top"), json!("[redacted]")),
        ];
        for (given, logged) in cases {
            assert_eq!(sanitize_arguments(&given), logged, "{given}");
            assert_eq!(Sanitized(&given).to_string(), logged.to_string(), "{given}");
        }
    }
}

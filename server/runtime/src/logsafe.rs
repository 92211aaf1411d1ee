//! What a caller sent, made safe to log: one line per event, whatever the text holds.
//!
//! A caller's value (a token's `sub` or claims, a tool or method name, an argument, a client's
//! name) reaches the log as [`quoted`]: in double quotes, with every control character, quote
//! and backslash escaped as Rust's `{:?}` writes them, so that it can neither end its line nor
//! pass for another field. The call log's fast path writes the same bytes ([`write_quoted`]).
//! And as a second guard for whatever text a line carries (a message that quotes a library's
//! error, a field written with `%`, JSON that serde_json left DEL and C1 characters raw in),
//! the subscriber `cli` installs writes through [`Stderr`], which escapes every control
//! character inside a line (the C0 set, DEL, the C1 set and the Unicode line and paragraph
//! separators) as JSON escapes them, leaving only the newline that ends it; the call log's
//! own writer escapes its arguments the same way ([`escape_tail`]).

use std::fmt;
use std::io::Write;

/// `s` as the log shows a value a caller sent: quoted and escaped (see the module comment).
pub fn quoted(s: &str) -> Quoted<'_> {
    Quoted(s)
}

/// A caller's text as the log shows it; see [`quoted`].
#[derive(Clone, Copy)]
pub struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl fmt::Debug for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

/// Appends `s` as [`quoted`] writes it; text that needs no escaping skips `fmt`.
pub(crate) fn write_quoted(out: &mut Vec<u8>, s: &str) {
    if s.bytes()
        .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
    {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = write!(out, "{}", quoted(s));
    }
}

/// Whether `c` would break a log line or steer a terminal: a control character (C0, DEL, C1)
/// or a Unicode line or paragraph separator.
fn breaks_lines(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Whether `bytes` may hold a character that [`breaks_lines`] (a byte below 0x20, DEL, or the
/// first byte of a C1 character, 0xC2, or of a separator, 0xE2) or are not UTF-8: a quick
/// test before the slow one.
fn may_break(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .any(|&b| b < 0x20 || b == 0x7f || b == 0xc2 || b == 0xe2)
        || (!bytes.is_ascii() && std::str::from_utf8(bytes).is_err())
}

/// Appends `text` to `out` with every character that [`breaks_lines`] escaped as JSON escapes
/// it (`\n`, `\r`, `\t`, `\u0085`), which reads the same in a text line and keeps a JSON
/// line valid JSON; bytes that are not UTF-8 are written as `\x..`.
fn escape_into(text: &[u8], out: &mut Vec<u8>) {
    if !may_break(text) {
        out.extend_from_slice(text);
        return;
    }
    for chunk in text.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\t' => out.extend_from_slice(b"\\t"),
                c if breaks_lines(c) => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => {
                    let mut b = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

/// Appends `line` to `out` escaped as [`escape_into`] does, except a newline that ends it.
pub(crate) fn escape_line(line: &[u8], out: &mut Vec<u8>) {
    match line.strip_suffix(b"\n") {
        Some(body) => {
            escape_into(body, out);
            out.push(b'\n');
        }
        None => escape_into(line, out),
    }
}

/// Escapes, in place, what [`breaks_lines`] in `out[from..]`: for text written by an encoder
/// that leaves some of those characters raw (serde_json escapes C0 only).
pub(crate) fn escape_tail(out: &mut Vec<u8>, from: usize) {
    if !may_break(&out[from..]) {
        return;
    }
    let tail = out.split_off(from);
    escape_into(&tail, out);
}

/// Standard error for the log subscriber: each event's line written whole, escaped by
/// [`escape_line`].
#[derive(Clone, Copy, Default)]
pub struct Stderr;

/// One event's writer: the subscriber writes a formatted line in one call.
pub struct StderrLine(Vec<u8>);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = StderrLine;

    fn make_writer(&'a self) -> StderrLine {
        StderrLine(Vec::new())
    }
}

impl Write for StderrLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.clear();
        escape_line(buf, &mut self.0);
        // As tracing-subscriber's own writer: a log that cannot be written is nobody's failure.
        let _ = std::io::stderr().lock().write_all(&self.0);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = Vec::new();
        escape_line(s.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    /// Every control character, and the separators, inside a line.
    fn every_control() -> String {
        (0u32..0x20)
            .chain([0x7f])
            .chain(0x80..0xa0)
            .chain([0x2028, 0x2029])
            .filter_map(char::from_u32)
            .collect()
    }

    #[test]
    fn no_control_character_survives_inside_a_line() {
        let line = format!("call sub=x{}y tool=\"t\"\n", every_control());
        let out = escaped(&line);
        assert!(out.ends_with('\n'));
        let body = &out[..out.len() - 1];
        assert!(!body.chars().any(breaks_lines), "{body:?}");
        assert!(body.contains("\\n") && body.contains("\\r") && body.contains("\\u0000"));
        assert!(body.contains("\\u001b") && body.contains("\\u0085") && body.contains("\\u2028"));
        assert_eq!(escaped("plain é 😀\n"), "plain é 😀\n");
        assert_eq!(escaped("no newline"), "no newline");
    }

    #[test]
    fn a_json_line_stays_json() {
        let value = serde_json::json!({"x": every_control()});
        let mut out = serde_json::to_vec(&value).unwrap();
        escape_tail(&mut out, 0);
        assert!(!String::from_utf8_lossy(&out).chars().any(breaks_lines));
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&out).unwrap(),
            value
        );
    }

    #[test]
    fn bytes_that_are_not_text_are_escaped() {
        let mut out = Vec::new();
        escape_line(b"a\xffb\n", &mut out);
        assert_eq!(out, b"a\\xffb\n");
    }

    #[test]
    fn a_quoted_value_is_one_field_whatever_it_holds() {
        let forged = format!(
            "alice\n2026-11-29T00:00:00Z  INFO mcpspec::audit: call sub=root\"{}",
            every_control()
        );
        let shown = quoted(&forged).to_string();
        assert!(shown.starts_with('"') && shown.ends_with('"'));
        let inner = &shown[1..shown.len() - 1];
        assert!(!inner.chars().any(breaks_lines), "{shown}");
        assert!(!inner.replace("\\\"", "").contains('"'), "{shown}");
        let mut fast = Vec::new();
        write_quoted(&mut fast, &forged);
        assert_eq!(String::from_utf8(fast).unwrap(), shown);
        let mut fast = Vec::new();
        write_quoted(&mut fast, "alice");
        assert_eq!(fast, b"\"alice\"");
    }
}

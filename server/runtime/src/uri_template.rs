//! RFC 6570 level 1 URI templates matched against URIs ([`match_template`]): what a templated
//! resource's `resources/read` and its scopes are found by. A leaf, shared by `content` and
//! `auth`.

use serde_json::{Map, Value};

use crate::def::Arguments;

/// Matches a URI against an RFC 6570 level 1 template, returning each variable's value,
/// percent-decoded. A value is non-empty and has no `/`, as level 1 expansion encodes it.
pub fn match_template(template: &str, uri: &str) -> Option<Arguments> {
    let mut out = Map::new();
    match_parts(template, uri, &mut out).then_some(out)
}

fn match_parts(template: &str, uri: &str, out: &mut Arguments) -> bool {
    let Some(open) = template.find('{') else {
        return template == uri;
    };
    let Some(rest) = uri.strip_prefix(&template[..open]) else {
        return false;
    };
    let Some(close) = template[open..].find('}') else {
        return false;
    };
    let name = &template[open + 1..open + close];
    let after = &template[open + close + 1..];
    for end in (1..=rest.len()).filter(|i| rest.is_char_boundary(*i)) {
        let raw = &rest[..end];
        if raw.contains('/') {
            break;
        }
        if match_parts(after, &rest[end..], out) {
            let Some(value) = percent_decode(raw) else {
                return false;
            };
            out.insert(name.to_string(), Value::String(value));
            return true;
        }
    }
    false
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

//! Rows as JSON: each column converted to its declared JSON type, as `serde_json` values for
//! the engine, or written straight to compact JSON text for the lanes, which send a lone row
//! as it is (see [`row_text`]). Both give the same JSON, and the same approximate size, which
//! the result limit and the call log use.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::backend::{Row, ValueRef};
use crate::def::{ColumnDef, ColumnKind, StatementDef};

/// Where a statement's declared columns are in its result.
pub(crate) struct Order {
    st: &'static StatementDef,
    /// Each declared column with its index in the result; missing columns are left out.
    pub columns: Vec<(usize, &'static ColumnDef)>,
}

/// `st`'s [`Order`] in `row`'s statement: the backend's memo of it when it keeps one for this
/// statement (see [`Row::memo`]), else worked out from the column names.
pub(crate) fn row_order(row: &dyn Row, st: &'static StatementDef) -> Arc<Order> {
    let make = || {
        Arc::new(Order {
            st,
            columns: column_order(&row.names(), st),
        })
    };
    match row.memo(&|| make()).downcast::<Order>() {
        Ok(order) if std::ptr::eq(order.st, st) => order,
        // Two statements with the same text and different declared columns: the memo is the
        // other one's.
        _ => make(),
    }
}

/// Pairs each declared column with its index in the statement's result.
pub(crate) fn column_order(
    names: &[&str],
    st: &'static StatementDef,
) -> Vec<(usize, &'static ColumnDef)> {
    // Room for every declared column at once: a filtered iterator would start small and grow.
    let mut order = Vec::with_capacity(st.columns.len());
    order.extend(
        st.columns
            .iter()
            .filter_map(|c| names.iter().position(|n| *n == c.name).map(|i| (i, c))),
    );
    order
}

/// A row of `order`'s columns as a JSON object; columns that are null are left out.
pub(crate) fn row_json(row: &dyn Row, order: &[(usize, &ColumnDef)]) -> Map<String, Value> {
    let mut o = Map::new();
    for (idx, col) in order {
        let v = column_json(row.value(*idx), col);
        if !v.is_null() {
            o.insert(col.name.to_string(), v);
        }
    }
    o
}

/// Converts one SQLite value to the column's declared JSON type. NULL becomes JSON null,
/// which callers omit from rows.
pub(crate) fn column_json(v: ValueRef<'_>, col: &ColumnDef) -> Value {
    match (col.kind, v) {
        (_, ValueRef::Null) => Value::Null,
        (ColumnKind::Json, ValueRef::Text(t)) => serde_json::from_slice(t).unwrap_or_else(|_| {
            tracing::warn!(
                column = col.name,
                "column holds text that is not JSON; returned as a string"
            );
            Value::String(text(t))
        }),
        (ColumnKind::Boolean, ValueRef::Integer(i)) => Value::Bool(i != 0),
        (ColumnKind::Integer, ValueRef::Real(f)) if f.fract() == 0.0 => json!(f as i64),
        (ColumnKind::Integer, ValueRef::Text(t)) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map_or(Value::Null, |i| json!(i)),
        (ColumnKind::Real, ValueRef::Text(t)) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .map_or(Value::Null, |f| json!(f)),
        (ColumnKind::Text, ValueRef::Integer(i)) => Value::String(i.to_string()),
        (ColumnKind::Text, ValueRef::Real(f)) => Value::String(f.to_string()),
        (_, ValueRef::Integer(i)) => json!(i),
        (_, ValueRef::Real(f)) => json!(f),
        (_, ValueRef::Text(t)) => Value::String(text(t)),
        (_, ValueRef::Blob(_)) => Value::Null,
    }
}

/// A text value as a string. SQLite does not check that text is UTF-8; invalid bytes become
/// U+FFFD. Valid text, nearly all of it, is copied without the lossy decoder's per-chunk work.
fn text(t: &[u8]) -> String {
    match std::str::from_utf8(t) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(t).into_owned(),
    }
}

/// [`row_json`]'s object written as compact JSON text, byte for byte what serialising it
/// gives, with its [`approx_map_size`]. Text and integer columns, nearly all of them, are
/// written without a `Value` in between; the rest go through [`column_json`].
pub(crate) fn row_text(row: &dyn Row, order: &[(usize, &ColumnDef)]) -> (String, usize) {
    // An object's keys come out in order. A spec's columns have distinct names (they are the
    // keys of a map), and the IR lists them in order already, so this copy is only a fallback.
    let resorted;
    let order = if order.is_sorted_by_key(|(_, c)| c.name) {
        order
    } else {
        let mut copy = order.to_vec();
        copy.sort_by_key(|(_, c)| c.name);
        resorted = copy;
        &resorted
    };
    // Most rows fit; a bigger one grows once or twice.
    let mut out = String::with_capacity(1024);
    let mut size = 2;
    out.push('{');
    for (idx, col) in order {
        let start = out.len();
        if start > 1 {
            out.push(',');
        }
        write_str(&mut out, col.name);
        out.push(':');
        match write_column(&mut out, row.value(*idx), col) {
            Some(n) => size += col.name.len() + 4 + n,
            // A null column is left out, as the object leaves it out.
            None => out.truncate(start),
        }
    }
    out.push('}');
    (out, size)
}

/// Writes one column's value as [`column_json`] converts it and returns its
/// [`approx_json_size`]; `None`, writing nothing of its own, for a value that converts to
/// null.
fn write_column(out: &mut String, v: ValueRef<'_>, col: &ColumnDef) -> Option<usize> {
    use std::fmt::Write as _;
    match (col.kind, v) {
        (_, ValueRef::Null | ValueRef::Blob(_)) => None,
        // Text as a string, for text and boolean columns.
        (ColumnKind::Text | ColumnKind::Boolean, ValueRef::Text(t)) => {
            let s = match std::str::from_utf8(t) {
                Ok(s) => std::borrow::Cow::Borrowed(s),
                Err(_) => String::from_utf8_lossy(t),
            };
            write_str(out, &s);
            Some(s.len() + 2)
        }
        // An integer as a number, for integer, real and JSON columns.
        (ColumnKind::Integer | ColumnKind::Real | ColumnKind::Json, ValueRef::Integer(i)) => {
            // Writing to a String cannot fail.
            let _ = write!(out, "{i}");
            Some(20)
        }
        // A list of plain strings, the usual JSON column (tags), is already what serialising
        // its value would write.
        (ColumnKind::Json, ValueRef::Text(t)) => match plain_string_list(t) {
            Some((text, size)) => {
                out.push_str(text);
                Some(size)
            }
            None => write_converted(out, v, col),
        },
        // The rest (numbers in text, reals, integers as booleans or text) as the engine
        // converts them.
        _ => write_converted(out, v, col),
    }
}

/// Writes a value as [`column_json`] converts it, through a `Value`.
fn write_converted(out: &mut String, v: ValueRef<'_>, col: &ColumnDef) -> Option<usize> {
    let v = column_json(v, col);
    if v.is_null() {
        return None;
    }
    // A value always serialises.
    out.push_str(&serde_json::to_string(&v).unwrap_or_default());
    Some(approx_json_size(&v))
}

/// `text` with its [`approx_json_size`] when it is a JSON array of strings written compactly,
/// as `serde_json` writes one: no space, no escape, no control character, valid UTF-8.
/// `None` for anything else, which must be parsed and written again.
fn plain_string_list(text: &[u8]) -> Option<(&str, usize)> {
    let text = std::str::from_utf8(text).ok()?;
    let inner = text.strip_prefix('[')?.strip_suffix(']')?.as_bytes();
    if inner.is_empty() {
        return Some((text, 2));
    }
    let mut size = 2;
    // Each item is `"..."`, and items are separated by single commas.
    for item in inner.split(|&b| b == b',') {
        let content = item.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        if content.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
            return None;
        }
        size += content.len() + 3;
    }
    Some((text, size))
}

/// Writes `s` as a JSON string, escaped as `serde_json` escapes it: `"` and `\`, and control
/// characters, as `\n` and the like or `\u00XX`. Eight bytes at a time are looked at
/// together, and runs that need no escape are copied whole.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let (words, tail) = s.as_bytes().as_chunks::<8>();
    // Nearly every string needs no escape: look for one in a tight loop first.
    let plain = !words.iter().any(|w| needs_escape(u64::from_le_bytes(*w)))
        && !tail.iter().any(|&b| escape(b).is_some());
    if plain {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut copied = 0;
    // Escapes the byte at `at` when it needs one, after the run before it.
    let mut escape_at = |out: &mut String, at: usize, b: u8| {
        if let Some(escaped) = escape(b) {
            // `at` is an ASCII byte, so both slices end on character boundaries.
            out.push_str(&s[copied..at]);
            out.push_str(escaped);
            copied = at + 1;
        }
    };
    for (n, word) in words.iter().enumerate() {
        if needs_escape(u64::from_le_bytes(*word)) {
            for (i, &b) in word.iter().enumerate() {
                escape_at(out, n * 8 + i, b);
            }
        }
    }
    for (i, &b) in tail.iter().enumerate() {
        escape_at(out, words.len() * 8 + i, b);
    }
    out.push_str(&s[copied..]);
    out.push('"');
}

/// Whether any of the eight bytes in `word` is below 0x20, `"` or `\`. Each test is exact
/// about whether some byte matches (the classic "has a byte less than" trick).
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w;
    let control = below(word, 0x20);
    let quote = below(word ^ (ONES * u64::from(b'"')), 1);
    let backslash = below(word ^ (ONES * u64::from(b'\\')), 1);
    (control | quote | backslash) & HIGHS != 0
}

/// A byte's escape in a JSON string, as `serde_json` writes it; `None` for a byte that stands
/// as it is.
fn escape(b: u8) -> Option<&'static str> {
    const CONTROLS: [&str; 32] = [
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011",
        "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019",
        "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
    ];
    match b {
        b'"' => Some("\\\""),
        b'\\' => Some("\\\\"),
        0x00..0x20 => Some(CONTROLS[usize::from(b)]),
        _ => None,
    }
}

/// The size of a value as compact JSON text, without serializing it.
pub fn approx_json_size(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 20,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(|x| approx_json_size(x) + 1).sum::<usize>(),
        Value::Object(o) => approx_map_size(o),
    }
}

/// The size of an object as compact JSON text, without serializing it.
pub fn approx_map_size(o: &Map<String, Value>) -> usize {
    2 + o
        .iter()
        .map(|(k, x)| k.len() + 4 + approx_json_size(x))
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of owned cells.
    #[derive(Clone, Copy)]
    enum Cell {
        Null,
        Int(i64),
        Real(f64),
        Text(&'static [u8]),
        Blob(&'static [u8]),
    }

    struct Cells(Vec<Cell>);

    impl Row for Cells {
        fn value(&self, i: usize) -> ValueRef<'_> {
            match self.0[i] {
                Cell::Null => ValueRef::Null,
                Cell::Int(n) => ValueRef::Integer(n),
                Cell::Real(f) => ValueRef::Real(f),
                Cell::Text(t) => ValueRef::Text(t),
                Cell::Blob(b) => ValueRef::Blob(b),
            }
        }

        fn names(&self) -> Vec<&str> {
            Vec::new()
        }
    }

    fn cells() -> Vec<Cell> {
        use Cell::*;
        vec![
            Null,
            Int(0),
            Int(1),
            Int(-7),
            Int(i64::MAX),
            Int(i64::MIN),
            Real(0.0),
            Real(-0.0),
            Real(3.0),
            Real(2.5),
            Real(1e300),
            Real(-1.5e-300),
            Real(f64::NAN),
            Real(f64::INFINITY),
            Real(9.3e18),
            Text(b""),
            Text(b"plain"),
            Text(b"say \"hi\"\\ \n\t\x01\x7f"),
            Text("é ☃ 😀 \u{2028}".as_bytes()),
            Text(b"bad \xff\xfe utf-8"),
            Text(b" 42 "),
            Text(b"4.5e3"),
            Text(b"nope"),
            Text(br#"{"z":1,"a":[true,null,"x"],"m":{"b":2,"a":1}}"#),
            Text(b"null"),
            Text(b"[1, 2 ,3]"),
            Text(b"{broken"),
            Blob(b"\x00\x01"),
        ]
    }

    #[test]
    fn a_string_is_escaped_as_serde_json_escapes_it() {
        // Every ASCII byte, and characters of two to four bytes, at every offset in and
        // around a word, in strings shorter and longer than one.
        let mut specials: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
        specials.extend(["é", "\u{2028}", "😀", "\u{7f}", "\"\\", "\n\u{1}é"].map(String::from));
        for special in &specials {
            for before in 0..18 {
                for after in [0, 1, 7, 8, 9] {
                    let s = format!("{}{special}{}", "a".repeat(before), "ü".repeat(after));
                    let mut out = String::from("x");
                    write_str(&mut out, &s);
                    assert_eq!(out[1..], serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
        let mut empty = String::new();
        write_str(&mut empty, "");
        assert_eq!(empty, "\"\"");
    }

    #[test]
    fn a_list_of_plain_strings_is_written_as_stored() {
        let json = ColumnDef {
            name: "tags",
            kind: ColumnKind::Json,
            nullable: true,
        };
        // (stored text, whether it is written as stored)
        let cases: [(&[u8], bool); 26] = [
            (b"[]", true),
            (b"[\"\"]", true),
            (b"[\"a\"]", true),
            (b"[\"terraform\",\"performance\",\"concurrency\"]", true),
            ("[\"é\",\"😀\",\"\u{2028}\"]".as_bytes(), true),
            (b"[\"a/b\",\"x y\",\"\x7f\"]", true),
            (b"[ ]", false),
            (b"[\"a\", \"b\"]", false),
            (b" [\"a\"]", false),
            (b"[\"a,b\"]", false),
            (b"[\",\",\",\"]", false),
            (b"[\"a\\\"b\"]", false),
            (b"[\"\\u0041\"]", false),
            (b"[\"\\n\"]", false),
            (b"[\"\x01\"]", false),
            (b"[\"a\"\"b\"]", false),
            (b"[\"a\",]", false),
            (b"[,]", false),
            (b"[\"]", false),
            (b"[1,2]", false),
            (b"[[\"a\"]]", false),
            (b"{\"b\":1,\"a\":2}", false),
            (b"\"s\"", false),
            (b"[\"\xff\"]", false),
            (b"null", false),
            (b"", false),
        ];
        for (stored, as_stored) in cases {
            let label = String::from_utf8_lossy(stored);
            assert_eq!(plain_string_list(stored).is_some(), as_stored, "{label}");
            let mut fast = String::new();
            let fast_size = write_column(&mut fast, ValueRef::Text(stored), &json);
            let mut slow = String::new();
            let slow_size = write_converted(&mut slow, ValueRef::Text(stored), &json);
            assert_eq!((fast, fast_size), (slow, slow_size), "{label}");
        }
    }

    #[test]
    fn a_row_written_as_text_is_its_object_serialised() {
        const KINDS: [ColumnKind; 5] = [
            ColumnKind::Text,
            ColumnKind::Integer,
            ColumnKind::Real,
            ColumnKind::Boolean,
            ColumnKind::Json,
        ];
        // Every kind against every cell, one column at a time and all in one row, whose
        // columns come in an order that is not their names' order.
        const NAMES: [&str; 5] = ["e_text", "d_int", "c_real", "b_bool", "a_json"];
        let cols: Vec<ColumnDef> = KINDS
            .iter()
            .zip(NAMES)
            .map(|(&kind, name)| ColumnDef {
                name,
                kind,
                nullable: true,
            })
            .collect();
        let all = cells();
        let check = |row: &Cells, order: &[(usize, &ColumnDef)]| {
            let (text, size) = row_text(row, order);
            let map = row_json(row, order);
            let label = format!("{order:?} in {text}");
            assert_eq!(text, serde_json::to_string(&map).unwrap(), "{label}");
            assert_eq!(size, approx_map_size(&map), "{label}");
        };
        for i in 0..all.len() {
            for col in &cols {
                let row = Cells(vec![all[i]]);
                check(&row, &[(0, col)]);
            }
            // One row of five columns: cells i.. (wrapping), a kind each.
            let row = Cells(
                all.iter()
                    .cycle()
                    .skip(i)
                    .take(cols.len())
                    .copied()
                    .collect(),
            );
            let order: Vec<(usize, &ColumnDef)> = cols.iter().enumerate().collect();
            check(&row, &order);
        }
        check(&Cells(Vec::new()), &[]);
    }
}

//! OTLP's protobuf for a batch of span records (`ExportTraceServiceRequest`), written straight
//! from the records: no message structs built per span, no text copied per attribute. The
//! resource and the instrumentation scope are encoded once, by prost from
//! `opentelemetry-proto`'s messages ([`Prefix`]); each span's fields follow the field numbers
//! of `opentelemetry/proto/trace/v1/trace.proto`. The test decodes what this writes with
//! `opentelemetry-proto`'s own messages.

use prost::Message as _;

use super::record::{Record, What};

/// Protobuf wire types.
const VARINT: u32 = 0;
const I64: u32 = 1;
const LEN: u32 = 2;
const I32: u32 = 5;

/// OTLP's span flags: the W3C flags (sampled), and whether the parent is remote.
const SAMPLED: u32 = 0x01;
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

/// What every batch starts with: the resource and the scope, encoded once.
pub(super) struct Prefix {
    resource: Vec<u8>,
    scope: Vec<u8>,
}

/// The resource and the instrumentation scope as OTLP's messages, which every export (spans
/// and metrics) carries.
pub(super) fn resource_and_scope(
    resource: &opentelemetry_sdk::Resource,
) -> (
    opentelemetry_proto::tonic::resource::v1::Resource,
    opentelemetry_proto::tonic::common::v1::InstrumentationScope,
) {
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    let resource = opentelemetry_proto::tonic::resource::v1::Resource {
        attributes: ResourceAttributesWithSchema::from(resource).attributes.0,
        ..Default::default()
    };
    let scope = opentelemetry_proto::tonic::common::v1::InstrumentationScope {
        name: "mcpspec".into(),
        ..Default::default()
    };
    (resource, scope)
}

impl Prefix {
    pub(super) fn new(resource: &opentelemetry_sdk::Resource) -> Prefix {
        let (resource, scope) = resource_and_scope(resource);
        Prefix {
            resource: resource.encode_to_vec(),
            scope: scope.encode_to_vec(),
        }
    }
}

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

/// A length-delimited field's size with its (one-byte) key.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

fn header(buf: &mut Vec<u8>, field: u32, len: usize) {
    key(buf, field, LEN);
    varint(buf, len as u64);
}

fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    header(buf, field, b.len());
    buf.extend_from_slice(b);
}

/// The room a length-delimited span's size is given before the span is written: two bytes,
/// which hold any size from 128 to 16,383 (a span is a few hundred bytes).
const ROOM: usize = 2;

/// Writes the request exporting `records`, with `prefix`'s resource and scope, into `out`
/// (emptied first, kept between batches so that a batch writes into memory already mapped),
/// and returns it. Each span is written in place, after room for its size, and the resource
/// and scope go in the room left before the spans: no byte of a span is copied after it is
/// written.
pub(super) fn encode<'a>(prefix: &Prefix, records: &[&Record], out: &'a mut Vec<u8>) -> &'a [u8] {
    // The most the head can take: two keys, two sizes of at most ten bytes, and the resource
    // and the scope as fields.
    let room = 2 * (1 + 10) + field_len(prefix.resource.len()) + field_len(prefix.scope.len());
    out.clear();
    out.resize(room, 0);
    for r in records {
        nested(out, 2, |buf| span(buf, r));
    }
    let spans = out.len() - room;
    let scope_spans = field_len(prefix.scope.len()) + spans;
    let resource_spans = field_len(prefix.resource.len()) + field_len(scope_spans);
    let mut head = Vec::with_capacity(room);
    header(&mut head, 1, resource_spans);
    bytes(&mut head, 1, &prefix.resource);
    header(&mut head, 2, scope_spans);
    bytes(&mut head, 1, &prefix.scope);
    let start = room - head.len();
    out[start..room].copy_from_slice(&head);
    &out[start..]
}

/// A length-delimited field `field` whose contents `write` appends to `buf`: written after
/// [`ROOM`] bytes for its size, which are then filled in; only a size that needs another
/// number of bytes moves the contents.
fn nested(buf: &mut Vec<u8>, field: u32, write: impl FnOnce(&mut Vec<u8>)) {
    key(buf, field, LEN);
    let at = buf.len();
    buf.resize(at + ROOM, 0);
    write(buf);
    let len = buf.len() - at - ROOM;
    if varint_len(len as u64) == ROOM {
        buf[at] = len as u8 | 0x80;
        buf[at + 1] = (len >> 7) as u8;
    } else {
        let mut size = Vec::with_capacity(10);
        varint(&mut size, len as u64);
        buf.splice(at..at + ROOM, size);
    }
}

/// One `Span` message's fields.
fn span(buf: &mut Vec<u8>, r: &Record) {
    bytes(buf, 1, &r.trace());
    bytes(buf, 2, &r.span());
    if let Some(state) = r.state() {
        bytes(buf, 3, state.as_bytes());
    }
    let parent = r.parent();
    if let Some((id, _)) = parent {
        bytes(buf, 4, &id);
    }
    let (first, second) = r.what().name();
    header(buf, 5, first.len() + second.map_or(0, |s| 1 + s.len()));
    buf.extend_from_slice(first.as_bytes());
    if let Some(s) = second {
        buf.push(b' ');
        buf.extend_from_slice(s.as_bytes());
    }
    key(buf, 6, VARINT);
    varint(buf, kind(r.what()) as u64);
    let (start, end) = r.times();
    key(buf, 7, I64);
    buf.extend_from_slice(&start.to_le_bytes());
    key(buf, 8, I64);
    buf.extend_from_slice(&end.to_le_bytes());
    r.what().attributes(r.error(), |k, v| attribute(buf, k, v));
    status(buf, r.error());
    let remote = parent.is_some_and(|(_, remote)| remote);
    key(buf, 16, I32);
    let flags = SAMPLED | HAS_IS_REMOTE | if remote { IS_REMOTE } else { 0 };
    buf.extend_from_slice(&flags.to_le_bytes());
}

/// `SpanKind`: a request is the server's, a statement the database's client.
fn kind(what: &What) -> i32 {
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
    match what {
        What::Request { .. } => SpanKind::Server as i32,
        What::Statement { .. } | What::Embedding { .. } => SpanKind::Client as i32,
    }
}

/// A span's attribute (field 9): a `KeyValue` whose `AnyValue` is a string.
fn attribute(buf: &mut Vec<u8>, k: &str, v: &[u8]) {
    let any = field_len(v.len());
    header(buf, 9, field_len(k.len()) + field_len(any));
    bytes(buf, 1, k.as_bytes());
    header(buf, 2, any);
    bytes(buf, 1, v);
}

/// A span's `Status` (field 15): unset, or an error with its message.
fn status(buf: &mut Vec<u8>, error: Option<&str>) {
    use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
    match error {
        None => header(buf, 15, 0),
        Some(e) => {
            let code = StatusCode::Error as u64;
            header(buf, 15, field_len(e.len()) + 1 + varint_len(code));
            bytes(buf, 2, e.as_bytes());
            key(buf, 3, VARINT);
            varint(buf, code);
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;

    use super::super::record::{Record, What};

    fn decoded(records: &[Record]) -> ExportTraceServiceRequest {
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_service_name("knowledge")
            .build();
        let records: Vec<&Record> = records.iter().collect();
        // A body with something in it already, as a second batch finds it.
        let mut body = b"left from the last batch".to_vec();
        let request = super::encode(&super::Prefix::new(&resource), &records, &mut body);
        ExportTraceServiceRequest::decode(request).expect("decodes as OTLP")
    }

    fn attributes(span: &opentelemetry_proto::tonic::trace::v1::Span) -> Vec<(String, String)> {
        use opentelemetry_proto::tonic::common::v1::any_value::Value;
        span.attributes
            .iter()
            .map(
                |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(Value::StringValue(s)) => (kv.key.clone(), s.clone()),
                    other => panic!("{}: not a string: {other:?}", kv.key),
                },
            )
            .collect()
    }

    #[test]
    fn a_batch_decodes_as_the_official_messages() {
        let request = Record::example(
            What::Request {
                method: "tools/call",
                target: Some("kb_get".into()),
                transport: "tcp",
                id: Some("7".into()),
                session: Some("s-1".into()),
            },
            Some("-32602"),
            true,
        );
        let statement = Record::example(
            What::Statement {
                system: "postgresql",
                operation: Some("SELECT"),
            },
            None,
            false,
        );
        let got = decoded(&[request, statement]);
        let rs = &got.resource_spans[0];
        let service = &rs.resource.as_ref().expect("a resource").attributes;
        assert!(
            service.iter().any(|kv| kv.key == "service.name"),
            "{service:?}"
        );
        let scope = &rs.scope_spans[0];
        assert_eq!(scope.scope.as_ref().expect("a scope").name, "mcpspec");
        let [req, stmt] = &scope.spans[..] else {
            panic!("two spans: {:?}", scope.spans)
        };
        assert_eq!(req.name, "tools/call kb_get");
        assert_eq!(req.kind, 2);
        assert_eq!(req.trace_id, [7; 16]);
        assert_eq!(req.span_id, [1; 8]);
        assert_eq!(req.parent_span_id, [9; 8]);
        assert_eq!(req.trace_state, "team=blue");
        assert_eq!(req.flags, 0x301);
        // The example starts at the anchor: its wall-clock reading, to the nanosecond.
        let anchor = super::super::record::ANCHOR.unix_ns;
        assert_eq!(
            (req.start_time_unix_nano, req.end_time_unix_nano),
            (anchor, anchor + 250_000)
        );
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            attributes(req),
            pairs(&[
                ("mcp.method.name", "tools/call"),
                ("network.transport", "tcp"),
                ("gen_ai.tool.name", "kb_get"),
                ("gen_ai.operation.name", "execute_tool"),
                ("jsonrpc.request.id", "7"),
                ("mcp.session.id", "s-1"),
                ("error.type", "-32602"),
                ("rpc.response.status_code", "-32602"),
            ])
        );
        let status = req.status.as_ref().expect("a status");
        assert_eq!((status.code, status.message.as_str()), (2, "-32602"));
        assert_eq!(stmt.name, "SELECT");
        assert_eq!(stmt.kind, 3);
        assert_eq!(stmt.flags, 0x101);
        assert_eq!(
            attributes(stmt),
            pairs(&[
                ("db.system.name", "postgresql"),
                ("db.operation.name", "SELECT")
            ])
        );
        assert_eq!(stmt.status.as_ref().map(|s| s.code), Some(0));
    }

    /// A span under 128 bytes and one over 16,383 have sizes of one and three bytes, not the
    /// two they are given room for: both still decode, with the spans around them.
    #[test]
    fn spans_whose_size_takes_one_byte_or_three_decode() {
        let small = || What::Statement {
            system: "sqlite",
            operation: None,
        };
        let long = "x".repeat(20_000);
        let records = [
            Record::example(small(), None, false),
            Record::example(small(), Some(&long), false),
            Record::example(small(), None, false),
        ];
        let got = decoded(&records);
        let spans = &got.resource_spans[0].scope_spans[0].spans;
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["sqlite"; 3]);
        let errors: Vec<usize> = spans
            .iter()
            .map(|s| s.status.as_ref().map_or(0, |s| s.message.len()))
            .collect();
        assert_eq!(errors, [0, 20_000, 0]);
    }
}

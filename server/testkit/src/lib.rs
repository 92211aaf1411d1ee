//! The one client kit of mcpspec's end-to-end tests and bench (never published): the runtime's
//! [`StdioClient`] for stdio, and [`HttpClient`] for Streamable HTTP. Tests and the bench drive
//! the built binaries with these, the way MCP clients do: real JSON-RPC over real pipes and
//! sockets.

mod http;

pub use http::{
    HttpClient, HttpResponse, OpenStream, announced_addr, get, get_with_token, sse_events,
};
pub use mcpspec::client::{
    ClientError, PER_REQUEST_VERSION, PROTOCOL_VERSION, RESPONSE_TIMEOUT, StdioClient,
};

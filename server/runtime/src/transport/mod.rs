//! The byte streams the MCP protocol travels over: [`stdio`] for clients that start the server
//! as a subprocess, [`http`] for Streamable HTTP.

pub mod http;
mod http_conns;
mod http_lane;
pub mod lane;
pub mod stdio;

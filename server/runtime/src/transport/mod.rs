//! The byte streams the MCP protocol travels over: [`stdio`] for clients that start the server
//! as a subprocess, [`http`] for Streamable HTTP.

pub mod http;
pub mod lane;
pub mod stdio;

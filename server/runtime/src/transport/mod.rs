//! The byte streams the MCP protocol travels over: [`stdio`] for clients that start the server
//! as a subprocess, [`http`] for Streamable HTTP.

#[cfg(feature = "http")]
mod health;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "http")]
mod http_conns;
#[cfg(feature = "http")]
mod http_lane;
pub mod lane;
pub mod stdio;

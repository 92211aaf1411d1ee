//! What a database pool reports of its connections ([`PoolUse`]): given by each backend, read
//! by `/readyz`, `/metrics` and OpenTelemetry's pool metrics. A leaf, so that telemetry reads
//! it without depending on the backend that writes statements' spans through it.

/// A pool's connections at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    /// Connections open, in use or idle.
    pub open: u32,
    /// Connections a job holds now.
    pub in_use: u32,
    /// The most the pool opens.
    pub max: u32,
}

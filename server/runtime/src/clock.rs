//! The wall clock as the runtime keeps it: milliseconds since the Unix epoch, by this
//! machine's clock. A leaf: the team tables' times and the workbench's share it.

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub(crate) fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

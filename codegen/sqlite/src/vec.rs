//! sqlite-vec on every SQLite connection of the process: `vec0` virtual tables, the
//! `vec_distance_l2`/`_cosine` functions and the vector formats (`float[N]` as little-endian
//! `f32` blobs or JSON text) that a spec's statements use to store embeddings and search them.
//! sqlite-vec is registered as an auto-extension, once, before the first connection
//! ([`crate::setup`]): SQLite then initialises it on each connection it opens, as it would a
//! loaded extension, with no shared library to find.

/// The entry point SQLite calls on each new connection.
type Init = unsafe extern "C" fn(
    *mut rusqlite::ffi::sqlite3,
    *mut *mut std::os::raw::c_char,
    *const rusqlite::ffi::sqlite3_api_routines,
) -> std::os::raw::c_int;

/// Makes every SQLite connection opened from now on have sqlite-vec. Called once, by
/// [`crate::setup`].
pub(crate) fn register() {
    let entry = sqlite_vec::sqlite3_vec_init as *const ();
    // SAFETY: `sqlite3_vec_init` is sqlite-vec's extension entry point, compiled with
    // `SQLITE_CORE` against the SQLite rusqlite bundles: the function SQLite's
    // `sqlite3_auto_extension` expects, with the signature `Init` spells out (the crate
    // declares it without parameters). The pointer is to a static function, registered
    // once (`setup`'s `Once`).
    #[allow(unsafe_code)]
    let registered = unsafe {
        let init = std::mem::transmute::<*const (), Init>(entry);
        rusqlite::ffi::sqlite3_auto_extension(Some(init))
    };
    assert_eq!(
        registered,
        rusqlite::ffi::SQLITE_OK,
        "registering sqlite-vec with SQLite failed"
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_connection_opened_after_registering_has_sqlite_vec() {
        crate::setup();
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let version: String = conn
            .query_row("SELECT vec_version()", [], |r| r.get(0))
            .unwrap();
        assert!(version.starts_with('v'), "{version}");
        conn.execute_batch(
            "CREATE VIRTUAL TABLE v USING vec0(e float[2]);
             INSERT INTO v(rowid, e) VALUES (1, '[1, 0]'), (2, '[0, 1]');",
        )
        .unwrap();
        let nearest: i64 = conn
            .query_row(
                "SELECT rowid FROM v WHERE e MATCH '[0.9, 0.1]' AND k = 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(nearest, 1);
    }
}

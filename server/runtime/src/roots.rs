//! The system's root certificates, for the HTTP clients that run on the calling thread (ureq):
//! the OTLP exporters and the OpenAI-compatible embedding provider.

/// TLS checked against the system's roots (`rustls-native-certs`: the system's store, or
/// `SSL_CERT_FILE` / `SSL_CERT_DIR`), said in the log when there are none.
pub(crate) fn system() -> ureq::tls::TlsConfig {
    let roots: Vec<_> = rustls_native_certs::load_native_certs()
        .certs
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    if roots.is_empty() {
        tracing::warn!("no root certificate was found on this system; https requests will fail");
    }
    ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
        .build()
}

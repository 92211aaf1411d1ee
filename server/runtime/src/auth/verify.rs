//! Access tokens checked: [`Verifier`] (signature against the issuer's keys, issuer, audience,
//! times), the identity a verified token names, the protected resource metadata and the
//! `WWW-Authenticate` challenge (see the module above).

use jsonwebtoken::{Algorithm, Validation, errors::ErrorKind};
use serde_json::{Map, Value, json};

use std::sync::Arc;

use super::cache::{self, Verified};
use super::introspect::{ClientCredentials, Introspector};
use super::keys::{Keys, KeysError};
use super::token::{LEEWAY, MAX_TOKEN_BYTES, TokenError, registered_types};
use super::{Identity, Kept};

/// The algorithms a token may be signed with: asymmetric ones only.
const ACCEPTED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Checks access tokens for one issuer and one audience.
pub struct Verifier {
    issuer: String,
    audience: String,
    keys: Keys,
    /// Opaque tokens' checks, when the server has credentials to ask the issuer with.
    introspector: Option<Introspector>,
    /// JWTs that verified, until they expire (bounded).
    verified: Verified,
    /// What a verified token's identity keeps of its claims.
    kept: Arc<Kept>,
}

impl Verifier {
    /// A verifier for `issuer`'s tokens addressed to `audience`, with the issuer's keys found
    /// and fetched now; a verified token's identity keeps what `kept` says of its claims.
    pub async fn new(
        issuer: &str,
        audience: &str,
        credentials: Option<ClientCredentials>,
        kept: Kept,
    ) -> Result<Verifier, KeysError> {
        let kept = Arc::new(kept);
        let (keys, metadata) = Keys::discover(issuer).await?;
        let introspector = match credentials {
            Some(credentials) => {
                let endpoint = metadata["introspection_endpoint"]
                    .as_str()
                    .ok_or_else(|| KeysError::NoIntrospection(issuer.to_string()))?;
                Some(Introspector::new(
                    endpoint.to_string(),
                    credentials,
                    keys.client(),
                    kept.clone(),
                ))
            }
            None => None,
        };
        Ok(Verifier {
            issuer: issuer.to_string(),
            audience: audience.to_string(),
            keys,
            introspector,
            verified: Verified::default(),
            kept,
        })
    }

    /// The identity `token` names, once its signature, issuer, audience and times verify (or
    /// did, for a JWT seen before and not expired; see `auth::cache`).
    pub async fn verify(&self, token: &str) -> Result<Arc<Identity>, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::TooLarge);
        }
        // An aged key set is fetched first, so that a kept token of a withdrawn key is not
        // taken from the cache.
        self.keys.refresh().await;
        let digest = cache::key(token);
        if let Some(identity) = self.verified.get(&digest, self.keys.generation()) {
            return Ok(identity);
        }
        // The algorithm is read first, as written, so that `none` and names jsonwebtoken does
        // not know are refused by name rather than as a malformed token. A token that is no
        // JWT is the issuer's to judge, when the server may ask it.
        let Some(written) = written_header(token) else {
            return match &self.introspector {
                Some(i) => i
                    .identity(token, &self.issuer, &self.audience)
                    .await
                    .map(Arc::new),
                None => Err(TokenError::Malformed),
            };
        };
        let alg = written.alg()?;
        if !ACCEPTED.iter().any(|a| format!("{a:?}") == alg) {
            return Err(TokenError::Algorithm(alg));
        }
        // No extension is understood here: a critical one must be refused (RFC 7515, section
        // 4.1.11), and an unencoded payload (`b64`, RFC 7797) is not a JWT.
        if written.0.contains_key("crit") || written.0.contains_key("b64") {
            return Err(TokenError::Critical);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Malformed)?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(TokenError::Algorithm(format!("{:?}", header.alg)));
        }
        // Read before the key: a fetch meanwhile that withdraws it leaves this token's entry
        // of an older generation, verified again next time.
        let generation = self.keys.generation();
        let key = self
            .keys
            .get(header.kid.as_deref())
            .await
            .ok_or(TokenError::UnknownKey)?;
        // A key published for one algorithm verifies that one only.
        if key.alg.is_some_and(|a| a != header.alg) {
            return Err(TokenError::Algorithm(format!("{:?}", header.alg)));
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|e| refusal(e.kind()))?;
        registered_types(&data.claims)?;
        let exp = data.claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let identity = Arc::new(self.kept.identity(data.claims)?);
        self.verified.put(digest, identity.clone(), exp, generation);
        Ok(identity)
    }

    /// The protected resource metadata (RFC 9728) of this server.
    pub fn metadata(&self, scopes: &[&str]) -> Value {
        json!({
            "resource": self.audience,
            "authorization_servers": [self.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcpspec",
        })
    }

    /// Where the metadata is served for this resource: the well-known path with the
    /// resource's own path after it (RFC 9728, section 3.1).
    pub fn metadata_url(&self) -> String {
        metadata_url(&self.audience)
    }
}

/// RFC 9728's metadata address of the resource `resource`.
pub fn metadata_url(resource: &str) -> String {
    let start = resource.find("://").map_or(0, |i| i + 3);
    let (origin, path) = match resource[start..].find('/') {
        Some(p) => resource.split_at(start + p),
        None => (resource, ""),
    };
    let path = path.trim_end_matches('/');
    format!("{origin}/.well-known/oauth-protected-resource{path}")
}

/// The `WWW-Authenticate` value of a refusal: the metadata's address, and the error (with a
/// description, and the scopes needed for `insufficient_scope`) when there is one.
pub fn challenge(metadata_url: &str, error: Option<(&str, &str)>, scope: Option<&str>) -> String {
    let mut v = format!("Bearer resource_metadata=\"{metadata_url}\"");
    if let Some((error, description)) = error {
        v.push_str(&format!(
            ", error=\"{error}\", error_description=\"{}\"",
            description.replace(['"', '\\'], "'")
        ));
    }
    if let Some(scope) = scope {
        v.push_str(&format!(", scope=\"{scope}\""));
    }
    v
}

/// A token's header as written, when it decodes as a JSON object.
struct Header(Map<String, Value>);

impl Header {
    /// The `alg` as written (at most 32 characters); a header without one is malformed.
    fn alg(&self) -> Result<String, TokenError> {
        let alg = self.0.get("alg").and_then(Value::as_str);
        alg.filter(|a| a.len() <= 32)
            .map(str::to_string)
            .ok_or(TokenError::Malformed)
    }
}

/// The header of `token`, if it is a JWT's (base64url JSON before the first dot).
fn written_header(token: &str) -> Option<Header> {
    use base64::Engine;
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .ok()?;
    serde_json::from_slice(&bytes).ok().map(Header)
}

fn refusal(kind: &ErrorKind) -> TokenError {
    match kind {
        ErrorKind::ExpiredSignature => TokenError::Expired,
        ErrorKind::ImmatureSignature => TokenError::NotYetValid,
        ErrorKind::InvalidAudience => TokenError::Audience,
        ErrorKind::InvalidIssuer => TokenError::Issuer,
        ErrorKind::InvalidSignature => TokenError::Signature,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            TokenError::Algorithm("(mismatched)".into())
        }
        ErrorKind::MissingRequiredClaim(c) => TokenError::MissingClaim(c.clone()),
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => TokenError::Malformed,
        _ => TokenError::Claims,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_algorithm_is_read_before_anything_else() {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let token = format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(r#"{"sub":"x"}"#));
        let header = written_header(&token).unwrap();
        assert_eq!(header.alg().unwrap(), "none");
        assert!(written_header("not a token").is_none());
        let long = format!("{}..", b64(&format!(r#"{{"alg":"{}"}}"#, "A".repeat(33))));
        assert_eq!(
            written_header(&long).unwrap().alg().unwrap_err(),
            TokenError::Malformed
        );
    }

    #[test]
    fn the_metadata_address_puts_the_resource_path_after_the_well_known_part() {
        assert_eq!(
            metadata_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn registered_claims_must_have_their_types() {
        let of = |v: Value| registered_types(v.as_object().unwrap());
        assert!(
            of(json!({"iss": "i", "sub": "s", "aud": ["a", "b"], "exp": 1, "nbf": 0.5})).is_ok()
        );
        for (claims, name) in [
            (json!({"iss": ["i", "j"]}), "iss"),
            (json!({"sub": 1}), "sub"),
            (json!({"aud": [1]}), "aud"),
            (json!({"exp": "1"}), "exp"),
            (json!({"nbf": null}), "nbf"),
            (json!({"iat": true}), "iat"),
        ] {
            assert_eq!(of(claims).unwrap_err(), TokenError::ClaimType(name));
        }
    }
}

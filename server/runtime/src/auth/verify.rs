//! Access tokens checked: [`Verifier`] (signature against the issuer's keys, issuer, audience,
//! times), the identity a verified token names, the protected resource metadata and the
//! `WWW-Authenticate` challenge (see the module above).

use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation, errors::ErrorKind};
use serde_json::{Map, Value, json};

use std::sync::Arc;

use super::Identity;
use super::cache::{self, Verified};
use super::introspect::{ClientCredentials, Introspector};
use super::keys::{Keys, KeysError};

/// The largest access token accepted; a longer one is refused before it is decoded.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// The clock skew allowed on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(30);

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

/// Why a token was refused. The text is sent back (`error_description`) and logged: it names
/// what was wrong, never what the token held.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the access token is longer than {MAX_TOKEN_BYTES} bytes")]
    TooLarge,
    #[error("the access token is not a JWT")]
    Malformed,
    #[error("the access token's algorithm {0} is not accepted (asymmetric signatures only)")]
    Algorithm(String),
    #[error("the access token is signed with a key the issuer does not publish")]
    UnknownKey,
    #[error("the access token has expired")]
    Expired,
    #[error("the access token is not valid yet")]
    NotYetValid,
    #[error("the access token is for another audience")]
    Audience,
    #[error("the access token is from another issuer")]
    Issuer,
    #[error("the access token's signature does not verify")]
    Signature,
    #[error("the access token lacks the claim {0}")]
    MissingClaim(String),
    #[error("the access token's claims are not valid")]
    Claims,
    #[error("the access token is not active (revoked, expired, or unknown to the issuer)")]
    Inactive,
    #[error("the access token could not be checked with the issuer; try again")]
    Unverifiable,
}

/// Checks access tokens for one issuer and one audience.
pub struct Verifier {
    issuer: String,
    audience: String,
    keys: Keys,
    /// Opaque tokens' checks, when the server has credentials to ask the issuer with.
    introspector: Option<Introspector>,
    /// JWTs that verified, until they expire (bounded).
    verified: Verified,
}

impl Verifier {
    /// A verifier for `issuer`'s tokens addressed to `audience`, with the issuer's keys found
    /// and fetched now.
    pub async fn new(
        issuer: &str,
        audience: &str,
        credentials: Option<ClientCredentials>,
    ) -> Result<Verifier, KeysError> {
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
        })
    }

    /// The audience tokens must name: this server's resource identifier.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The identity `token` names, once its signature, issuer, audience and times verify (or
    /// did, for a JWT seen before and not expired; see [`super::cache`]).
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
        let Some(alg) = written_alg(token) else {
            return match &self.introspector {
                Some(i) => i
                    .identity(token, &self.issuer, &self.audience)
                    .await
                    .map(Arc::new),
                None => Err(TokenError::Malformed),
            };
        };
        if !ACCEPTED.iter().any(|a| format!("{a:?}") == alg) {
            return Err(TokenError::Algorithm(alg));
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
        let exp = data.claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let identity = Arc::new(identity(data.claims)?);
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

/// The `alg` of a token's header as written (at most 32 characters), if its header decodes.
fn written_alg(token: &str) -> Option<String> {
    use base64::Engine;
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .ok()?;
    let header: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
    let alg = header.get("alg")?.as_str()?;
    (alg.len() <= 32).then(|| alg.to_string())
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

/// The identity of verified claims: `sub` a string, scopes from `scope` (space-separated) or
/// `scp` (a list or a string).
pub(super) fn identity(claims: Map<String, Value>) -> Result<Identity, TokenError> {
    let sub = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| TokenError::MissingClaim("sub".into()))?
        .to_string();
    let words = |s: &str| s.split_ascii_whitespace().map(str::to_string).collect();
    let scopes = match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => words(s),
        (None, Some(Value::Array(a))) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        (None, None) => Vec::new(),
        _ => return Err(TokenError::Claims),
    };
    Ok(Identity {
        sub,
        scopes,
        claims,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_algorithm_is_read_before_anything_else() {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let token = format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(r#"{"sub":"x"}"#));
        assert_eq!(written_alg(&token).as_deref(), Some("none"));
        assert_eq!(written_alg("not a token"), None);
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
    fn scopes_come_from_scope_or_scp_and_sub_is_required() {
        let of = |v: Value| identity(v.as_object().unwrap().clone());
        assert_eq!(
            of(json!({"sub": "a", "scope": "x y"})).unwrap().scopes,
            ["x", "y"]
        );
        assert_eq!(of(json!({"sub": "a", "scp": ["x"]})).unwrap().scopes, ["x"]);
        assert!(of(json!({"sub": "a"})).unwrap().scopes.is_empty());
        assert_eq!(
            of(json!({"scope": "x"})).unwrap_err(),
            TokenError::MissingClaim("sub".into())
        );
        assert_eq!(
            of(json!({"sub": "a", "scope": 3})).unwrap_err(),
            TokenError::Claims
        );
    }

    #[test]
    fn debug_never_shows_the_claims() {
        let id = identity(
            json!({"sub": "alice", "secret": "hunter2"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        let shown = format!("{id:?}");
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}

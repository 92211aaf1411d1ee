//! What every kind of access token is refused for ([`TokenError`]), and the checks a JWT and
//! an introspection answer share: the size limit, the clock skew allowed, the registered
//! claims' types. The leaf under [`super::verify`] and [`super::introspect`].

use std::time::Duration;

use serde_json::{Map, Value};

/// The largest access token accepted; a longer one is refused before it is decoded.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// The clock skew allowed on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(30);

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
    #[error("the access token's claim {0} is not of its registered type")]
    ClaimType(&'static str),
    #[error(
        "the access token's header names extensions this server does not understand (crit or b64)"
    )]
    Critical,
    #[error("the access token is not active (revoked, expired, or unknown to the issuer)")]
    Inactive,
    #[error("the access token could not be checked with the issuer; try again")]
    Unverifiable,
}

/// Refuses claims whose registered names hold another type than RFC 7519 gives them: `iss`
/// and `sub` strings, `aud` a string or a list of strings, `exp`, `nbf` and `iat` numbers.
/// jsonwebtoken checks the values it validates, not every type.
pub(crate) fn registered_types(claims: &Map<String, Value>) -> Result<(), TokenError> {
    let strings = |v: &Value| match v {
        Value::String(_) => true,
        Value::Array(a) => a.iter().all(Value::is_string),
        _ => false,
    };
    type Fits<'a> = &'a dyn Fn(&Value) -> bool;
    let checks: [(&'static str, Fits<'_>); 6] = [
        ("iss", &Value::is_string),
        ("sub", &Value::is_string),
        ("aud", &strings),
        ("exp", &Value::is_number),
        ("nbf", &Value::is_number),
        ("iat", &Value::is_number),
    ];
    for (name, fits) in checks {
        if claims.get(name).is_some_and(|v| !fits(v)) {
            return Err(TokenError::ClaimType(name));
        }
    }
    Ok(())
}

//! Who is calling, over HTTP: mcpspec as an OAuth 2.1 resource server (MCP's authorization
//! specification). `serve --http ADDR --oauth-issuer URL` makes every request carry an access
//! token from that issuer: a JWT (RFC 9068) signed with one of the issuer's published keys
//! (`keys`, `verify`), with an asymmetric algorithm only (RS*, PS*, ES256/384, EdDSA; `none` and the
//! HMAC ones are refused, so a public key can never be used as a shared secret), this issuer,
//! this server as its audience (RFC 8707), and `exp`/`nbf` checked with 30 s of clock
//! skew. A verified token becomes an [`Identity`]: its subject, its scopes (the `scope` string
//! or an `scp` list) and its claims, which the transport hands to the call and the call's SQL
//! may read (`:auth.sub`, `:auth.claims.NAME`).
//!
//! [`verify::Verifier::metadata`] is the protected resource metadata (RFC 9728) served at
//! `/.well-known/oauth-protected-resource` (and the path-suffixed form); `verify::challenge` the
//! `WWW-Authenticate` header of a 401 or 403. Nothing here writes a token, a signature or a
//! claim set to a log or an answer: errors say what was wrong with a token, never what it held.

#[cfg(feature = "http")]
pub(crate) mod cache;
#[cfg(feature = "http")]
pub(crate) mod introspect;
#[cfg(feature = "http")]
pub(crate) mod keys;
#[cfg(feature = "http")]
mod token;
#[cfg(feature = "http")]
pub(crate) mod verify;

#[cfg(feature = "http")]
pub use keys::KeysError;
#[cfg(feature = "http")]
pub use token::TokenError;
#[cfg(feature = "http")]
pub use verify::Verifier;

use std::fmt;
#[cfg(feature = "http")]
use std::sync::Arc;

use serde_json::{Map, Value};

/// The caller a verified access token names. `Debug` shows the subject and scopes only.
#[derive(Clone)]
pub struct Identity {
    /// The token's `sub`.
    pub sub: String,
    /// The scopes the token grants.
    pub scopes: Vec<String>,
    /// The claims the server reads (a tool's `:auth.claims.NAME`, a role claim), by name; the
    /// token's other claims are not kept (see [`Kept`]).
    pub claims: Map<String, Value>,
    /// The whole claim set as JSON, kept only when calls pass it on to the database (a
    /// PostgreSQL `identity:`, whose policies may read any claim).
    pub all_claims: Option<Box<str>>,
}

/// Which claims of a verified token the server keeps: those its tools read and the role claim
/// of the `identity:` of the engine it serves, and the whole set as one JSON text when that
/// `identity:` passes it on to the database. A token's other claims are dropped once it
/// verified, so that what a kept token costs is bounded by what the server uses.
#[cfg(feature = "http")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    names: Vec<&'static str>,
    whole: bool,
}

#[cfg(feature = "http")]
impl Kept {
    /// What `def`, served on a database of `dialect` (none: no database), reads of a
    /// caller's claims.
    pub fn of(def: &crate::def::ServerDef, dialect: Option<&str>) -> Kept {
        let read = def
            .tools
            .iter()
            .flat_map(|t| t.bind.0)
            .filter(|(_, kind)| matches!(kind, crate::def::ParamKind::AuthClaim(_)))
            .map(|(param, _)| claim_name(param));
        let identity = def
            .database
            .as_ref()
            .zip(dialect)
            .and_then(|(d, dialect)| d.engine(dialect))
            .and_then(|e| e.identity.as_ref());
        let role = identity.and_then(|i| i.role_claim);
        let mut names: Vec<&'static str> = read.chain(role).collect();
        names.sort_unstable();
        names.dedup();
        Kept {
            names,
            whole: identity.is_some(),
        }
    }

    /// Every claim as the whole set's text, and the named ones by name: for tests.
    #[cfg(test)]
    pub fn everything(names: &[&'static str]) -> Kept {
        let mut names = names.to_vec();
        names.sort_unstable();
        Kept { names, whole: true }
    }

    /// The identity of verified `claims`: `sub` a string, scopes from `scope`
    /// (space-separated) or `scp` (a list or a string), and the claims kept.
    #[cfg(feature = "http")]
    pub fn identity(&self, claims: Map<String, Value>) -> Result<Identity, TokenError> {
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
        let all_claims = self
            .whole
            .then(|| Value::Object(claims.clone()).to_string().into_boxed_str());
        let mut claims = claims;
        claims.retain(|k, _| self.names.binary_search(&k.as_str()).is_ok());
        Ok(Identity {
            sub,
            scopes,
            claims,
            all_claims,
        })
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("sub", &self.sub)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// About how many bytes the identity holds, for the caches that keep identities.
    pub fn bytes(&self) -> usize {
        let claims = Value::Object(self.claims.clone()).to_string().len();
        std::mem::size_of::<Identity>()
            + self.sub.len()
            + self.scopes.iter().map(|s| s.len() + 24).sum::<usize>()
            + 2 * claims
            + self.all_claims.as_ref().map_or(0, |c| c.len())
    }

    /// Those of `needed` the token does not grant.
    pub fn missing<'a>(&self, needed: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        needed
            .into_iter()
            .filter(|s| !self.scopes.iter().any(|g| g == s))
            .collect()
    }
}

/// The caller of a request, as the HTTP transport hands it to the call: in the request's
/// extensions, where rmcp passes them on to the handler.
#[cfg(feature = "http")]
#[derive(Clone, Debug)]
pub struct Caller(pub Arc<Identity>);

/// The scopes a request needs: the server's, and those of the tool (`tools/call`), resource
/// (`resources/read`) or prompt (`prompts/get`) it names. A name the server does not have needs
/// the server's only (the call then fails as unknown, as it would anyway).
#[cfg(feature = "http")]
pub fn needed_scopes(
    def: &'static crate::def::ServerDef,
    method: &str,
    target: Option<&str>,
) -> Vec<&'static str> {
    let own: &'static [&'static str] = match method {
        "tools/call" => target.and_then(|n| def.tool(n)).map_or(&[], |t| t.scopes),
        "prompts/get" => target
            .and_then(|n| def.prompts.iter().find(|p| p.name == n))
            .map_or(&[], |p| p.scopes),
        "resources/read" => target
            .and_then(|uri| {
                def.resources.iter().find(|r| match r.templated {
                    false => r.uri == uri,
                    true => crate::uri_template::match_template(r.uri, uri).is_some(),
                })
            })
            .map_or(&[], |r| r.scopes),
        _ => &[],
    };
    let mut needed: Vec<&'static str> = def.scopes.to_vec();
    needed.extend(own.iter().filter(|s| !def.scopes.contains(s)));
    needed
}

/// Every scope the spec names, for the protected resource metadata's `scopes_supported`.
#[cfg(feature = "http")]
pub fn all_scopes(def: &crate::def::ServerDef) -> Vec<&'static str> {
    let lists = std::iter::once(def.scopes)
        .chain(def.tools.iter().map(|t| t.scopes))
        .chain(def.resources.iter().map(|r| r.scopes))
        .chain(def.prompts.iter().map(|p| p.scopes));
    let mut all: Vec<&'static str> = lists.flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// A caller's call on PostgreSQL with `identity:` declared: the role it takes and the claims
/// it carries, set for its transaction only by the backend (PostgREST's model; see
/// `backend::Session::act_as`).
pub struct Acting {
    role: &'static str,
    setting: &'static str,
    claims: String,
}

impl Acting {
    /// What `caller` takes under `identity`: the role its `role_claim` names (the first of the
    /// allow-list when the claim is absent or none is declared), refused with `FORBIDDEN` when
    /// that role is not allowed.
    pub fn of(
        identity: &'static crate::def::IdentityDef,
        caller: &Identity,
    ) -> Result<Acting, crate::tool_error::ToolError> {
        let named = identity
            .role_claim
            .and_then(|c| caller.claims.get(c))
            .map(|v| v.as_str().unwrap_or_default());
        let role = match named {
            None => identity.roles.first().copied(),
            Some(named) => identity.roles.iter().copied().find(|r| *r == named),
        };
        let Some(role) = role else {
            return Err(crate::tool_error::ToolError::new(
                "FORBIDDEN",
                format!(
                    "the access token names a database role this server does not let a call take; the roles allowed are {}",
                    identity.roles.join(", ")
                ),
            ));
        };
        Ok(Acting {
            role,
            setting: identity.claims_setting,
            claims: caller.all_claims.as_deref().map_or_else(
                || Value::Object(caller.claims.clone()).to_string(),
                str::to_string,
            ),
        })
    }

    /// The database role the call takes.
    pub fn role(&self) -> &'static str {
        self.role
    }

    /// The setting its claims go under (`request.jwt.claims`, say).
    pub fn setting(&self) -> &'static str {
        self.setting
    }

    /// The caller's claims as JSON text.
    pub fn claims(&self) -> &str {
        &self.claims
    }
}

/// The claim a `:auth.claims.NAME` parameter reads.
pub fn claim_name(param: &str) -> &str {
    param.strip_prefix("auth.claims.").unwrap_or(param)
}

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;
    use serde_json::json;

    fn kept(names: &[&'static str], whole: bool) -> Kept {
        Kept {
            names: names.to_vec(),
            whole,
        }
    }

    fn of(kept: &Kept, v: Value) -> Result<Identity, TokenError> {
        kept.identity(v.as_object().unwrap().clone())
    }

    #[test]
    fn scopes_come_from_scope_or_scp_and_sub_is_required() {
        let k = Kept::default();
        assert_eq!(
            of(&k, json!({"sub": "a", "scope": "x y"})).unwrap().scopes,
            ["x", "y"]
        );
        assert_eq!(
            of(&k, json!({"sub": "a", "scp": ["x"]})).unwrap().scopes,
            ["x"]
        );
        assert!(of(&k, json!({"sub": "a"})).unwrap().scopes.is_empty());
        assert_eq!(
            of(&k, json!({"scope": "x"})).unwrap_err(),
            TokenError::MissingClaim("sub".into())
        );
        assert_eq!(
            of(&k, json!({"sub": "a", "scope": 3})).unwrap_err(),
            TokenError::Claims
        );
    }

    /// Only the claims the server reads are kept, unless a database identity passes the whole
    /// set on; then it is kept as one JSON text.
    #[test]
    fn an_identity_keeps_only_what_the_server_reads() {
        let claims = json!({"sub": "a", "team": "red", "big": "x".repeat(5000), "role": "r"});
        let lean = of(&kept(&["role", "team"], false), claims.clone()).unwrap();
        assert_eq!(
            Value::Object(lean.claims.clone()),
            json!({"team": "red", "role": "r"})
        );
        assert!(lean.all_claims.is_none());
        assert!(lean.bytes() < 1000, "{}", lean.bytes());
        let whole = of(&kept(&["role"], true), claims.clone()).unwrap();
        let all: Value = serde_json::from_str(whole.all_claims.as_deref().unwrap()).unwrap();
        assert_eq!(all, claims);
        assert_eq!(Value::Object(whole.claims.clone()), json!({"role": "r"}));
    }

    #[test]
    fn debug_never_shows_the_claims() {
        let id = of(
            &Kept::everything(&["secret"]),
            json!({"sub": "alice", "secret": "hunter2"}),
        )
        .unwrap();
        let shown = format!("{id:?}");
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}

//! Vertex AI access tokens from a Google service-account key file
//! (`GOOGLE_APPLICATION_CREDENTIALS` pointing at the JSON key), without `gcloud`: a JWT signed
//! with the key (RS256) is exchanged for an access token at the key's `token_uri` (the OAuth 2.0
//! JWT bearer grant, RFC 7523).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;

use crate::environment::Secret;

/// The scope Vertex AI needs.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Google's token endpoint, when a key names none.
pub const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// How long an assertion is valid (Google's maximum).
const ASSERTION_LIFETIME: u64 = 3600;
/// A token is refreshed this long before it expires.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// What flemmad reads of a key file.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    client_email: String,
    #[serde(default)]
    private_key: String,
    #[serde(default)]
    private_key_id: Option<String>,
    #[serde(default)]
    token_uri: Option<String>,
}

/// A service account's key: who it is, the RSA key that signs for it, where tokens come from.
pub struct ServiceAccountKey {
    /// The account (`name@project.iam.gserviceaccount.com`), the JWT's issuer.
    pub client_email: String,
    /// The key's id (the JWT header's `kid`).
    pub private_key_id: Option<String>,
    /// The token endpoint (the JWT's audience).
    pub token_uri: String,
    key_pair: ring::signature::RsaKeyPair,
}

impl std::fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountKey")
            .field("client_email", &self.client_email)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

/// Why a key file gives no token. `NotAServiceAccount` is not an error of the file: other
/// credential types (`authorized_user`, written by `gcloud auth application-default login`)
/// are left to `gcloud`.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file holds another kind of credential.
    #[error("{path} holds a `{kind}` credential, not a service-account key; gcloud reads those")]
    NotAServiceAccount { path: String, kind: String },
    /// The file cannot be used.
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

impl ServiceAccountKey {
    /// Reads and checks a key file.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let shown = path.display().to_string();
        let invalid = |reason: String| KeyError::Invalid {
            path: shown.clone(),
            reason,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|error| invalid(format!("cannot be read ({error})")))?;
        Self::from_json(&text).map_err(|error| match error {
            KeyError::NotAServiceAccount { kind, .. } => KeyError::NotAServiceAccount {
                path: shown.clone(),
                kind,
            },
            KeyError::Invalid { reason, .. } => invalid(reason),
        })
    }

    /// Parses the JSON of a key file.
    pub fn from_json(text: &str) -> Result<Self, KeyError> {
        let invalid = |reason: String| KeyError::Invalid {
            path: String::new(),
            reason,
        };
        let file: KeyFile = serde_json::from_str(text).map_err(|error| {
            invalid(format!(
                "is not a Google credentials JSON file ({error}); download a key from IAM → Service accounts → Keys"
            ))
        })?;
        if file.kind != "service_account" {
            return Err(KeyError::NotAServiceAccount {
                path: String::new(),
                kind: if file.kind.is_empty() {
                    "untyped".into()
                } else {
                    file.kind
                },
            });
        }
        if file.client_email.is_empty() || file.private_key.is_empty() {
            return Err(invalid(
                "has no `client_email` or `private_key`; download a new key for the service account"
                    .into(),
            ));
        }
        let der = pem_body(&file.private_key).map_err(invalid)?;
        let key_pair = ring::signature::RsaKeyPair::from_pkcs8(&der)
            .or_else(|_| ring::signature::RsaKeyPair::from_der(&der))
            .map_err(|error| {
                invalid(format!(
                    "its `private_key` is not an RSA private key ({error})"
                ))
            })?;
        Ok(ServiceAccountKey {
            client_email: file.client_email,
            private_key_id: file.private_key_id.filter(|id| !id.is_empty()),
            token_uri: file
                .token_uri
                .filter(|uri| !uri.is_empty())
                .unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned()),
            key_pair,
        })
    }

    /// The signed JWT (RS256) asking for a `scope` token, issued at `now`.
    pub fn assertion(&self, scope: &str, now: SystemTime) -> Result<String, String> {
        let issued = now
            .duration_since(UNIX_EPOCH)
            .map_err(|_| "the system clock is before 1970".to_string())?
            .as_secs();
        let mut header = json!({"alg": "RS256", "typ": "JWT"});
        if let Some(id) = &self.private_key_id {
            header["kid"] = json!(id);
        }
        let claims = json!({
            "iss": self.client_email,
            "scope": scope,
            "aud": self.token_uri,
            "iat": issued,
            "exp": issued + ASSERTION_LIFETIME,
        });
        let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let signed = format!(
            "{}.{}",
            encode(header.to_string().as_bytes()),
            encode(claims.to_string().as_bytes())
        );
        let mut signature = vec![0; self.key_pair.public().modulus_len()];
        self.key_pair
            .sign(
                &ring::signature::RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                signed.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "signing the token request with the key failed".to_string())?;
        Ok(format!("{signed}.{}", encode(&signature)))
    }

    /// Exchanges a fresh assertion for an access token at `token_uri`: the token and how long
    /// it may be cached.
    pub async fn access_token(&self, http: &reqwest::Client) -> Result<(Secret, Duration), String> {
        let assertion = self.assertion(CLOUD_PLATFORM_SCOPE, SystemTime::now())?;
        // The assertion is base64url (no characters to escape); the grant type's colons are.
        let body = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
        );
        let response = http
            .post(&self.token_uri)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|error| {
                format!(
                    "the token endpoint {} did not answer ({error})",
                    self.token_uri
                )
            })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let answer: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if !status.is_success() {
            let described = [
                answer["error"].as_str(),
                answer["error_description"].as_str(),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": ");
            let described = if described.is_empty() {
                text.chars().take(200).collect()
            } else {
                described
            };
            return Err(format!(
                "{} refused the key of {} (HTTP {}): {described}; check that the key is not revoked and the clock is right",
                self.token_uri,
                self.client_email,
                status.as_u16()
            ));
        }
        let token = answer["access_token"]
            .as_str()
            .filter(|token| !token.is_empty())
            .ok_or_else(|| format!("{} answered without an access_token", self.token_uri))?;
        let lifetime = Duration::from_secs(answer["expires_in"].as_u64().unwrap_or(3600));
        Ok((Secret::new(token), lifetime.saturating_sub(REFRESH_MARGIN)))
    }
}

/// The DER bytes of a PEM block (the `-----` lines dropped, the base64 body decoded).
fn pem_body(pem: &str) -> Result<Vec<u8>, String> {
    let body: String = pem
        .lines()
        .filter(|line| !line.trim_start().starts_with("-----"))
        .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|error| format!("its `private_key` is not a PEM block ({error})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_credential_types_are_left_to_gcloud() {
        let error = ServiceAccountKey::from_json(r#"{"type": "authorized_user"}"#).unwrap_err();
        assert!(
            matches!(error, KeyError::NotAServiceAccount { .. }),
            "{error}"
        );
        let error = ServiceAccountKey::from_json("not json").unwrap_err();
        assert!(
            error.to_string().contains("not a Google credentials"),
            "{error}"
        );
        let error = ServiceAccountKey::from_json(
            r#"{"type": "service_account", "client_email": "a@b", "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}"#,
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("not an RSA private key"),
            "{error}"
        );
    }
}

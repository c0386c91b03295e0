//! Google's OAuth 2.0 token endpoint for service accounts (RFC 7523 JWT bearer grant), as a
//! service-account key's `token_uri` points at it: `POST /token` with
//! `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`.
//!
//! The assertion is checked the way Google checks it: an RS256 JWT whose claims name the
//! issuer (`iss`), a scope, this endpoint as audience (`aud`), and a lifetime of at most an
//! hour; its signature is verified when the server knows the account's public key
//! ([`crate::MockConfig::service_account_key`]). A good assertion gets
//! `{"access_token": "ya29.mock-<n>", "expires_in": 3599, "token_type": "Bearer"}`; a bad one
//! gets Google's `{"error": "invalid_grant", "error_description": …}` with HTTP 400.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::formats::Reply;

/// The grant type of a JWT bearer assertion.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The public key (PKCS#1 `RSAPublicKey`, DER) of the RSA private key in `pem` (a PKCS#8
/// `-----BEGIN PRIVATE KEY-----` block, as in a service-account key file), for
/// [`crate::MockConfig::service_account_key`].
pub fn public_key_of(pem: &str) -> Result<Vec<u8>, String> {
    use ring::signature::KeyPair;
    let der = pem_body(pem)?;
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&der)
        .map_err(|error| format!("not an RSA PKCS#8 key: {error}"))?;
    Ok(KeyPair::public_key(&pair).as_ref().to_vec())
}

fn pem_body(pem: &str) -> Result<Vec<u8>, String> {
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|error| format!("the PEM body is not base64: {error}"))
}

/// Answers one token request: `form` is its `application/x-www-form-urlencoded` body,
/// `audience` the URL it was sent to, `issued` the number of the token to issue.
pub(crate) fn answer(form: &str, audience: &str, public_key: Option<&[u8]>, issued: u64) -> Reply {
    match check(form, audience, public_key) {
        Ok(()) => Reply::json(
            200,
            vec![],
            &json!({"access_token": format!("ya29.mock-{issued}"), "expires_in": 3599, "token_type": "Bearer"}),
        ),
        Err(description) => Reply::json(
            400,
            vec![],
            &json!({"error": "invalid_grant", "error_description": description}),
        ),
    }
}

fn field<'a>(form: &'a str, name: &str) -> Option<&'a str> {
    form.split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

fn check(form: &str, audience: &str, public_key: Option<&[u8]>) -> Result<(), String> {
    let grant = field(form, "grant_type")
        .map(|g| g.replace("%3A", ":").replace("%3a", ":"))
        .ok_or("missing grant_type")?;
    if grant != JWT_BEARER {
        return Err(format!("unsupported grant_type {grant}"));
    }
    let assertion = field(form, "assertion").ok_or("missing assertion")?;
    let parts: Vec<&str> = assertion.split('.').collect();
    let [header, claims, signature] = parts.as_slice() else {
        return Err("the assertion is not a JWT (three dot-separated parts)".into());
    };
    let decode = |part: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|error| format!("a JWT part is not base64url without padding: {error}"))
    };
    let header: Value = serde_json::from_slice(&decode(header)?)
        .map_err(|error| format!("the JWT header is not JSON: {error}"))?;
    if header["alg"] != "RS256" {
        return Err(format!("alg must be RS256, got {}", header["alg"]));
    }
    let claims: Value = serde_json::from_slice(&decode(claims)?)
        .map_err(|error| format!("the JWT claims are not JSON: {error}"))?;
    if claims["iss"].as_str().is_none_or(str::is_empty) {
        return Err("iss (the service account's email) is missing".into());
    }
    if claims["scope"].as_str().is_none_or(str::is_empty) {
        return Err("scope is missing".into());
    }
    if claims["aud"].as_str() != Some(audience) {
        return Err(format!(
            "aud must be the token URI {audience}, got {}",
            claims["aud"]
        ));
    }
    let (Some(iat), Some(exp)) = (claims["iat"].as_u64(), claims["exp"].as_u64()) else {
        return Err("iat and exp must be numbers of seconds".into());
    };
    if exp <= iat || exp - iat > 3600 {
        return Err("the assertion must live at most one hour (exp - iat <= 3600)".into());
    }
    if let Some(key) = public_key {
        let signed = &assertion[..assertion.rfind('.').unwrap_or(0)];
        ring::signature::UnparsedPublicKey::new(&ring::signature::RSA_PKCS1_2048_8192_SHA256, key)
            .verify(signed.as_bytes(), &decode(signature)?)
            .map_err(|_| "invalid JWT signature".to_string())?;
    }
    Ok(())
}

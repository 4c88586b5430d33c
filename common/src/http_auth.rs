//! HTTP basic authentication, as Stream Load clients send it (`-u user:pass`).

use base64::Engine;

/// Decodes an `Authorization` header value `Basic <base64(user:password)>`.
pub fn decode_basic_auth(value: &str) -> Option<(String, String)> {
    let b64 = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':').unwrap_or((text.as_str(), ""));
    Some((u.to_string(), p.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic() {
        assert_eq!(
            decode_basic_auth("Basic cm9vdDo="),
            Some(("root".into(), String::new()))
        );
        assert_eq!(
            decode_basic_auth("Basic YTpiOmM="),
            Some(("a".into(), "b:c".into()))
        );
        assert_eq!(decode_basic_auth("Bearer x"), None);
        assert_eq!(decode_basic_auth("Basic !!!"), None);
    }
}

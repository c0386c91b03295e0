//! Which addresses `fetch_content` may reach: by default only public ones. A page could
//! otherwise make the model read the user's own services (`localhost`, a router's admin page)
//! or a cloud's metadata endpoint (`169.254.169.254`, which hands out credentials). The check
//! runs on every address a host name resolves to, at connection time (so a name that resolves
//! differently the second time is caught), and on a URL's literal address before each request
//! and redirection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether `ip` is on the public internet: not loopback, private, link-local, shared (CGNAT),
/// unspecified, multicast, broadcast, documentation or benchmarking space, nor an IPv6 form of
/// one of those (IPv4-mapped, NAT64, 6to4), nor IPv6 unique-local or link-local.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => is_public_v6(ip),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (a == 100 && (64..128).contains(&b))
        // IETF protocol assignments, 192.0.0.0/24.
        || (a == 192 && b == 0 && c == 0)
        // Benchmarking, 198.18.0.0/15.
        || (a == 198 && (b == 18 || b == 19))
        // Reserved, 240.0.0.0/4.
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let segments = ip.segments();
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [a, b] = segments[6].to_be_bytes();
        let [c, d] = segments[7].to_be_bytes();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    if segments[0] == 0x2002 {
        let [a, b] = segments[1].to_be_bytes();
        let [c, d] = segments[2].to_be_bytes();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // Unique local, fc00::/7.
        || (segments[0] & 0xfe00) == 0xfc00
        // Link-local, fe80::/10.
        || (segments[0] & 0xffc0) == 0xfe80
        // Site-local (deprecated), fec0::/10.
        || (segments[0] & 0xffc0) == 0xfec0
        // Documentation, 2001:db8::/32.
        || (segments[0] == 0x2001 && segments[1] == 0x0db8)
        // IPv4-compatible (deprecated) ::a.b.c.d.
        || segments[..6] == [0, 0, 0, 0, 0, 0])
}

/// The advice every refusal ends with.
const ALLOW: &str = "fetch_content reaches public addresses only; set tools.fetch_private_addresses = true in your config.toml to allow private ones";

/// Keeps the public addresses of what `host` resolved to; none left is a refusal naming them.
pub fn public_only(host: &str, resolved: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, String> {
    if resolved.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    let (public, private): (Vec<SocketAddr>, Vec<SocketAddr>) =
        resolved.into_iter().partition(|a| is_public(a.ip()));
    if public.is_empty() {
        let shown: Vec<String> = private.iter().map(|a| a.ip().to_string()).collect();
        return Err(format!(
            "{host} resolves to a loopback, private or link-local address ({}); {ALLOW}",
            shown.join(", ")
        ));
    }
    Ok(public)
}

/// Refuses a URL whose host is a literal non-public address (the resolver never sees those).
pub fn check_literal(url: &Url) -> Result<(), String> {
    // The URL parser normalises literal addresses (`0x7f.1` is `127.0.0.1`, IPv6 in brackets).
    let host = url.host_str().unwrap_or("");
    let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    else {
        return Ok(());
    };
    if is_public(ip) {
        Ok(())
    } else {
        Err(format!(
            "{url} is a loopback, private or link-local address; {ALLOW}"
        ))
    }
}

/// Checks the target of a request before it is made: a literal address must be public, and a
/// host name must resolve to at least one public address (the connection then uses only
/// those, through [`PublicResolver`]).
pub async fn check_target(url: &Url) -> Result<(), String> {
    check_literal(url)?;
    let Some(host) = url.host_str() else {
        return Ok(());
    };
    if host.starts_with('[') || host.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| format!("{host} cannot be resolved: {e}"))?
        .collect();
    public_only(host, resolved).map(|_| ())
}

/// A resolver that answers with the public addresses of a name only (the system resolver's
/// answer, filtered by [`public_only`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PublicResolver;

impl Resolve for PublicResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public = public_only(&host, resolved)?;
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

/// The resolver for a client: the public-only one, or `None` (the system's) when private
/// addresses are allowed.
pub fn resolver(allow_private: bool) -> Option<Arc<PublicResolver>> {
    (!allow_private).then(|| Arc::new(PublicResolver))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for text in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "192.0.0.1",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::7f00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip(text)), "{text} must not count as public");
        }
        for text in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(ip(text)), "{text} is public");
        }
    }

    #[test]
    fn a_name_resolving_only_to_private_addresses_is_refused() {
        let resolved = vec![
            SocketAddr::new(ip("127.0.0.1"), 0),
            SocketAddr::new(ip("::1"), 0),
        ];
        let error = public_only("localhost", resolved).expect_err("refused");
        assert!(error.contains("127.0.0.1"), "{error}");
        assert!(error.contains("fetch_private_addresses"), "{error}");
        // Mixed answers keep only the public ones (a rebinding name cannot slip one in).
        let mixed = vec![
            SocketAddr::new(ip("169.254.169.254"), 0),
            SocketAddr::new(ip("1.1.1.1"), 0),
        ];
        assert_eq!(
            public_only("example.org", mixed),
            Ok(vec![SocketAddr::new(ip("1.1.1.1"), 0)])
        );
    }

    #[test]
    fn literal_addresses_in_urls_are_checked() {
        let url = |text: &str| Url::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(check_literal(&url("http://169.254.169.254/latest/meta-data/")).is_err());
        assert!(check_literal(&url("http://[::1]:8080/")).is_err());
        assert!(check_literal(&url("http://10.1.2.3/")).is_err());
        assert!(check_literal(&url("http://0x7f.1/")).is_err());
        assert!(check_literal(&url("https://1.1.1.1/")).is_ok());
        assert!(check_literal(&url("https://example.org/")).is_ok());
    }

    #[tokio::test]
    async fn the_resolver_refuses_localhost() {
        let name: Name = "localhost".parse().unwrap_or_else(|_| panic!("a name"));
        let error = match PublicResolver.resolve(name).await {
            Ok(_) => panic!("localhost must be refused"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains("loopback"), "{error}");
    }
}

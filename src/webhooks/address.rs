//! Which endpoint addresses a delivery may reach: only public ones (protection against
//! server-side request forgery), checked on the URL and again on every name resolution.

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// The longest endpoint URL accepted, in characters.
const MAX_URL_CHARS: usize = 2048;

/// Whether `ip` is a public unicast address: false for loopback, private, link-local, shared
/// (CGNAT), multicast, broadcast, unspecified, documentation, benchmarking and reserved ranges,
/// IPv6 unique-local and site-local addresses, and the IPv6 forms that embed a refused IPv4
/// address (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

/// [`is_public`] for an IPv4 address.
fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0 // "this network", 0.0.0.0/8
        || a == 10 // private
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT), 100.64/10
        || a == 127 // loopback
        || (a == 169 && b == 254) // link-local
        || (a == 172 && (16..32).contains(&b)) // private, 172.16/12
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments, 192.0.0/24
        || (a == 192 && b == 0 && c == 2) // documentation (TEST-NET-1)
        || (a == 192 && b == 168) // private
        || (a == 198 && (18..20).contains(&b)) // benchmarking, 198.18/15
        || (a == 198 && b == 51 && c == 100) // documentation (TEST-NET-2)
        || (a == 203 && b == 0 && c == 113) // documentation (TEST-NET-3)
        || a >= 224; // multicast 224/4, reserved 240/4, broadcast
    !refused
}

/// [`is_public`] for an IPv6 address.
fn is_public_v6(ip: Ipv6Addr) -> bool {
    if ip.is_unspecified() || ip.is_loopback() {
        return false;
    }
    if let Some(v4) = embedded_v4(ip) {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    let refused = (s[0] & 0xff00) == 0xff00 // multicast, ff00::/8
        || (s[0] & 0xfe00) == 0xfc00 // unique local, fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local, fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated), fec0::/10
        || (s[0] == 0x0064 && s[1] == 0xff9b) // NAT64 for local use, 64:ff9b:1::/48 and the rest
        || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0) // discard-only, 100::/64
        || (s[0] == 0x2001 && s[1] == 0) // Teredo, 2001::/32
        || (s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0) // benchmarking, 2001:2::/48
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation, 2001:db8::/32
        || (s[0] & 0xfff0) == 0x3ff0 // documentation, 3fff::/20
        || (s[0] & 0xe000) != 0x2000; // outside global unicast 2000::/3
    !refused
}

/// The IPv4 address an IPv6 address stands for, if it is one of the forms that embeds one:
/// IPv4-mapped (`::ffff:0:0/96`), IPv4-compatible (`::/96`), NAT64 (`64:ff9b::/96`) or 6to4
/// (`2002::/16`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let last_four = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        [0, 0, 0, 0, 0, 0xffff | 0, _, _] => Some(last_four),
        [0x0064, 0xff9b, 0, 0, 0, 0, _, _] => Some(last_four),
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

/// Checks an endpoint URL: absolute, `https` (or `http` when `insecure`), with a host, no user
/// name or password, at most 2048 characters, and when the host is an IP address, a public one
/// (unless `insecure`). The message names the rule broken, never the URL.
pub fn check_url(text: &str, insecure: bool) -> Result<Url, String> {
    if text.chars().count() > MAX_URL_CHARS {
        return Err(format!(
            "a webhook URL has at most {MAX_URL_CHARS} characters"
        ));
    }
    let url = Url::parse(text).map_err(|e| format!("not an absolute URL ({e})"))?;
    match url.scheme() {
        "https" => {}
        "http" if insecure => {}
        "http" => return Err("a webhook URL must use https".to_owned()),
        _ if insecure => return Err("a webhook URL must use https or http".to_owned()),
        _ => return Err("a webhook URL must use https".to_owned()),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a webhook URL may not contain a user name or password".to_owned());
    }
    let ip = match url.host() {
        None => return Err("a webhook URL must have a host".to_owned()),
        Some(Host::Domain(_)) => None,
        Some(Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
        Some(Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
    };
    if let Some(ip) = ip.filter(|ip| !insecure && !is_public(*ip)) {
        return Err(format!(
            "the webhook URL's host {ip} is not a public address: refused"
        ));
    }
    Ok(url)
}

/// Why [`CheckedResolver`] did not resolve a name: it did not resolve, or it resolved to an
/// address that is not public.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(String);

/// Resolves names for the webhook client with the system resolver, and fails when any address
/// a name resolves to is not public (unless `insecure`). The connection then uses exactly the
/// addresses returned, so a name cannot be rebound to a private address between the check and
/// the connection. IP literals never reach a resolver: [`check_url`] checks those.
#[derive(Debug, Clone, Copy)]
pub struct CheckedResolver {
    /// Whether private addresses are allowed (tests and local development only).
    pub insecure: bool,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let insecure = self.insecure;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = checked_lookup(&host, insecure).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The addresses `host` resolves to (port 0: the client sets the URL's port), all public
/// unless `insecure`.
async fn checked_lookup(
    host: &str,
    insecure: bool,
) -> Result<Vec<SocketAddr>, Box<dyn Error + Send + Sync>> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| ResolveError(format!("cannot resolve {host}: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(ResolveError(format!("{host} resolves to no address")).into());
    }
    if let Some(refused) = addrs.iter().map(SocketAddr::ip).find(|ip| !is_public(*ip)) {
        if !insecure {
            return Err(ResolveError(format!(
                "{host} resolves to {refused}, a private address: refused"
            ))
            .into());
        }
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        let cases = [
            // IPv4, refused
            ("0.0.0.0", false),
            ("0.1.2.3", false),
            ("10.0.0.1", false),
            ("10.255.255.255", false),
            ("100.64.0.1", false),
            ("100.127.255.255", false),
            ("127.0.0.1", false),
            ("127.255.0.9", false),
            ("169.254.169.254", false),
            ("172.16.0.1", false),
            ("172.31.255.255", false),
            ("192.0.0.8", false),
            ("192.0.2.1", false),
            ("192.168.1.1", false),
            ("198.18.0.1", false),
            ("198.19.255.255", false),
            ("198.51.100.7", false),
            ("203.0.113.9", false),
            ("224.0.0.1", false),
            ("239.255.255.250", false),
            ("240.0.0.1", false),
            ("255.255.255.255", false),
            // IPv4, public (including the neighbours of refused ranges)
            ("1.1.1.1", true),
            ("8.8.8.8", true),
            ("9.255.255.255", true),
            ("11.0.0.0", true),
            ("100.63.255.255", true),
            ("100.128.0.0", true),
            ("126.255.255.255", true),
            ("128.0.0.0", true),
            ("169.253.255.255", true),
            ("172.15.255.255", true),
            ("172.32.0.0", true),
            ("192.0.1.1", true),
            ("192.167.255.255", true),
            ("192.169.0.0", true),
            ("198.17.255.255", true),
            ("198.20.0.0", true),
            ("223.255.255.255", true),
            // IPv6, refused
            ("::", false),
            ("::1", false),
            ("fe80::1", false),
            ("febf::1", false),
            ("fec0::1", false),
            ("fc00::1", false),
            ("fd12:3456::1", false),
            ("ff02::1", false),
            ("2001:db8::1", false),
            ("3fff::1", false),
            ("2001::1", false),
            ("2001:2::1", false),
            ("100::1", false),
            ("64:ff9b:1::1", false),
            ("4000::1", false),
            // IPv6 forms of refused IPv4 addresses
            ("::ffff:127.0.0.1", false),
            ("::ffff:10.0.0.1", false),
            ("::ffff:169.254.169.254", false),
            ("::ffff:0.0.0.0", false),
            ("::127.0.0.1", false),
            ("::192.168.0.1", false),
            ("64:ff9b::127.0.0.1", false),
            ("64:ff9b::a00:1", false),
            ("64:ff9b::169.254.169.254", false),
            ("2002:7f00:1::", false),
            ("2002:c0a8:101::1", false),
            // IPv6, public
            ("2606:4700:4700::1111", true),
            ("2001:4860:4860::8888", true),
            ("2a00:1450:4001::1", true),
            ("::ffff:8.8.8.8", true),
            ("64:ff9b::8.8.8.8", true),
            ("2002:808:808::1", true),
        ];
        for (text, public) in cases {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(is_public(ip), public, "{text}");
        }
    }

    #[test]
    fn check_url_accepts_public_https_urls() {
        for text in [
            "https://example.com/hooks",
            "https://example.com:8443/a?b=c#d",
            "https://8.8.8.8/",
            "https://[2606:4700:4700::1111]/",
            "https://localhost/",
        ] {
            let url = check_url(text, false).unwrap();
            assert_eq!(url.scheme(), "https");
        }
        let long = format!("https://example.com/{}", "a".repeat(2048 - 20));
        assert_eq!(long.len(), 2048);
        assert!(check_url(&long, false).is_ok());
    }

    #[test]
    fn check_url_refuses_naming_the_rule() {
        let long = format!("https://example.com/{}", "a".repeat(2048 - 19));
        let cases = [
            ("/relative/path", "absolute"),
            ("example.com/hooks", "absolute"),
            ("http://example.com/", "https"),
            ("ftp://example.com/", "https"),
            ("https://user:pass@example.com/", "user name or password"),
            ("https://user@example.com/", "user name or password"),
            ("https://127.0.0.1/", "not a public address"),
            ("https://10.0.0.1/", "not a public address"),
            ("https://[::1]/", "not a public address"),
            ("https://[::ffff:127.0.0.1]/", "not a public address"),
            ("https://[fd00::1]/", "not a public address"),
            ("https://2130706433/", "not a public address"),
            ("https://0x7f.1/", "not a public address"),
            ("https://169.254.169.254./", "not a public address"),
            (long.as_str(), "at most 2048"),
        ];
        for (text, rule) in cases {
            let error = check_url(text, false).unwrap_err();
            assert!(error.contains(rule), "{text}: {error}");
            assert!(!error.contains("pass@"), "{error}");
        }
    }

    #[test]
    fn insecure_allows_http_and_private_hosts_only() {
        for text in [
            "http://127.0.0.1:8080/",
            "https://10.0.0.1/",
            "http://[::1]/",
        ] {
            assert!(check_url(text, true).is_ok(), "{text}");
        }
        for (text, rule) in [
            ("ftp://127.0.0.1/", "https or http"),
            ("http://u:p@127.0.0.1/", "user name or password"),
            ("127.0.0.1:8080", "absolute"),
        ] {
            let error = check_url(text, true).unwrap_err();
            assert!(error.contains(rule), "{text}: {error}");
        }
    }

    #[tokio::test]
    async fn the_resolver_refuses_a_name_with_a_private_address() {
        let error = checked_lookup("localhost", false).await.unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("localhost resolves to "), "{text}");
        assert!(text.ends_with(", a private address: refused"), "{text}");
        let addrs = checked_lookup("localhost", true).await.unwrap();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }

    #[tokio::test]
    async fn the_resolver_reports_a_name_that_does_not_resolve() {
        let error = checked_lookup("no-such-host.invalid", true)
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("cannot resolve no-such-host.invalid"),
            "{error}"
        );
    }
}

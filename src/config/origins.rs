//! The server's own web origins (`THREADQL_PUBLIC_URL`, else the listener's) and the origins of
//! the pages discussions may be created for (`THREADQL_PAGE_ORIGINS`), read from text.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{CorsOrigins, Origin};

/// Reads `THREADQL_PUBLIC_URL`: an `http` or `https` origin, `scheme://host[:port]`, with at
/// most a final `/` after it.
pub(super) fn parse_public_url(s: &str) -> Result<Origin, String> {
    let text = s.trim();
    let text = text.strip_suffix('/').unwrap_or(text);
    let origin = text.parse::<Origin>().map_err(|why| {
        format!(
            "THREADQL_PUBLIC_URL (--public-url) {s:?} is not an origin ({why}); write \
             scheme://host[:port], e.g. https://comments.example.com"
        )
    })?;
    if !matches!(origin.scheme(), "http" | "https") {
        return Err(format!(
            "THREADQL_PUBLIC_URL (--public-url) {s:?}: the scheme must be http or https"
        ));
    }
    Ok(origin)
}

/// Reads `THREADQL_PAGE_ORIGINS`: origins as `THREADQL_CORS_ORIGINS` takes them, or `*`.
pub(super) fn parse_page_origins(s: &str) -> Result<CorsOrigins, String> {
    CorsOrigins::parse_setting(s, "THREADQL_PAGE_ORIGINS (--page-origins)")
}

/// The origins of the server's own pages: `public` when set; otherwise those of the listener
/// `addr` (plain HTTP): for a loopback or unspecified address the loopback names a browser on
/// this machine uses (`127.0.0.1`, `localhost`, `[::1]`, and the address itself), for another
/// address that address alone.
pub fn own_origins(public: Option<&Origin>, addr: SocketAddr) -> Vec<Origin> {
    if let Some(public) = public {
        return vec![public.clone()];
    }
    let port = addr.port();
    let ip = addr.ip();
    let mut hosts: Vec<String> = Vec::new();
    if ip.is_loopback() || ip.is_unspecified() {
        hosts.extend([
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port).to_string(),
            format!("localhost:{port}"),
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port).to_string(),
        ]);
    }
    if !ip.is_unspecified() {
        hosts.push(addr.to_string());
    }
    let mut origins: Vec<Origin> = Vec::new();
    for host in hosts {
        if let Ok(origin) = format!("http://{host}").parse::<Origin>() {
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
    }
    origins
}

/// The origin of an absolute URL (`None` for one without a web origin).
pub fn origin_of(url: &str) -> Option<Origin> {
    let parsed = url::Url::parse(url).ok()?;
    match parsed.origin() {
        origin @ url::Origin::Tuple(..) => origin.ascii_serialization().parse().ok(),
        url::Origin::Opaque(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(origins: &[Origin]) -> Vec<String> {
        origins.iter().map(Origin::to_string).collect()
    }

    #[test]
    fn a_loopback_or_unspecified_listener_is_reached_by_the_loopback_names() {
        let loopback = [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "http://[::1]:8080",
        ];
        for listen in ["127.0.0.1:8080", "0.0.0.0:8080", "[::]:8080", "[::1]:8080"] {
            let addr: SocketAddr = listen.parse().unwrap();
            assert_eq!(texts(&own_origins(None, addr)), loopback, "{listen}");
        }
        let addr: SocketAddr = "127.0.0.2:8080".parse().unwrap();
        assert_eq!(
            texts(&own_origins(None, addr)),
            [&loopback[..], &["http://127.0.0.2:8080"]].concat()
        );
        let addr: SocketAddr = "192.0.2.7:80".parse().unwrap();
        assert_eq!(texts(&own_origins(None, addr)), ["http://192.0.2.7"]);
        let public = parse_public_url("https://Comments.Example:443/").unwrap();
        assert_eq!(
            texts(&own_origins(Some(&public), addr)),
            ["https://comments.example"]
        );
    }

    #[test]
    fn the_public_url_is_an_http_origin() {
        assert_eq!(
            parse_public_url("http://127.0.0.1:3000").map(|o| o.to_string()),
            Ok("http://127.0.0.1:3000".to_owned())
        );
        for bad in [
            "",
            "comments.example",
            "ftp://comments.example",
            "https://comments.example/path",
            "https://user@comments.example",
            "https://comments.example:0",
        ] {
            let err = parse_public_url(bad).expect_err(bad);
            assert!(err.contains("THREADQL_PUBLIC_URL"), "{bad}: {err}");
        }
        let err = parse_page_origins("https://ok.example,bad").expect_err("bad");
        assert!(err.contains("THREADQL_PAGE_ORIGINS"), "{err}");
    }

    #[test]
    fn a_urls_origin_is_written_as_browsers_write_it() {
        let origin = |url: &str| origin_of(url).map(|o| o.to_string());
        assert_eq!(
            origin("https://Blog.Example:443/a?b#c"),
            Some("https://blog.example".into())
        );
        assert_eq!(
            origin("http://[::1]:3000/x"),
            Some("http://[::1]:3000".into())
        );
        assert_eq!(
            origin("https://bücher.example/"),
            Some("https://xn--bcher-kva.example".into())
        );
        assert_eq!(origin("data:text/plain,x"), None);
        assert_eq!(origin("not a url"), None);
    }
}

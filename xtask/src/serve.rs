//! A small static file server for `dist/` (`cargo xtask serve`, and the browser tests).
//!
//! It binds to 127.0.0.1 only, answers `GET` and `HEAD`, sends the MIME types the page needs
//! (`.wasm` must be `application/wasm` for streaming compilation), and refuses any path that
//! would leave the served folder: the URL is percent-decoded first, then every segment is
//! checked, so `..%2f` and `%2e%2e/` are caught as well as a plain `../`.
//!
//! The site can be mounted under a prefix (e.g. `/kvlab/`): the browser tests use that to prove
//! the page works from any sub-path of a static host, because an absolute URL such as
//! `/pkg/kvlab.js` would then 404.

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tiny_http::{Header, Method, Response, Server, StatusCode};

/// What a request URL maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Serve this file (it may not exist: the caller answers 404 then).
    File(PathBuf),
    /// The mount point was asked for without its trailing slash: redirect here so that the
    /// page's relative URLs resolve under the prefix.
    Redirect(String),
    /// Outside the prefix, or a path that does not decode to a safe relative path.
    NotFound,
    /// A path that tries to leave the served folder (`..`, a backslash, a NUL byte), or that
    /// is not valid percent-encoded UTF-8.
    Forbidden,
}

/// Maps a request URL (path plus optional query) to a file under `root`.
///
/// `prefix` is where the site is mounted; it starts and ends with `/` (`"/"` for the root).
/// A path ending in `/` serves that folder's `index.html`.
pub fn resolve(root: &Path, prefix: &str, url: &str) -> Resolved {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let Some(decoded) = percent_decode(path) else {
        return Resolved::Forbidden;
    };
    // Check traversal before anything else, so that a `..` is refused even outside the prefix.
    if decoded.contains('\\') || decoded.contains('\0') || decoded.split('/').any(|s| s == "..") {
        return Resolved::Forbidden;
    }
    if prefix.len() > 1 && decoded == prefix.trim_end_matches('/') {
        return Resolved::Redirect(prefix.to_string());
    }
    let Some(rest) = decoded.strip_prefix(prefix) else {
        return Resolved::NotFound;
    };
    let mut file = root.to_path_buf();
    for segment in rest.split('/').filter(|s| !s.is_empty() && *s != ".") {
        let seg = Path::new(segment);
        // A segment must be a single normal component (no root, no drive prefix).
        let mut comps = seg.components();
        match (comps.next(), comps.next()) {
            (Some(Component::Normal(_)), None) => file.push(seg),
            _ => return Resolved::Forbidden,
        }
    }
    if rest.is_empty() || rest.ends_with('/') || file.is_dir() {
        file.push("index.html");
    }
    Resolved::File(file)
}

/// Decodes `%XX` escapes; `None` for a malformed escape or bytes that are not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The `Content-Type` for a file name, by extension.
pub fn mime_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("html") | Some("htm") => "text/html; charset=utf-8",
        Some("js") | Some("mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("txt") | Some("md") => "text/plain; charset=utf-8",
        Some("csv") => "text/csv; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// An answer slower than this is said on stderr, also when quiet.
const SLOW_ANSWER: Duration = Duration::from_secs(2);

/// A running server: its address and worker threads.
pub struct Running {
    /// The address it listens on (127.0.0.1 and the bound port).
    pub addr: SocketAddr,
    server: Arc<Server>,
    workers: Vec<JoinHandle<()>>,
}

impl Running {
    /// The page's URL, e.g. `http://127.0.0.1:8000/kvlab/`.
    pub fn url(&self, prefix: &str) -> String {
        format!("http://{}{}", self.addr, prefix)
    }

    /// Blocks until the server stops (it does not stop by itself: this is for `serve`).
    pub fn join(self) {
        for w in self.workers {
            let _ = w.join();
        }
    }

    /// Stops accepting requests and waits for the workers to finish.
    pub fn stop(self) {
        for _ in &self.workers {
            self.server.unblock();
        }
        self.join();
    }
}

/// Serves `root` mounted at `prefix` on 127.0.0.1:`port` (0 picks a free port) with a few
/// worker threads, and returns at once.
pub fn start(root: &Path, prefix: &str, port: u16, quiet: bool) -> io::Result<Running> {
    let server = Server::http(("127.0.0.1", port))
        .map_err(|e| io::Error::other(format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| io::Error::other("server has no IP address"))?;
    let server = Arc::new(server);
    let root = Arc::new(root.to_path_buf());
    let prefix: Arc<str> = Arc::from(prefix);
    let workers = (0..4)
        .map(|_| {
            let (server, root, prefix) = (server.clone(), root.clone(), prefix.clone());
            thread::spawn(move || {
                // `incoming_requests` ends when `unblock` is called.
                for request in server.incoming_requests() {
                    let (url, began) = (request.url().to_string(), Instant::now());
                    if let Err(e) = answer(&root, &prefix, request, quiet) {
                        eprintln!("serve: error answering {url}: {e}");
                    }
                    // Always said: a worker held this long by one client is one of the four
                    // the others wait for (a lead for a stalled browser test).
                    let took = began.elapsed();
                    if took > SLOW_ANSWER {
                        eprintln!("serve: {url} took {} ms to answer", took.as_millis());
                    }
                }
            })
        })
        .collect();
    Ok(Running {
        addr,
        server,
        workers,
    })
}

fn header(name: &str, value: &str) -> Header {
    // Both are ASCII constants or MIME types from `mime_type`, which always parse.
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|()| panic!("invalid header {name}: {value}"))
}

fn text(status: u16, body: &str) -> Response<io::Cursor<Vec<u8>>> {
    Response::from_string(body)
        .with_status_code(StatusCode(status))
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
}

fn answer(root: &Path, prefix: &str, request: tiny_http::Request, quiet: bool) -> io::Result<()> {
    let url = request.url().to_string();
    if !matches!(request.method(), Method::Get | Method::Head) {
        return request
            .respond(text(405, "method not allowed").with_header(header("Allow", "GET, HEAD")));
    }
    let (status, response) = match resolve(root, prefix, &url) {
        Resolved::File(path) => match File::open(&path) {
            Ok(file) if path.is_file() => {
                let response = Response::from_file(file)
                    .with_header(header("Content-Type", mime_type(&path)))
                    .with_header(header("Cache-Control", "no-store"))
                    .with_header(header("X-Content-Type-Options", "nosniff"));
                if !quiet {
                    eprintln!("200 {url}");
                }
                return request.respond(response);
            }
            _ => (404, text(404, "not found")),
        },
        Resolved::Redirect(to) => (301, text(301, "moved").with_header(header("Location", &to))),
        Resolved::NotFound => (404, text(404, "not found")),
        Resolved::Forbidden => (403, text(403, "forbidden")),
    };
    if !quiet || status >= 400 {
        eprintln!("{status} {url}");
    }
    request.respond(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn root() -> PathBuf {
        PathBuf::from("/srv/site")
    }

    #[test]
    fn plain_paths_map_under_the_root() {
        let r = root();
        assert_eq!(resolve(&r, "/", "/"), Resolved::File(r.join("index.html")));
        assert_eq!(
            resolve(&r, "/", "/pkg/kvlab.js?v=1#x"),
            Resolved::File(r.join("pkg/kvlab.js"))
        );
        assert_eq!(
            resolve(&r, "/", "/a%20b.css"),
            Resolved::File(r.join("a b.css"))
        );
        assert_eq!(
            resolve(&r, "/", "//./style.css"),
            Resolved::File(r.join("style.css"))
        );
    }

    #[test]
    fn traversal_is_refused_after_decoding() {
        let r = root();
        for url in [
            "/../etc/passwd",
            "/..%2f..%2fetc/passwd",
            "/..%2F",
            "/%2e%2e/secret",
            "/%2E%2E%2Fsecret",
            "/pkg/../../x",
            "/..",
            "/a%5c..%5cb",
            "/a\\b",
            "/%00",
            "/kvlab/..%2f..%2fCargo.toml",
        ] {
            assert_eq!(resolve(&r, "/", url), Resolved::Forbidden, "{url}");
            assert_eq!(resolve(&r, "/kvlab/", url), Resolved::Forbidden, "{url}");
        }
        // Malformed escapes and non-UTF-8 bytes are refused, not guessed at.
        assert_eq!(resolve(&r, "/", "/%zz"), Resolved::Forbidden);
        assert_eq!(resolve(&r, "/", "/%2"), Resolved::Forbidden);
        assert_eq!(resolve(&r, "/", "/%ff"), Resolved::Forbidden);
        // Dots inside a name are fine.
        assert_eq!(
            resolve(&r, "/", "/a..b.js"),
            Resolved::File(r.join("a..b.js"))
        );
    }

    #[test]
    fn prefix_mounts_the_site_under_a_sub_path() {
        let r = root();
        assert_eq!(
            resolve(&r, "/kvlab/", "/kvlab/"),
            Resolved::File(r.join("index.html"))
        );
        assert_eq!(
            resolve(&r, "/kvlab/", "/kvlab/pkg/kvlab_bg.wasm"),
            Resolved::File(r.join("pkg/kvlab_bg.wasm"))
        );
        assert_eq!(
            resolve(&r, "/kvlab/", "/kvlab"),
            Resolved::Redirect("/kvlab/".into())
        );
        assert_eq!(resolve(&r, "/kvlab/", "/pkg/kvlab.js"), Resolved::NotFound);
        assert_eq!(resolve(&r, "/kvlab/", "/"), Resolved::NotFound);
    }

    #[test]
    fn mime_types() {
        for (name, mime) in [
            ("a.wasm", "application/wasm"),
            ("a.js", "text/javascript; charset=utf-8"),
            ("A.CSS", "text/css; charset=utf-8"),
            ("index.html", "text/html; charset=utf-8"),
            ("f.svg", "image/svg+xml"),
            ("f.png", "image/png"),
            ("d.json", "application/json"),
            ("favicon.ico", "image/x-icon"),
            ("noext", "application/octet-stream"),
        ] {
            assert_eq!(mime_type(Path::new(name)), mime, "{name}");
        }
    }

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn serves_files_with_types_and_refuses_escapes_over_http() {
        let dir = std::env::temp_dir().join(format!("kvlab-serve-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("site/pkg")).expect("mkdir");
        std::fs::write(dir.join("secret.txt"), "top secret").expect("write");
        std::fs::write(dir.join("site/index.html"), "<p>hi</p>").expect("write");
        std::fs::write(dir.join("site/pkg/m.wasm"), b"\0asm").expect("write");

        let server = start(&dir.join("site"), "/sub/", 0, true).expect("start");
        let index = get(server.addr, "/sub/");
        assert!(index.starts_with("HTTP/1.1 200"), "{index}");
        assert!(index.contains("text/html"), "{index}");
        assert!(index.ends_with("<p>hi</p>"), "{index}");
        let wasm = get(server.addr, "/sub/pkg/m.wasm");
        assert!(wasm.contains("Content-Type: application/wasm"), "{wasm}");
        assert!(get(server.addr, "/sub/nope.js").starts_with("HTTP/1.1 404"));
        assert!(get(server.addr, "/sub").starts_with("HTTP/1.1 301"));
        let escape = get(server.addr, "/sub/..%2fsecret.txt");
        assert!(escape.starts_with("HTTP/1.1 403"), "{escape}");
        assert!(!escape.contains("top secret"));
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

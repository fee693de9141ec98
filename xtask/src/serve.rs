//! A small static file server for `dist/` (`cargo xtask serve`, and the browser tests).
//!
//! It binds to 127.0.0.1 only, answers `GET` and `HEAD` (HTTP/1.1, connections kept open, one
//! thread per connection), sends the MIME types the page needs
//! (`.wasm` must be `application/wasm` for streaming compilation), and refuses any path that
//! would leave the served folder: the URL is percent-decoded first, then every segment is
//! checked, so `..%2f` and `%2e%2e/` are caught as well as a plain `../`.
//!
//! The site can be mounted under a prefix (e.g. `/kvlab/`): the browser tests use that to prove
//! the page works from any sub-path of a static host, because an absolute URL such as
//! `/pkg/kvlab.js` would then 404.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, ErrorKind, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

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

/// A connection that sends no request for this long is closed (the browser opens a new one).
const IDLE: Duration = Duration::from_secs(60);

/// The longest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;

/// A running server: its address and the thread that accepts connections.
pub struct Running {
    /// The address it listens on (127.0.0.1 and the bound port).
    pub addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    acceptor: JoinHandle<()>,
}

impl Running {
    /// The page's URL, e.g. `http://127.0.0.1:8000/kvlab/`.
    pub fn url(&self, prefix: &str) -> String {
        format!("http://{}{}", self.addr, prefix)
    }

    /// Blocks until the server stops (it does not stop by itself: this is for `serve`).
    pub fn join(self) {
        let _ = self.acceptor.join();
    }

    /// Stops accepting connections and returns once the accepting thread has ended
    /// (connections still open end with their clients).
    pub fn stop(self) {
        self.stopping.store(true, Ordering::SeqCst);
        // (wakes the accepting thread up, which then sees `stopping`)
        let _ = TcpStream::connect(self.addr);
        self.join();
    }
}

/// What is served, and how verbosely.
struct Site {
    root: PathBuf,
    prefix: String,
    quiet: bool,
}

/// Serves `root` mounted at `prefix` on 127.0.0.1:`port` (0 picks a free port), and returns at
/// once.
///
/// Each connection gets its own thread for as long as it is open: a browser keeps its
/// connections open between requests, and a pool of threads (tiny_http's, used here before)
/// could leave a new connection waiting behind those, which stalled a browser test's first
/// navigation for 30 s now and then.
pub fn start(root: &Path, prefix: &str, port: u16, quiet: bool) -> io::Result<Running> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .map_err(|e| io::Error::other(format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    let addr = listener.local_addr()?;
    let site = Arc::new(Site {
        root: root.to_path_buf(),
        prefix: prefix.to_string(),
        quiet,
    });
    let stopping = Arc::new(AtomicBool::new(false));
    let acceptor = {
        let stopping = stopping.clone();
        thread::spawn(move || {
            for connection in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                match connection {
                    Ok(stream) => {
                        let site = site.clone();
                        thread::spawn(move || match site.converse(stream) {
                            // (a browser that leaves a page closes its connections midway)
                            Err(e)
                                if !matches!(
                                    e.kind(),
                                    ErrorKind::BrokenPipe
                                        | ErrorKind::ConnectionReset
                                        | ErrorKind::ConnectionAborted
                                ) =>
                            {
                                eprintln!("serve: a connection failed: {e}");
                            }
                            _ => {}
                        });
                    }
                    Err(e) => eprintln!("serve: cannot accept a connection: {e}"),
                }
            }
        })
    };
    Ok(Running {
        addr,
        stopping,
        acceptor,
    })
}

/// One request's head, as far as a static file server needs it.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    method: String,
    target: String,
    /// Whether the connection stays open after the answer (HTTP/1.1 unless `Connection:
    /// close`; HTTP/1.0 only with `Connection: keep-alive`).
    keep_alive: bool,
}

/// Reads a request head. `Ok(None)`: the client closed the connection, or sent nothing for
/// [`IDLE`], before a request began. `Err` of kind `InvalidData`: not an HTTP request head.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut lines = Vec::new();
    let mut read = 0;
    loop {
        let mut line = String::new();
        let n = match reader.read_line(&mut line) {
            Ok(n) => n,
            Err(e)
                if read == 0 && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return if read == 0 {
                Ok(None)
            } else {
                Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "the request head ends early",
                ))
            };
        }
        read += n;
        if read > MAX_HEAD {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            if lines.is_empty() {
                continue; // (blank lines before a request line are allowed)
            }
            break;
        }
        lines.push(line.to_string());
    }
    let bad = || io::Error::new(ErrorKind::InvalidData, "not an HTTP request line");
    let mut parts = lines[0].split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(bad()),
    };
    let connection = lines[1..]
        .iter()
        .filter_map(|h| h.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("connection"))
        .map(|(_, v)| v.trim().to_ascii_lowercase());
    let keep_alive = match connection.as_deref() {
        Some(v) if v.contains("close") => false,
        Some(v) if v.contains("keep-alive") => true,
        _ => http11,
    };
    Ok(Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        keep_alive,
    }))
}

impl Site {
    /// Answers the requests of one connection in turn until either side closes it.
    fn converse(&self, stream: TcpStream) -> io::Result<()> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(IDLE))?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut writer = BufWriter::new(stream);
        loop {
            let head = match read_head(&mut reader) {
                Ok(Some(head)) => head,
                Ok(None) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::InvalidData => {
                    eprintln!("400 ({e})");
                    let body = "bad request";
                    respond(
                        &mut writer,
                        400,
                        &[("Content-Type", TEXT)],
                        body.len() as u64,
                        false,
                    )?;
                    writer.write_all(body.as_bytes())?;
                    return writer.flush();
                }
                Err(e) => return Err(e),
            };
            let began = Instant::now();
            let keep_alive = self.answer(&head, &mut writer)?;
            writer.flush()?;
            let took = began.elapsed();
            if took > SLOW_ANSWER {
                eprintln!(
                    "serve: {} took {} ms to answer",
                    head.target,
                    took.as_millis()
                );
            }
            if !keep_alive {
                return Ok(());
            }
        }
    }

    /// Writes the answer to one request; returns whether the connection stays open.
    fn answer(&self, head: &Head, out: &mut impl Write) -> io::Result<bool> {
        let url = &head.target;
        let with_body = head.method == "GET";
        if !with_body && head.method != "HEAD" {
            // (its body, if any, is not read: the connection closes)
            eprintln!("405 {} {url}", head.method);
            let body = "method not allowed";
            let headers = [("Content-Type", TEXT), ("Allow", "GET, HEAD")];
            respond(out, 405, &headers, body.len() as u64, false)?;
            out.write_all(body.as_bytes())?;
            return Ok(false);
        }
        let keep = head.keep_alive;
        let (status, body, location) = match resolve(&self.root, &self.prefix, url) {
            Resolved::File(path) => match File::open(&path) {
                Ok(mut file) if path.is_file() => {
                    let len = file.metadata()?.len();
                    let headers = [
                        ("Content-Type", mime_type(&path)),
                        ("Cache-Control", "no-store"),
                        ("X-Content-Type-Options", "nosniff"),
                    ];
                    respond(out, 200, &headers, len, keep)?;
                    if with_body {
                        io::copy(&mut file, out)?;
                    }
                    if !self.quiet {
                        eprintln!("200 {url}");
                    }
                    return Ok(keep);
                }
                _ => (404, "not found", None),
            },
            Resolved::Redirect(to) => (301, "moved", Some(to)),
            Resolved::NotFound => (404, "not found", None),
            Resolved::Forbidden => (403, "forbidden", None),
        };
        if !self.quiet || status >= 400 {
            eprintln!("{status} {url}");
        }
        let mut headers = vec![("Content-Type", TEXT)];
        if let Some(to) = &location {
            headers.push(("Location", to));
        }
        respond(out, status, &headers, body.len() as u64, keep)?;
        if with_body {
            out.write_all(body.as_bytes())?;
        }
        Ok(keep)
    }
}

/// The type of the server's own short answers.
const TEXT: &str = "text/plain; charset=utf-8";

/// Writes a status line and headers (with `Content-Length` and `Connection`).
fn respond(
    out: &mut impl Write,
    status: u16,
    headers: &[(&str, &str)],
    length: u64,
    keep_alive: bool,
) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        301 => "Moved Permanently",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "",
    };
    write!(out, "HTTP/1.1 {status} {reason}\r\n")?;
    for (name, value) in headers {
        write!(out, "{name}: {value}\r\n")?;
    }
    let connection = if keep_alive { "keep-alive" } else { "close" };
    write!(
        out,
        "Content-Length: {length}\r\nConnection: {connection}\r\n\r\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

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

    fn head_of(text: &str) -> io::Result<Option<Head>> {
        read_head(&mut io::Cursor::new(text.as_bytes()))
    }

    #[test]
    fn request_heads_and_whether_the_connection_stays_open() {
        let head = |t: &str| head_of(t).expect("a head").expect("a request");
        let h = head("GET /a?b HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(
            (h.method.as_str(), h.target.as_str(), h.keep_alive),
            ("GET", "/a?b", true)
        );
        assert!(!head("GET / HTTP/1.1\r\nconnection: Close\r\n\r\n").keep_alive);
        assert!(!head("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(head("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
        assert_eq!(head("\r\nHEAD / HTTP/1.1\r\n\r\n").method, "HEAD");
        // Closed before a request: no head; closed inside one, or not HTTP: errors.
        assert!(head_of("").expect("closed").is_none());
        assert_eq!(
            head_of("GET / HTTP/1.1\r\nHost").unwrap_err().kind(),
            ErrorKind::UnexpectedEof
        );
        for bad in [
            "GET /\r\n\r\n",
            "GET / HTTP/2\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(
                head_of(bad).unwrap_err().kind(),
                ErrorKind::InvalidData,
                "{bad:?}"
            );
        }
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(head_of(&long).unwrap_err().kind(), ErrorKind::InvalidData);
    }

    /// Reads one answer from a kept-open connection: (head, body).
    fn answer_on(s: &mut BufReader<TcpStream>) -> (String, Vec<u8>) {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            s.read_line(&mut line).expect("read");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|n| n.parse().ok())
            .expect("a Content-Length");
        let mut body = vec![0; length];
        s.read_exact(&mut body).expect("the body");
        (head, body)
    }

    fn site(name: &str) -> (PathBuf, Running) {
        let dir = std::env::temp_dir().join(format!("kvlab-serve-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("index.html"), "<p>hi</p>").expect("write");
        let server = start(&dir, "/", 0, true).expect("start");
        (dir, server)
    }

    #[test]
    fn a_kept_open_connection_answers_request_after_request() {
        let (dir, server) = site("keep");
        let stream = TcpStream::connect(server.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut w = stream.try_clone().expect("clone");
        let mut r = BufReader::new(stream);
        for _ in 0..3 {
            write!(w, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
            let (head, body) = answer_on(&mut r);
            assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
            assert!(head.contains("Connection: keep-alive"), "{head}");
            assert_eq!(body, b"<p>hi</p>");
        }
        // HEAD: the length of the body, and no body (the next answer follows at once).
        write!(
            w,
            "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\n\r\n"
        )
        .expect("send");
        let mut line = String::new();
        let mut head = String::new();
        while line != "\r\n" {
            line.clear();
            r.read_line(&mut line).expect("read");
            head.push_str(&line);
        }
        assert!(head.contains("Content-Length: 9\r\n"), "{head}");
        let (missing, body) = answer_on(&mut r);
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        assert_eq!(body, b"not found");
        // Another method: refused, naming the allowed ones, and the connection closes.
        write!(w, "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi").expect("send");
        let (refused, _) = answer_on(&mut r);
        assert!(
            refused.starts_with("HTTP/1.1 405") && refused.contains("Allow: GET, HEAD"),
            "{refused}"
        );
        let mut rest = Vec::new();
        assert_eq!(r.read_to_end(&mut rest).expect("closed"), 0);
        // Not HTTP: 400, closed.
        let mut s = TcpStream::connect(server.addr).expect("connect");
        s.write_all(b"hello\r\n\r\n").expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn new_connections_are_answered_while_others_stay_open() {
        // tiny_http's pool of threads (this server's before) left a connection accepted while
        // one pool thread was waiting, right behind another, unanswered until a thread freed
        // up: with idle connections held open by a browser, that was for minutes. Here each
        // connection has its own thread.
        let (dir, server) = site("open");
        let mut held = Vec::new();
        for _ in 0..8 {
            let mut s = TcpStream::connect(server.addr).expect("connect");
            write!(s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
            let mut r = BufReader::new(s.try_clone().expect("clone"));
            answer_on(&mut r);
            held.push(s);
        }
        for _ in 0..10 {
            held.pop(); // (one closes, as a browser's idle connection does)
            let pair: Vec<TcpStream> = (0..2)
                .map(|_| TcpStream::connect(server.addr).expect("connect"))
                .collect();
            for mut s in pair {
                s.set_read_timeout(Some(Duration::from_secs(2)))
                    .expect("timeout");
                write!(s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
                let (head, _) = answer_on(&mut BufReader::new(s.try_clone().expect("clone")));
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                held.push(s);
            }
        }
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

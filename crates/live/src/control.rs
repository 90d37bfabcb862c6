//! The control socket (`sluice stats`, `sluice reload`) and the Prometheus endpoint.
//!
//! The control socket is a Unix stream socket created with mode 0600 in a 0700 directory, and
//! every connection's peer credentials are checked: only the shaper's own user may talk to it.
//! One request per connection, one line: `stats`, `stats json`, `reload PATH`, `ping`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request from the control socket, answered by the shaper loop.
pub struct Request {
    /// The command line.
    pub line: String,
    /// Where the answer goes.
    pub reply: Sender<String>,
}

/// The default control socket path for this user.
pub fn default_path() -> PathBuf {
    let uid = nix::unistd::Uid::effective();
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/sluice-{uid}")));
    base.join("sluice-shape.sock")
}

/// Serve the control socket at `path` until `stop`; requests arrive on the returned channel.
pub fn serve(path: &Path, stop: Arc<AtomicBool>) -> std::io::Result<Receiver<Request>> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("another shaper is serving {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    let (tx, rx) = mpsc::channel();
    let me = nix::unistd::Uid::effective().as_raw();
    let owned = path.to_path_buf();
    std::thread::Builder::new().name("sluice-control".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((s, _)) => handle(s, me, &tx),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    // Wait for a connection without delaying it (a 20 ms sleep here skewed
                    // `measure`'s counter samples by up to 20 ms); look at `stop` every 100 ms.
                    use std::os::fd::AsFd;
                    let mut fds = [nix::poll::PollFd::new(listener.as_fd(), nix::poll::PollFlags::POLLIN)];
                    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u16));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = std::fs::remove_file(&owned);
    })?;
    Ok(rx)
}

fn handle(mut s: UnixStream, me: u32, tx: &Sender<Request>) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    match nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials) {
        Ok(c) if c.uid() == me => {}
        _ => {
            let _ = s.write_all(b"error: permission denied (not the shaper's owner)\n");
            return;
        }
    }
    let mut line = String::new();
    if BufReader::new(&s).take(4096).read_line(&mut line).is_err() {
        return;
    }
    let (rtx, rrx) = mpsc::channel();
    if tx.send(Request { line: line.trim().to_string(), reply: rtx }).is_err() {
        return;
    }
    let answer = rrx
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| "error: the shaper did not answer\n".into());
    let _ = s.write_all(answer.as_bytes());
}

/// Send one command to a running shaper and return its answer.
pub fn request(path: &Path, line: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        std::io::Error::new(e.kind(), format!("{}: {e} (is `sluice shape` running?)", path.display()))
    })?;
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    s.write_all(line.as_bytes())?;
    s.write_all(b"\n")?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Serve Prometheus text from `text` on a loopback address until `stop`.
pub fn serve_metrics(
    addr: SocketAddr,
    text: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("metrics listen only on loopback, not {addr}"),
        ));
    }
    let l = TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    std::thread::Builder::new().name("sluice-metrics".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                    let mut buf = [0u8; 2048];
                    let _ = s.read(&mut buf);
                    let body = text.lock().map(|t| t.clone()).unwrap_or_default();
                    let _ = write!(s, "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_is_owner_only_and_answers_one_line() {
        let dir = std::env::temp_dir().join(format!("sluice-ctl-test-{}", std::process::id()));
        let path = dir.join("s.sock");
        let stop = Arc::new(AtomicBool::new(false));
        let rx = serve(&path, stop.clone()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let t = std::thread::spawn(move || {
            let r = rx.recv_timeout(Duration::from_secs(5)).unwrap();
            r.reply.send(format!("got {}\n", r.line)).unwrap();
        });
        assert_eq!(request(&path, "stats json").unwrap(), "got stats json\n");
        t.join().unwrap();
        // A second server on the same live path is refused.
        assert!(serve(&path, stop.clone()).is_err());
        stop.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(100));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

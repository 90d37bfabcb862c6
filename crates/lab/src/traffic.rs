//! Built-in traffic: bulk TCP streams, UDP CBR and flood, isochronous UDP latency probes (like
//! irtt) and per-DSCP probes (like ping-exp). Each generator runs its threads inside the lab's
//! namespaces and every loop stops by itself at its deadline (blocking calls carry timeouts).
//!
//! Goodput is measured at the receiver over a window that starts after a warm-up, so TCP slow
//! start and queue filling do not count.

use crate::results::{FlowResult, Latency};
use crate::LabError;
use sluice_core::Rate;
use sluice_kernel::netns::spawn_in_netns;
use socket2::SockRef;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where traffic runs: two namespaces and the server's address.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// Namespace of the sending host for uploads.
    pub client_ns: String,
    /// Namespace of the far host.
    pub server_ns: String,
    /// The far host's address.
    pub server_addr: Ipv4Addr,
}

impl Endpoints {
    /// The lab's client and server.
    pub fn of_lab(lab: &crate::testbed::Lab) -> Endpoints {
        Endpoints {
            client_ns: lab.client_ns(),
            server_ns: lab.server_ns(),
            server_addr: crate::testbed::SERVER_ADDR.parse().expect("constant address"),
        }
    }
}

/// Which way data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client → server (through the shaper's egress toward the server).
    Up,
    /// Server → client.
    Down,
}

/// The time window over which receivers count.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Ignored start.
    pub warmup: Duration,
    /// Counted span after the warm-up.
    pub measure: Duration,
}

impl Window {
    /// Total run time.
    pub fn total(&self) -> Duration {
        self.warmup + self.measure
    }
}

/// What a receiver counted for one flow.
#[derive(Debug, Clone, Default)]
pub struct FlowCount {
    /// Flow name.
    pub name: String,
    /// Bytes counted in the window.
    pub bytes: u64,
    /// Window length in seconds.
    pub secs: f64,
    /// Datagrams sent (UDP only).
    pub sent: u64,
    /// Datagrams received in the whole run (UDP only).
    pub received: u64,
}

impl FlowCount {
    /// Goodput in bit/s.
    pub fn bps(&self) -> f64 {
        if self.secs > 0.0 {
            self.bytes as f64 * 8.0 / self.secs
        } else {
            0.0
        }
    }

    /// As a results-JSON flow.
    pub fn to_result(&self) -> FlowResult {
        let loss = if self.sent > 0 {
            100.0 * (self.sent.saturating_sub(self.received)) as f64 / self.sent as f64
        } else {
            0.0
        };
        FlowResult {
            name: self.name.clone(),
            achieved_bps: self.bps(),
            latency_ms: Latency::default(),
            jitter_ms: 0.0,
            loss_pct: loss,
            host: "client".into(),
            kind: if self.sent > 0 { "udp".into() } else { "tcp".into() },
            sent: self.sent,
            received: self.received,
        }
    }
}

const IO_TIMEOUT: Duration = Duration::from_millis(100);

fn dscp_to_tos(dscp: u8) -> u32 {
    ((dscp & 0x3f) as u32) << 2
}

/// Timeouts, would-block and interrupts: a bounded loop tries again.
fn is_transient(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

/// The one bounded loop every generator runs: `step` until `end` (or until it breaks). Transient
/// errors are retried; any other ends the loop and is returned. Every step blocks for at most
/// [`IO_TIMEOUT`] (or a pacing sleep that ends before `end`), so the loop stops by itself.
fn until(end: Instant, mut step: impl FnMut() -> io::Result<ControlFlow<()>>) -> io::Result<()> {
    while Instant::now() < end {
        match step() {
            Ok(ControlFlow::Continue(())) => {}
            Ok(ControlFlow::Break(())) => break,
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Read from `s` until `end`, counting bytes that arrive inside [`from`, `to`).
fn count_reader<R: Read>(s: &mut R, from: Instant, to: Instant, end: Instant) -> u64 {
    let mut buf = vec![0u8; 256 * 1024];
    let mut counted = 0u64;
    // A reset connection just ends the count.
    let _ = until(end, || {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(ControlFlow::Break(()));
        }
        let now = Instant::now();
        if now >= from && now < to {
            counted += n as u64;
        }
        Ok(ControlFlow::Continue(()))
    });
    counted
}

fn write_until<W: Write>(s: &mut W, end: Instant) {
    let buf = vec![0x5au8; 128 * 1024];
    let _ = until(end, || s.write(&buf).map(|_| ControlFlow::Continue(())));
}

/// Spawns a server in `ns` and waits until `bind` has its socket ready (or failed), so the
/// client never races the bind; then the server goes on with `run`.
fn start_server<S, T>(
    ns: &str,
    what: &str,
    addr: SocketAddrV4,
    bind: impl FnOnce() -> io::Result<S> + Send + 'static,
    run: impl FnOnce(S) -> Result<T, LabError> + Send + 'static,
) -> Result<JoinHandle<Result<T, LabError>>, LabError>
where
    T: Send + 'static,
{
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let server = spawn_in_netns(ns, move || match bind() {
        Ok(sock) => {
            let _ = ready_tx.send(Ok(()));
            run(sock)
        }
        Err(e) => {
            let _ = ready_tx.send(Err(e.to_string()));
            Err(LabError::Io(e))
        }
    })?;
    match ready_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(server),
        Ok(Err(e)) => Err(LabError::Setup(format!("{what} on {addr}: {e}"))),
        Err(_) => Err(LabError::Setup(format!("{what} did not start"))),
    }
}

/// Joins a generator thread; a panic becomes `what panicked`.
fn joined<T>(h: JoinHandle<Result<T, LabError>>, what: &str) -> Result<T, LabError> {
    h.join().map_err(|_| LabError::Lab(format!("{what} panicked")))?
}

/// Joins per-flow workers, in flow order (a panicked worker counted nothing).
fn join_counts(workers: Vec<JoinHandle<u64>>) -> Vec<u64> {
    workers.into_iter().map(|w| w.join().unwrap_or(0)).collect()
}

/// Sets the timeouts that bound every blocking call on a TCP stream.
fn bound_io(s: &TcpStream) -> io::Result<()> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))
}

/// `n` bulk TCP flows in direction `dir` on `port`, each marked with `dscp` if given.
pub fn bulk_tcp(
    ep: &Endpoints,
    n: usize,
    dir: Direction,
    dscp: Option<u8>,
    port: u16,
    win: Window,
) -> Result<Vec<FlowCount>, LabError> {
    bulk_tcp_cc(ep, n, dir, dscp, None, port, win)
}

/// [`bulk_tcp`] with the senders' congestion control set per socket (`TCP_CONGESTION`: "cubic",
/// "reno", "bbr"; `None`: the namespace's default).
pub fn bulk_tcp_cc(
    ep: &Endpoints,
    n: usize,
    dir: Direction,
    dscp: Option<u8>,
    cc: Option<&str>,
    port: u16,
    win: Window,
) -> Result<Vec<FlowCount>, LabError> {
    let cc: Option<Vec<u8>> = cc.map(|c| c.as_bytes().to_vec());
    let cc_server = cc.clone();
    let addr = SocketAddrV4::new(ep.server_addr, port);
    let start = Instant::now();
    let (from, to) = (start + win.warmup, start + win.total());
    let end = to + Duration::from_millis(200);
    let bind = move || {
        let l = TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        Ok(l)
    };
    let server = start_server(&ep.server_ns, "TCP server", addr, bind, move |l: TcpListener| {
        let mut workers = Vec::new();
        let accept_until = start + Duration::from_secs(3).min(win.total());
        until(accept_until, || {
            if workers.len() >= n {
                return Ok(ControlFlow::Break(()));
            }
            let mut s = match l.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2));
                    return Ok(ControlFlow::Continue(()));
                }
                Err(e) => return Err(e),
            };
            s.set_nonblocking(false)?;
            bound_io(&s)?;
            if let Some(d) = dscp {
                let _ = SockRef::from(&s).set_tos(dscp_to_tos(d));
            }
            if let (Some(c), Direction::Down) = (&cc_server, dir) {
                SockRef::from(&s).set_tcp_congestion(c)?;
            }
            workers.push(std::thread::spawn(move || match dir {
                Direction::Up => count_reader(&mut s, from, to, end),
                Direction::Down => {
                    write_until(&mut s, to);
                    0
                }
            }));
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(join_counts(workers))
    })?;
    let client = spawn_in_netns(&ep.client_ns, move || {
        let mut workers = Vec::new();
        for _ in 0..n {
            let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            if let Some(d) = dscp {
                sock.set_tos(dscp_to_tos(d))?;
            }
            if let (Some(c), Direction::Up) = (&cc, dir) {
                sock.set_tcp_congestion(c)?;
            }
            sock.connect_timeout(&SocketAddr::V4(addr).into(), Duration::from_secs(2))?;
            let mut s: TcpStream = sock.into();
            bound_io(&s)?;
            workers.push(std::thread::spawn(move || match dir {
                Direction::Up => {
                    write_until(&mut s, to);
                    0
                }
                Direction::Down => count_reader(&mut s, from, to, end),
            }));
        }
        Ok(join_counts(workers))
    })?;
    let c = joined(client, "client thread");
    let s = joined(server, "server thread");
    let (c, s) = (c?, s?);
    let counts = if dir == Direction::Up { s } else { c };
    let secs = win.measure.as_secs_f64();
    let tag = if dir == Direction::Up { "up" } else { "down" };
    Ok((0..n)
        .map(|i| FlowCount {
            name: format!("tcp-{tag}-{}", i + 1),
            bytes: counts.get(i).copied().unwrap_or(0),
            secs,
            sent: 0,
            received: 0,
        })
        .collect())
}

/// A UDP stream client → server of `size`-byte datagrams at `rate` (None: as fast as possible).
pub fn udp_stream(
    ep: &Endpoints,
    rate: Option<Rate>,
    size: usize,
    dscp: Option<u8>,
    port: u16,
    win: Window,
    name: &str,
) -> Result<FlowCount, LabError> {
    let size = size.clamp(16, 65507);
    let addr = SocketAddrV4::new(ep.server_addr, port);
    let start = Instant::now();
    let (from, to) = (start + win.warmup, start + win.total());
    let end = to + Duration::from_millis(300);
    let bind = move || {
        let s = UdpSocket::bind(addr)?;
        let _ = SockRef::from(&s).set_recv_buffer_size(4 << 20);
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        Ok(s)
    };
    let server = start_server(&ep.server_ns, "UDP sink", addr, bind, move |s: UdpSocket| {
        let mut buf = vec![0u8; 65536];
        let (mut bytes, mut received) = (0u64, 0u64);
        until(end, || {
            let n = s.recv(&mut buf)?;
            received += 1;
            let now = Instant::now();
            if now >= from && now < to {
                bytes += n as u64;
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok((bytes, received))
    })?;
    let client = spawn_in_netns(&ep.client_ns, move || {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        if let Some(d) = dscp {
            SockRef::from(&s).set_tos(dscp_to_tos(d))?;
        }
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        s.connect(addr)?;
        let gap = rate.map(|r| r.time_to_send(size as u64 + 28).as_nanos());
        let mut buf = vec![0u8; size];
        let mut sent = 0u64;
        let t0 = Instant::now();
        until(to, || {
            if let Some(gap) = gap {
                // Pace on an absolute schedule: a late wake-up is caught up, never accumulated.
                let due = t0 + Duration::from_nanos(gap.saturating_mul(sent));
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            buf[..8].copy_from_slice(&sent.to_be_bytes());
            match s.send(&buf) {
                Ok(_) => sent += 1,
                // ENOBUFS / ECONNREFUSED on a flood: keep going until the deadline.
                Err(e) if !is_transient(&e) => std::thread::yield_now(),
                Err(_) => {}
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(sent)
    })?;
    let sent = joined(client, "UDP sender")?;
    let (bytes, received) = joined(server, "UDP sink")?;
    Ok(FlowCount { name: name.to_string(), bytes, secs: win.measure.as_secs_f64(), sent, received })
}

/// Isochronous UDP probes (irtt-like): one `size`-byte probe every `interval`, echoed by the
/// server; RTT per probe, loss, jitter.
#[derive(Debug, Clone)]
pub struct ProbeResult {
    /// Name (`probe` or `probe-dscp46`).
    pub name: String,
    /// Probes sent.
    pub sent: u64,
    /// RTT of each answered probe, ms, in send order.
    pub rtts_ms: Vec<f64>,
}

impl ProbeResult {
    /// Loss percentage.
    pub fn loss_pct(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        100.0 * (self.sent - self.rtts_ms.len() as u64) as f64 / self.sent as f64
    }

    /// Mean absolute difference of consecutive RTTs (irtt's IPDV, un-smoothed).
    pub fn jitter_ms(&self) -> f64 {
        if self.rtts_ms.len() < 2 {
            return 0.0;
        }
        let s: f64 = self.rtts_ms.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
        s / (self.rtts_ms.len() - 1) as f64
    }

    /// As a results-JSON flow.
    pub fn to_result(&self) -> FlowResult {
        FlowResult {
            name: self.name.clone(),
            achieved_bps: 0.0,
            latency_ms: crate::results::latency_from_samples(&self.rtts_ms),
            jitter_ms: self.jitter_ms(),
            loss_pct: self.loss_pct(),
            host: "client".into(),
            kind: "probe".into(),
            sent: self.sent,
            received: self.rtts_ms.len() as u64,
        }
    }
}

/// Probe for `duration`; replies later than 1 s count as lost.
pub fn probes(
    ep: &Endpoints,
    interval: Duration,
    size: usize,
    dscp: Option<u8>,
    port: u16,
    duration: Duration,
) -> Result<ProbeResult, LabError> {
    let size = size.clamp(16, 1472);
    let addr = SocketAddrV4::new(ep.server_addr, port);
    let start = Instant::now();
    let send_end = start + duration;
    let end = send_end + Duration::from_secs(1);
    let bind = move || {
        let s = UdpSocket::bind(addr)?;
        if let Some(d) = dscp {
            SockRef::from(&s).set_tos(dscp_to_tos(d))?;
        }
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        Ok(s)
    };
    let server = start_server(&ep.server_ns, "probe echo", addr, bind, move |s: UdpSocket| {
        let mut buf = [0u8; 2048];
        until(end, || {
            let (n, from) = s.recv_from(&mut buf)?;
            let _ = s.send_to(&buf[..n], from);
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(())
    })?;
    let client = spawn_in_netns(&ep.client_ns, move || {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        if let Some(d) = dscp {
            SockRef::from(&s).set_tos(dscp_to_tos(d))?;
        }
        s.connect(addr)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        let rx = s.try_clone()?;
        let epoch = Instant::now();
        let receiver = std::thread::spawn(move || {
            let mut got: Vec<(u64, f64)> = Vec::new();
            let mut buf = [0u8; 2048];
            // Short datagrams and errors alike are passed over until the deadline.
            let _ = until(end, || {
                if let Ok(16..) = rx.recv(&mut buf) {
                    let now_ns = epoch.elapsed().as_nanos() as u64;
                    let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or([0; 8]));
                    let sent_ns = u64::from_be_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
                    if now_ns >= sent_ns {
                        got.push((seq, (now_ns - sent_ns) as f64 / 1e6));
                    }
                }
                Ok(ControlFlow::Continue(()))
            });
            got
        });
        let mut buf = vec![0u8; size];
        let mut seq = 0u64;
        loop {
            let due = epoch + interval * seq as u32;
            if due >= send_end {
                break;
            }
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            buf[..8].copy_from_slice(&seq.to_be_bytes());
            buf[8..16].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_be_bytes());
            let _ = s.send(&buf);
            seq += 1;
        }
        let mut got = receiver.join().unwrap_or_default();
        got.sort_by_key(|g| g.0);
        got.dedup_by_key(|g| g.0);
        Ok((seq, got.into_iter().map(|g| g.1).collect::<Vec<f64>>()))
    })?;
    let (sent, rtts_ms) = joined(client, "prober")?;
    joined(server, "echo")?;
    let name = match dscp {
        Some(d) => format!("probe-dscp{d}"),
        None => "probe".into(),
    };
    Ok(ProbeResult { name, sent, rtts_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_and_loss_from_samples() {
        let p = ProbeResult { name: "p".into(), sent: 4, rtts_ms: vec![1.0, 3.0, 2.0] };
        assert_eq!(p.loss_pct(), 25.0);
        assert_eq!(p.jitter_ms(), 1.5);
        let f = p.to_result();
        assert_eq!(f.latency_ms.max, 3.0);
    }

    #[test]
    fn dscp_goes_in_the_top_six_bits() {
        assert_eq!(dscp_to_tos(46), 0xb8);
        assert_eq!(dscp_to_tos(8), 0x20);
    }
}

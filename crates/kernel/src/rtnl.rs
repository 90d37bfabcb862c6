//! Lab setup through netlink instead of `ip` and `ethtool`: named network namespaces (the
//! `/run/netns` bind mounts `ip netns` uses, so both tools see the same namespaces), veth pairs
//! across namespaces, bridges, link state, IPv4 addresses, permanent neighbours (rtnetlink, the
//! messages built with `netlink-packet-route`), and offloads (the kernel's ethtool generic-netlink
//! family; the rust-netlink `ethtool` crate is asynchronous only, so its few attributes are
//! written here).
//!
//! Every function that names a namespace runs on a thread inside it ([`crate::netns::in_netns`]).

use crate::netlink::{attrs, find, kernel_error, parse_ack, u32_at};
use crate::netns::{in_netns, NETNS_DIR};
use crate::Error;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE,
    NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{
    InfoBridge, InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_GENERIC, protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

/// A netlink socket of one protocol in the calling thread's namespace, one request at a time.
struct Sock {
    sock: Socket,
    seq: u32,
}

impl Sock {
    fn open(protocol: isize) -> Result<Sock, Error> {
        let mut sock = Socket::new(protocol).map_err(Error::Io)?;
        sock.bind_auto().map_err(Error::Io)?;
        let _ = sock.set_ext_ack(true);
        let _ = sock.set_cap_ack(true);
        sock.connect(&SocketAddr::new(0, 0)).map_err(Error::Io)?;
        Ok(Sock { sock, seq: 0 })
    }

    /// Sends `bytes` (a whole request, its sequence number filled in here) and returns the
    /// (type, body) of each reply until the ack; a refusal is [`Error::Kernel`].
    fn call(&mut self, mut bytes: Vec<u8>) -> Result<Vec<(u16, Vec<u8>)>, Error> {
        self.seq += 1;
        let len = bytes.len() as u32;
        bytes[0..4].copy_from_slice(&len.to_ne_bytes());
        bytes[8..12].copy_from_slice(&self.seq.to_ne_bytes());
        self.sock.send(&bytes, 0).map_err(Error::Io)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = self.sock.recv(&mut &mut buf[..], 0).map_err(Error::Io)?;
            let mut off = 0;
            while off + 16 <= n {
                let len = u32_at(&buf, off).unwrap_or(0) as usize;
                if len < 16 || off + len > n {
                    break;
                }
                let ty = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
                let fl = u16::from_ne_bytes([buf[off + 6], buf[off + 7]]);
                let seq = u32_at(&buf, off + 8).unwrap_or(0);
                let body = &buf[off + 16..off + len];
                off += (len + 3) & !3;
                if seq != self.seq {
                    continue;
                }
                match ty {
                    NLMSG_ERROR => {
                        return match parse_ack(fl, body) {
                            (0, _) => Ok(out),
                            (errno, message) => Err(kernel_error(errno, message)),
                        }
                    }
                    NLMSG_DONE => return Ok(out),
                    _ => out.push((ty, body.to_vec())),
                }
            }
        }
    }

    /// An rtnetlink request with `flags` (REQUEST and ACK added).
    fn route(&mut self, msg: RouteNetlinkMessage, flags: u16) -> Result<Vec<(u16, Vec<u8>)>, Error> {
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        let mut m = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        m.finalize();
        let mut bytes = vec![0u8; m.buffer_len()];
        m.serialize(&mut bytes);
        self.call(bytes)
    }
}

fn route_sock() -> Result<Sock, Error> {
    Sock::open(NETLINK_ROUTE)
}

/// The index of `name` in the calling thread's namespace.
fn index(s: &mut Sock, name: &str) -> Result<u32, Error> {
    let mut m = LinkMessage::default();
    m.attributes.push(LinkAttribute::IfName(name.to_string()));
    let replies = s.route(RouteNetlinkMessage::GetLink(m), 0).map_err(|e| match e {
        Error::Kernel { errno: 19, .. } => Error::NoDevice(name.to_string()),
        e => e,
    })?;
    replies
        .iter()
        .find(|(ty, b)| *ty == 16 && b.len() >= 8)
        .map(|(_, b)| u32::from_ne_bytes([b[4], b[5], b[6], b[7]]))
        .ok_or_else(|| Error::NoDevice(name.to_string()))
}

fn mac_bytes(mac: &str) -> Result<Vec<u8>, Error> {
    let b: Vec<u8> = mac.split(':').filter_map(|x| u8::from_str_radix(x, 16).ok()).collect();
    if b.len() == 6 {
        Ok(b)
    } else {
        Err(Error::Setup(format!("bad MAC address {mac}")))
    }
}

fn netns_path(name: &str) -> String {
    format!("{NETNS_DIR}/{name}")
}

/// Creates the named namespace `name` (as `ip netns add`: a new network namespace bind-mounted
/// on `/run/netns/NAME`).
pub fn netns_add(name: &str) -> Result<(), Error> {
    std::fs::create_dir_all(NETNS_DIR).map_err(Error::Io)?;
    let path = netns_path(name);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Error::Netns(format!("cannot create {path}: {e}")))?;
    let p = path.clone();
    let made = std::thread::spawn(move || -> Result<(), Error> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| Error::Netns(format!("unshare: {e}")))?;
        nix::mount::mount(
            Some("/proc/thread-self/ns/net"),
            p.as_str(),
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| Error::Netns(format!("bind mount on {p}: {e}")))
    })
    .join()
    .map_err(|_| Error::Netns("a namespace thread panicked".into()))?;
    if made.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    made
}

/// Removes the named namespace `name` (as `ip netns del`); its interfaces go with it once no
/// process holds it.
pub fn netns_del(name: &str) -> Result<(), Error> {
    let path = netns_path(name);
    nix::mount::umount2(path.as_str(), nix::mount::MntFlags::MNT_DETACH)
        .map_err(|e| Error::Netns(format!("umount {path}: {e}")))?;
    std::fs::remove_file(&path).map_err(|e| Error::Netns(format!("remove {path}: {e}")))
}

/// Creates a veth pair: `name` (with `mac` if given) in namespace `ns`, its peer `peer` (with
/// `peer_mac`) in namespace `peer_ns`.
pub fn veth(
    ns: &str,
    name: &str,
    mac: Option<&str>,
    peer_ns: &str,
    peer: &str,
    peer_mac: Option<&str>,
) -> Result<(), Error> {
    let peer_fd = File::open(netns_path(peer_ns))
        .map_err(|e| Error::Netns(format!("cannot open {}: {e}", netns_path(peer_ns))))?;
    let mut p = LinkMessage::default();
    p.attributes.push(LinkAttribute::IfName(peer.to_string()));
    if let Some(m) = peer_mac {
        p.attributes.push(LinkAttribute::Address(mac_bytes(m)?));
    }
    p.attributes.push(LinkAttribute::NetNsFd(peer_fd.as_raw_fd()));
    let mut l = LinkMessage::default();
    l.attributes.push(LinkAttribute::IfName(name.to_string()));
    if let Some(m) = mac {
        l.attributes.push(LinkAttribute::Address(mac_bytes(m)?));
    }
    l.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Veth),
        LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(p))),
    ]));
    in_netns(Some(ns), move || {
        let _keep = peer_fd;
        route_sock()?.route(RouteNetlinkMessage::NewLink(l), NLM_F_CREATE | NLM_F_EXCL).map(|_| ())
    })
}

/// Creates bridge `name` in `ns` with a forward delay of 0 (ports forward at once).
pub fn bridge_add(ns: &str, name: &str) -> Result<(), Error> {
    let mut l = LinkMessage::default();
    l.attributes.push(LinkAttribute::IfName(name.to_string()));
    l.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Bridge),
        LinkInfo::Data(InfoData::Bridge(vec![InfoBridge::ForwardDelay(0)])),
    ]));
    in_netns(Some(ns), move || {
        route_sock()?.route(RouteNetlinkMessage::NewLink(l), NLM_F_CREATE | NLM_F_EXCL).map(|_| ())
    })
}

/// Deletes link `name` in `ns`.
pub fn link_del(ns: &str, name: &str) -> Result<(), Error> {
    let name = name.to_string();
    in_netns(Some(ns), move || {
        let mut s = route_sock()?;
        let mut l = LinkMessage::default();
        l.header.index = index(&mut s, &name)?;
        s.route(RouteNetlinkMessage::DelLink(l), 0).map(|_| ())
    })
}

/// Whether link `name` exists in `ns`.
pub fn link_exists(ns: &str, name: &str) -> Result<bool, Error> {
    let name = name.to_string();
    in_netns(Some(ns), move || match index(&mut route_sock()?, &name) {
        Ok(_) => Ok(true),
        Err(Error::NoDevice(_)) => Ok(false),
        Err(e) => Err(e),
    })
}

/// Sets link `name` in `ns` up, promiscuous if `promisc`, and a port of `master` if given.
pub fn link_set(ns: &str, name: &str, promisc: bool, master: Option<&str>) -> Result<(), Error> {
    let (name, master) = (name.to_string(), master.map(str::to_string));
    in_netns(Some(ns), move || {
        let mut s = route_sock()?;
        let mut l = LinkMessage::default();
        l.header.index = index(&mut s, &name)?;
        if let Some(m) = master {
            let mut port = l.clone();
            port.attributes.push(LinkAttribute::Controller(index(&mut s, &m)?));
            s.route(RouteNetlinkMessage::SetLink(port), 0)?;
        }
        let flags = if promisc { LinkFlags::Up | LinkFlags::Promisc } else { LinkFlags::Up };
        l.header.flags = flags;
        l.header.change_mask = flags;
        s.route(RouteNetlinkMessage::SetLink(l), 0).map(|_| ())
    })
}

/// Adds `addr/prefix` to link `dev` in `ns`.
pub fn addr_add(ns: &str, dev: &str, addr: Ipv4Addr, prefix: u8) -> Result<(), Error> {
    let dev = dev.to_string();
    in_netns(Some(ns), move || {
        let mut s = route_sock()?;
        let mut a = AddressMessage::default();
        a.header.family = AddressFamily::Inet;
        a.header.prefix_len = prefix;
        a.header.index = index(&mut s, &dev)?;
        a.attributes.push(AddressAttribute::Local(addr.into()));
        a.attributes.push(AddressAttribute::Address(addr.into()));
        s.route(RouteNetlinkMessage::NewAddress(a), NLM_F_CREATE | NLM_F_EXCL).map(|_| ())
    })
}

/// A permanent neighbour entry `addr` → `mac` on `dev` in `ns` (replacing any other).
pub fn neigh_permanent(ns: &str, dev: &str, addr: Ipv4Addr, mac: &str) -> Result<(), Error> {
    let (dev, mac) = (dev.to_string(), mac_bytes(mac)?);
    in_netns(Some(ns), move || {
        let mut s = route_sock()?;
        let mut n = NeighbourMessage::default();
        n.header.family = AddressFamily::Inet;
        n.header.ifindex = index(&mut s, &dev)?;
        n.header.state = NeighbourState::Permanent;
        n.attributes.push(NeighbourAttribute::Destination(NeighbourAddress::Inet(addr)));
        n.attributes.push(NeighbourAttribute::LinkLayerAddress(mac));
        s.route(RouteNetlinkMessage::NewNeighbour(n), NLM_F_CREATE | NLM_F_REPLACE).map(|_| ())
    })
}

/// The ethtool generic-netlink family (linux/ethtool_netlink.h).
mod ethtool {
    pub const GENL_ID_CTRL: u16 = 0x10;
    pub const CTRL_CMD_GETFAMILY: u8 = 3;
    pub const CTRL_ATTR_FAMILY_ID: u16 = 1;
    pub const CTRL_ATTR_FAMILY_NAME: u16 = 2;
    pub const MSG_FEATURES_GET: u8 = 11;
    pub const MSG_FEATURES_SET: u8 = 12;
    pub const A_FEATURES_HEADER: u16 = 1;
    pub const A_FEATURES_HW: u16 = 2;
    pub const A_FEATURES_WANTED: u16 = 3;
    pub const A_FEATURES_ACTIVE: u16 = 4;
    pub const A_HEADER_DEV_NAME: u16 = 2;
    pub const A_BITSET_NOMASK: u16 = 1;
    pub const A_BITSET_BITS: u16 = 3;
    pub const A_BITSETS_BIT: u16 = 1;
    pub const A_BIT_NAME: u16 = 2;
    pub const A_BIT_VALUE: u16 = 3;
    pub const NLA_F_NESTED: u16 = 0x8000;
}

/// Whether `ethtool -K DEV tx off tso off gso off gro off` turns feature `name` off: every
/// transmit checksum, every TCP segmentation offload (the kernel adds some: 6.18 has
/// `tx-tcp-accecn-segmentation`), generic segmentation and GRO.
pub fn is_offload(name: &str) -> bool {
    name.starts_with("tx-checksum-")
        || (name.starts_with("tx-tcp") && name.ends_with("-segmentation"))
        || name == "tx-generic-segmentation"
        || name == "rx-gro"
}

/// A generic-netlink request: `nlmsghdr`, `genlmsghdr` (command, version 1), then `attrs`.
fn genl(family: u16, cmd: u8, attrs: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + attrs.len());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&family.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    b.extend_from_slice(&[0u8; 8]);
    b.extend_from_slice(&[cmd, 1, 0, 0]);
    b.extend_from_slice(attrs);
    b
}

/// One attribute, padded.
fn nla(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + payload.len() + 3);
    b.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    b.extend_from_slice(&ty.to_ne_bytes());
    b.extend_from_slice(payload);
    while b.len() % 4 != 0 {
        b.push(0);
    }
    b
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn ethtool_family(s: &mut Sock) -> Result<u16, Error> {
    let req = genl(
        ethtool::GENL_ID_CTRL,
        ethtool::CTRL_CMD_GETFAMILY,
        &nla(ethtool::CTRL_ATTR_FAMILY_NAME, &cstr("ethtool")),
    );
    let replies =
        s.call(req).map_err(|e| Error::Setup(format!("the kernel's ethtool netlink family: {e}")))?;
    replies
        .iter()
        .filter_map(|(_, b)| b.get(4..).and_then(|a| find(a, ethtool::CTRL_ATTR_FAMILY_ID)))
        .find_map(|id| id.get(0..2).map(|x| u16::from_ne_bytes([x[0], x[1]])))
        .ok_or_else(|| Error::Setup("the kernel has no ethtool netlink family".into()))
}

fn features_header(dev: &str) -> Vec<u8> {
    nla(ethtool::A_FEATURES_HEADER | ethtool::NLA_F_NESTED, &nla(ethtool::A_HEADER_DEV_NAME, &cstr(dev)))
}

/// Turns the offloads ([`is_offload`]) that `dev` in `ns` can change off, as `ethtool -K DEV tx
/// off tso off gso off gro off` does.
pub fn offloads_off(ns: &str, dev: &str) -> Result<(), Error> {
    let dev = dev.to_string();
    in_netns(Some(ns), move || {
        let mut s = Sock::open(NETLINK_GENERIC)?;
        let family = ethtool_family(&mut s)?;
        let changeable = features(&mut s, family, &dev, ethtool::A_FEATURES_HW)?;
        // A verbose bitset without NOMASK: each named bit is set to its value (absent: off).
        let mut bits = Vec::new();
        for name in changeable.iter().filter(|n| is_offload(n)) {
            bits.extend(nla(
                ethtool::A_BITSETS_BIT | ethtool::NLA_F_NESTED,
                &nla(ethtool::A_BIT_NAME, &cstr(name)),
            ));
        }
        let wanted = nla(
            ethtool::A_FEATURES_WANTED | ethtool::NLA_F_NESTED,
            &nla(ethtool::A_BITSET_BITS | ethtool::NLA_F_NESTED, &bits),
        );
        let mut a = features_header(&dev);
        a.extend(wanted);
        s.call(genl(family, ethtool::MSG_FEATURES_SET, &a))
            .map(|_| ())
            .map_err(|e| Error::Setup(format!("turning offloads off on {dev}: {e}")))
    })
}

/// The names of the features active on `dev` in `ns` (as `ethtool -k` lists them "on").
pub fn active_features(ns: &str, dev: &str) -> Result<Vec<String>, Error> {
    let dev = dev.to_string();
    in_netns(Some(ns), move || {
        let mut s = Sock::open(NETLINK_GENERIC)?;
        let family = ethtool_family(&mut s)?;
        features(&mut s, family, &dev, ethtool::A_FEATURES_ACTIVE)
    })
}

/// The names of the bits set in bitset `which` (`ETHTOOL_A_FEATURES_HW`: the features the device
/// can change; `_ACTIVE`: those on) of `dev`.
fn features(s: &mut Sock, family: u16, dev: &str, which: u16) -> Result<Vec<String>, Error> {
    let replies = s.call(genl(family, ethtool::MSG_FEATURES_GET, &features_header(dev)))?;
    let mut out = Vec::new();
    for (_, body) in &replies {
        let Some(set) = body.get(4..).and_then(|a| find(a, which)) else { continue };
        let Some(bits) = find(set, ethtool::A_BITSET_BITS) else { continue };
        // A bitset without a mask (NOMASK) lists set bits; one with a mask flags each value.
        let nomask = find(set, ethtool::A_BITSET_NOMASK).is_some();
        for bit in attrs(bits).filter(|b| b.ty == ethtool::A_BITSETS_BIT) {
            let on = nomask || find(bit.data, ethtool::A_BIT_VALUE).is_some();
            if let (true, Some(n)) = (on, find(bit.data, ethtool::A_BIT_NAME)) {
                out.push(String::from_utf8_lossy(n).trim_end_matches('\0').to_string());
            }
        }
    }
    Ok(out)
}

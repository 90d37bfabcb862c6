//! The lab: three network namespaces joined by veth pairs.
//!
//! ```text
//!  client ns              shaper ns                          server ns
//!  slc-c 198.18.0.1 ── slc-sc  [bridge | sluice]  slc-ss ──(modem ns: tbf)── slc-s 198.18.0.2
//! ```
//! Client and server share one /24, so the path through the shaper is layer 2: the kernel
//! backend and the `none` baseline bridge the two shaper ports with a kernel bridge (`slc-br`);
//! the Sluice backend removes the bridge and forwards frames itself. IP forwarding stays off in
//! the shaper namespace either way. MAC addresses are fixed and neighbours are permanent, so no
//! ARP crosses the shaper. IPv6 is disabled in every lab namespace to keep the path quiet.
//!
//! Every name starts with `slc-`: namespaces are `slc-<tag>-{cli,shp,mdm,srv}`, which is how
//! `down` (and `up`, before it builds) finds leftovers of a crashed run.

use crate::LabError;
use sluice_core::{Rate, Span};
use sluice_kernel::netns;
use sluice_kernel::{kernel, rtnl};
use sluice_tc::burst::BurstPolicy;
use sluice_tc::model::State;

/// Whether [`Lab::up`] can build a lab with `opts` here: network namespaces (root). Everything
/// is set up through netlink ([`sluice_kernel::rtnl`]): neither `ip` nor `ethtool` is needed. Tests skip
/// loudly on `Err`.
pub fn testbed_available(_opts: &LabOptions) -> Result<(), String> {
    netns::netns_available()
}

/// Client address.
pub const CLIENT_ADDR: &str = "198.18.0.1";
/// Server address.
pub const SERVER_ADDR: &str = "198.18.0.2";
const CLIENT_MAC: &str = "02:53:4c:00:00:01";
const SERVER_MAC: &str = "02:53:4c:00:00:02";
/// Client interface (client ns).
pub const IF_CLIENT: &str = "slc-c";
/// Shaper interface facing the client.
pub const IF_SHAPER_CLIENT: &str = "slc-sc";
/// Shaper interface facing the server: its egress carries uploads (client → server).
pub const IF_SHAPER_SERVER: &str = "slc-ss";
/// Server interface (server ns).
pub const IF_SERVER: &str = "slc-s";
const IF_BRIDGE: &str = "slc-br";
const IF_MODEM_SHAPER: &str = "slc-ms";
const IF_MODEM_SERVER: &str = "slc-mv";
const IF_MODEM_BRIDGE: &str = "slc-mbr";

/// Options for `lab up`.
#[derive(Debug, Clone, Default)]
pub struct LabOptions {
    /// Emulate a slower access link with kernel tbf at this rate, in both directions.
    pub modem: Option<Rate>,
    /// Keep TSO/GSO/GRO and checksum offloads on: super-packets and partial checksums cross the
    /// shaper (the live shaper forwards them with their offload headers).
    pub offloads: bool,
}

/// How the shaper namespace moves frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathMode {
    /// A kernel bridge joins the two shaper ports (kernel and none backends).
    Bridge,
    /// Nothing: a user-space forwarder (Sluice) must move frames.
    Open,
}

/// One lab, named by a short tag so tests can run several side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lab {
    tag: String,
}

/// What `lab status` reports.
#[derive(Debug, Clone)]
pub struct LabStatus {
    /// Namespaces of this lab that exist.
    pub namespaces: Vec<String>,
    /// Whether every namespace is there.
    pub complete: bool,
    /// Path mode, if the shaper namespace exists.
    pub path: Option<PathMode>,
    /// Modem rate, if present.
    pub modem: Option<String>,
    /// Kernel qdiscs on the shaper's server-facing port.
    pub shaper_qdiscs: Vec<String>,
    /// Other `slc-*` namespaces (other labs or leftovers).
    pub others: Vec<String>,
}

impl Lab {
    /// The default lab (`slc-lab-*`).
    pub fn default_lab() -> Lab {
        Lab { tag: "lab".into() }
    }

    /// A lab with `tag` (1–8 lowercase letters or digits).
    pub fn new(tag: &str) -> Result<Lab, LabError> {
        if tag.is_empty()
            || tag.len() > 8
            || !tag.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            return Err(LabError::Lab(format!("lab tag `{tag}` must be 1-8 lowercase letters or digits")));
        }
        Ok(Lab { tag: tag.into() })
    }

    /// Its tag.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    fn ns(&self, role: &str) -> String {
        format!("slc-{}-{role}", self.tag)
    }
    /// Client namespace.
    pub fn client_ns(&self) -> String {
        self.ns("cli")
    }
    /// Shaper namespace.
    pub fn shaper_ns(&self) -> String {
        self.ns("shp")
    }
    /// Server namespace.
    pub fn server_ns(&self) -> String {
        self.ns("srv")
    }
    /// Modem namespace (present only with a modem).
    pub fn modem_ns(&self) -> String {
        self.ns("mdm")
    }

    fn prefix(&self) -> String {
        format!("slc-{}-", self.tag)
    }

    /// Namespaces of this lab that exist now.
    pub fn existing(&self) -> Vec<String> {
        let p = self.prefix();
        netns::list_netns().into_iter().filter(|n| n.starts_with(&p)).collect()
    }

    /// Build the lab (removing leftovers of an earlier run first). Returns the leftovers removed.
    pub fn up(&self, opts: &LabOptions) -> Result<Vec<String>, LabError> {
        if let Err(why) = testbed_available(opts) {
            return Err(LabError::Setup(why));
        }
        let leftovers = self.down()?;
        let r = self.build(opts);
        if r.is_err() {
            let _ = self.down();
        }
        r.map(|_| leftovers)
    }

    fn build(&self, opts: &LabOptions) -> Result<(), LabError> {
        let (cli, shp, srv, mdm) = (self.client_ns(), self.shaper_ns(), self.server_ns(), self.modem_ns());
        let mut all = vec![cli.clone(), shp.clone(), srv.clone()];
        if opts.modem.is_some() {
            all.push(mdm.clone());
        }
        for ns in &all {
            rtnl::netns_add(ns)?;
            rtnl::link_set(ns, "lo", false, None)?;
            netns::in_netns(Some(ns), move || {
                for (path, v) in [
                    ("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1"),
                    ("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1"),
                ] {
                    // Absent when IPv6 is compiled out: nothing to quiet then.
                    let _ = std::fs::write(path, v);
                }
                Ok(())
            })?;
        }
        rtnl::veth(&cli, IF_CLIENT, Some(CLIENT_MAC), &shp, IF_SHAPER_CLIENT, None)?;
        if opts.modem.is_some() {
            rtnl::veth(&shp, IF_SHAPER_SERVER, None, &mdm, IF_MODEM_SHAPER, None)?;
            rtnl::veth(&mdm, IF_MODEM_SERVER, None, &srv, IF_SERVER, Some(SERVER_MAC))?;
        } else {
            rtnl::veth(&shp, IF_SHAPER_SERVER, None, &srv, IF_SERVER, Some(SERVER_MAC))?;
        }
        let (client, server) = (addr(CLIENT_ADDR), addr(SERVER_ADDR));
        rtnl::addr_add(&cli, IF_CLIENT, client, 24)?;
        rtnl::addr_add(&srv, IF_SERVER, server, 24)?;
        rtnl::neigh_permanent(&cli, IF_CLIENT, server, SERVER_MAC)?;
        rtnl::neigh_permanent(&srv, IF_SERVER, client, CLIENT_MAC)?;
        let mut links = vec![
            (cli.clone(), IF_CLIENT),
            (shp.clone(), IF_SHAPER_CLIENT),
            (shp.clone(), IF_SHAPER_SERVER),
            (srv.clone(), IF_SERVER),
        ];
        if let Some(rate) = opts.modem {
            rtnl::bridge_add(&mdm, IF_MODEM_BRIDGE)?;
            for port in [IF_MODEM_SHAPER, IF_MODEM_SERVER] {
                rtnl::link_set(&mdm, port, false, Some(IF_MODEM_BRIDGE))?;
                links.push((mdm.clone(), port));
            }
            rtnl::link_set(&mdm, IF_MODEM_BRIDGE, false, None)?;
            for port in [IF_MODEM_SHAPER, IF_MODEM_SERVER] {
                let config = modem_config(rate)?;
                let port = port.to_string();
                let rep = netns::in_netns(Some(&mdm), move || {
                    kernel::apply(&kernel::Plan::new(&config, &port, BurstPolicy::Sluice)?)
                })?;
                if let Some(r) = rep.refused.first() {
                    return Err(LabError::Setup(format!("modem tbf refused: {r}")));
                }
            }
        }
        for (ns, dev) in &links {
            rtnl::link_set(ns, dev, false, None)?;
            if !opts.offloads {
                // Sluice reads and writes whole frames: no TSO super-packets, no partial checksums.
                rtnl::offloads_off(ns, dev)?;
            }
        }
        self.set_path(PathMode::Bridge)?;
        Ok(())
    }

    /// Remove this lab's namespaces (idempotent). Returns the names removed.
    pub fn down(&self) -> Result<Vec<String>, LabError> {
        let found = self.existing();
        for ns in &found {
            rtnl::netns_del(ns)?;
        }
        Ok(found)
    }

    /// Remove every `slc-*` namespace (all labs, and leftovers of tests).
    pub fn down_all() -> Result<Vec<String>, LabError> {
        let found: Vec<String> = netns::list_netns().into_iter().filter(|n| n.starts_with("slc-")).collect();
        for ns in &found {
            rtnl::netns_del(ns)?;
        }
        Ok(found)
    }

    /// Join (Bridge) or separate (Open) the two shaper ports.
    pub fn set_path(&self, mode: PathMode) -> Result<(), LabError> {
        let shp = self.shaper_ns();
        let has_bridge = rtnl::link_exists(&shp, IF_BRIDGE)?;
        match mode {
            PathMode::Bridge if !has_bridge => {
                rtnl::bridge_add(&shp, IF_BRIDGE)?;
                for port in [IF_SHAPER_CLIENT, IF_SHAPER_SERVER] {
                    rtnl::link_set(&shp, port, false, Some(IF_BRIDGE))?;
                }
                rtnl::link_set(&shp, IF_BRIDGE, false, None)?;
            }
            PathMode::Open if has_bridge => {
                rtnl::link_del(&shp, IF_BRIDGE)?;
                for port in [IF_SHAPER_CLIENT, IF_SHAPER_SERVER] {
                    // Promiscuous: the forwarder must see frames addressed to the far end's MAC.
                    rtnl::link_set(&shp, port, true, None)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Current state.
    pub fn status(&self) -> LabStatus {
        let namespaces = self.existing();
        let complete =
            [self.client_ns(), self.shaper_ns(), self.server_ns()].iter().all(|n| namespaces.contains(n));
        let shp = self.shaper_ns();
        let path = namespaces.contains(&shp).then(|| {
            if rtnl::link_exists(&shp, IF_BRIDGE).unwrap_or(false) {
                PathMode::Bridge
            } else {
                PathMode::Open
            }
        });
        let modem = if namespaces.contains(&self.modem_ns()) {
            netns::in_netns(Some(&self.modem_ns()), || kernel::read_back(IF_MODEM_SERVER))
                .ok()
                .and_then(|objs| objs.into_iter().find(|o| o.kind == "tbf"))
                .and_then(|o| o.rate)
                .map(|r| r.to_string())
        } else {
            None
        };
        let shaper_qdiscs = if namespaces.contains(&shp) {
            netns::in_netns(Some(&shp), || kernel::read_back(IF_SHAPER_SERVER))
                .map(|o| kernel::format_objects(&o))
                .unwrap_or_default()
        } else {
            vec![]
        };
        let p = self.prefix();
        let others =
            netns::list_netns().into_iter().filter(|n| n.starts_with("slc-") && !n.starts_with(&p)).collect();
        LabStatus { namespaces, complete, path, modem, shaper_qdiscs, others }
    }

    /// Datagrams and segments the client and server namespaces received with a bad checksum
    /// (`InCsumErrors` of UDP and TCP in their `/proc/net/snmp`), summed: what a forwarder that
    /// left a checksum unfilled would show.
    pub fn checksum_errors(&self) -> Result<u64, LabError> {
        let mut total = 0;
        for ns in [self.client_ns(), self.server_ns()] {
            total += netns::in_netns(Some(&ns), || {
                // The thread's own namespace (/proc/net is the process's).
                let text = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
                Ok(snmp_csum_errors(&text))
            })?;
        }
        Ok(total)
    }

    /// Fail unless the lab is up.
    pub fn require_up(&self) -> Result<(), LabError> {
        if self.status().complete {
            Ok(())
        } else {
            Err(LabError::Lab(format!("lab `{}` is not up (run `sluice lab up`)", self.tag)))
        }
    }
}

/// `InCsumErrors` of the `Udp:` and `Tcp:` tables of a `/proc/net/snmp` text, summed.
fn snmp_csum_errors(text: &str) -> u64 {
    let lines: Vec<&str> = text.lines().collect();
    let mut total = 0;
    for pair in lines.windows(2) {
        let (names, values) = (pair[0], pair[1]);
        let proto = names.split(':').next().unwrap_or("");
        if !matches!(proto, "Udp" | "Tcp") || !values.starts_with(&format!("{proto}:")) {
            continue;
        }
        if let Some(k) = names.split_whitespace().position(|n| n == "InCsumErrors") {
            total += values.split_whitespace().nth(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total
}

/// The modem: tbf at `rate`, a 1 ms-or-more bucket and a deliberately deep 100 ms buffer, like the
/// DSL modem of seed 003 whose queue the home shaper must keep empty.
pub fn modem_config(rate: Rate) -> Result<State, LabError> {
    let burst = sluice_tc::burst::auto_burst(rate, 1514, BurstPolicy::Sluice);
    let limit = (rate.bytes_in(Span::from_millis(100)) + burst).max(3 * 1514);
    kernel::script_state(
        &format!(
            "tc qdisc add dev modem root handle 5ee: tbf rate {}bit burst {burst}b limit {limit}b\n",
            rate.bps()
        ),
        &[],
    )
}

/// One of the lab's address constants.
fn addr(a: &str) -> std::net::Ipv4Addr {
    a.parse().expect("the lab's addresses are valid")
}

#[cfg(test)]
mod snmp_tests {
    #[test]
    fn checksum_errors_are_read_from_udp_and_tcp() {
        let text = "Tcp: RtoAlgorithm InSegs InErrs InCsumErrors\nTcp: 1 100 2 3\n\
                    Udp: InDatagrams InErrors InCsumErrors IgnoredMulti\nUdp: 50 7 4 0\n\
                    UdpLite: InDatagrams InCsumErrors\nUdpLite: 0 9\n";
        assert_eq!(super::snmp_csum_errors(text), 7);
    }
}

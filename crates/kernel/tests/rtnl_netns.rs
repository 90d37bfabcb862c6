//! Root-only: the lab's setup through netlink (no `ip`, no `ethtool`): two namespaces, a veth pair
//! across them with fixed MACs, addresses, permanent neighbours, a bridge, offloads turned off and
//! read back through the ethtool netlink family, and a UDP datagram across. Skips loudly when not
//! root.

use sluice_kernel::{netns, rtnl};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

struct Ns(&'static str);
impl Drop for Ns {
    fn drop(&mut self) {
        let _ = rtnl::netns_del(self.0);
    }
}

#[test]
fn namespaces_links_addresses_and_offloads_through_netlink() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("\n*** SKIPPING namespaces_links_addresses_and_offloads_through_netlink: not root ***\n");
        return;
    }
    let (a, b) = ("slc-trtnl-a", "slc-trtnl-b");
    for ns in [a, b] {
        let _ = rtnl::netns_del(ns);
        rtnl::netns_add(ns).unwrap();
    }
    let _g = (Ns(a), Ns(b));
    assert!(netns::list_netns().iter().any(|n| n == a));
    rtnl::veth(a, "slc-x", Some("02:53:4c:00:00:0a"), b, "slc-y", Some("02:53:4c:00:00:0b")).unwrap();
    assert!(rtnl::link_exists(a, "slc-x").unwrap() && rtnl::link_exists(b, "slc-y").unwrap());
    assert!(!rtnl::link_exists(a, "slc-y").unwrap());
    let (ip_a, ip_b) = (Ipv4Addr::new(198, 18, 9, 1), Ipv4Addr::new(198, 18, 9, 2));
    rtnl::addr_add(a, "slc-x", ip_a, 24).unwrap();
    rtnl::addr_add(b, "slc-y", ip_b, 24).unwrap();
    rtnl::neigh_permanent(a, "slc-x", ip_b, "02:53:4c:00:00:0b").unwrap();
    for (ns, dev) in [(a, "lo"), (a, "slc-x"), (b, "lo"), (b, "slc-y")] {
        rtnl::link_set(ns, dev, false, None).unwrap();
    }
    // veth starts with checksum offload and TSO on; after offloads_off none of them is active.
    let before = rtnl::active_features(a, "slc-x").unwrap();
    assert!(before.iter().any(|f| f == "tx-checksum-ip-generic"), "{before:?}");
    rtnl::offloads_off(a, "slc-x").unwrap();
    let after = rtnl::active_features(a, "slc-x").unwrap();
    assert!(!after.is_empty(), "the read-back lists the features still on");
    let still: Vec<_> = after.iter().filter(|f| rtnl::is_offload(f)).collect();
    assert!(still.is_empty(), "still on: {still:?}");
    assert!(
        before.iter().any(|f| f == "rx-gro") || before.iter().any(|f| f == "tx-tcp-segmentation"),
        "{before:?}"
    );
    // A datagram crosses.
    let rx = netns::spawn_in_netns(b, move || {
        let s = UdpSocket::bind((ip_b, 7411))?;
        s.set_read_timeout(Some(Duration::from_secs(3)))?;
        let mut buf = [0u8; 16];
        let (n, from) = s.recv_from(&mut buf)?;
        Ok((buf[..n].to_vec(), from))
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    netns::in_netns(Some(a), move || {
        let s = UdpSocket::bind((ip_a, 0))?;
        s.send_to(b"sluice", (ip_b, 7411))?;
        Ok(())
    })
    .unwrap();
    let (got, from) = rx.join().unwrap().unwrap();
    assert_eq!((got.as_slice(), from.ip()), (&b"sluice"[..], std::net::IpAddr::V4(ip_a)));
    // A bridge with the veth as its port, then removed.
    rtnl::bridge_add(b, "slc-tbr").unwrap();
    rtnl::link_set(b, "slc-y", true, Some("slc-tbr")).unwrap();
    rtnl::link_set(b, "slc-tbr", false, None).unwrap();
    rtnl::link_del(b, "slc-tbr").unwrap();
    assert!(!rtnl::link_exists(b, "slc-tbr").unwrap());
    // Errors carry the kernel's reason.
    let e = rtnl::addr_add(a, "slc-nope", ip_a, 24).unwrap_err();
    assert!(e.to_string().contains("slc-nope"), "{e}");
}

//! The shaper from a tc script: parsed and built by `sluice-config`, packets classified by the
//! real filters (`sluice_core::classify`) on frames built and parsed by `sluice-wire`.
//!
//! Each flow is classified once, at set-up, from a representative frame (its addresses, ports,
//! protocol and TOS): filters that look only at headers give the same answer for every packet
//! of a flow. The flow's hashes (used by fq_codel, SFQ and `flow` filters) come from the same
//! parse, so they are what the live shaper would compute.

use crate::model::name_hash;
use sluice_config::build::build_device;
use sluice_config::model::{ClassOpts, State};
use sluice_config::script::load_tc_script;
use sluice_core::classify::{Classifier, ClassifyOutcome};
use sluice_core::{Handle, Packet, Qdisc, Rate, Time};
use sluice_wire::{parse_frame, FrameSpec, ParseOptions, L4};
use std::net::{IpAddr, Ipv4Addr};

/// A loaded tc script.
pub(crate) struct TcShaper {
    pub state: State,
    pub dev: String,
    pub classifier: std::sync::Mutex<Classifier>,
}

/// Loads and builds the script once (to report errors); `Err` is a message with line info.
pub(crate) fn load(file: &str, text: &str) -> Result<TcShaper, String> {
    let loaded = load_tc_script(file, text, &Default::default()).map_err(|e| e.to_string())?;
    let state = loaded.state;
    let dev = state
        .devices
        .iter()
        .find(|d| !d.qdiscs.is_empty())
        .map(|d| d.name.clone())
        .ok_or_else(|| "the tc script adds no qdisc".to_string())?;
    let built = build_device(&state, &dev).map_err(|e| e.to_string())?;
    Ok(TcShaper { state, dev, classifier: std::sync::Mutex::new(built.classifier) })
}

impl TcShaper {
    /// A fresh root qdisc.
    pub(crate) fn root(&self) -> Box<dyn Qdisc> {
        build_device(&self.state, &self.dev).expect("built once already").root
    }

    /// HTB classes of the root qdisc that have no child classes (what packets are charged to).
    pub(crate) fn leaf_classes(&self) -> Vec<(Handle, Rate, Rate)> {
        let Some(d) = self.state.devices.iter().find(|d| d.name == self.dev) else { return vec![] };
        let Some(root) = d.root() else { return vec![] };
        let major = root.handle.major();
        d.classes
            .iter()
            .filter(|c| c.classid.major() == major)
            .filter(|c| !d.classes.iter().any(|o| o.parent == c.classid))
            .filter_map(|c| match &c.opts {
                ClassOpts::Htb(h) => Some((c.classid, Rate::from_bps(h.rate), Rate::from_bps(h.ceil))),
                _ => None,
            })
            .collect()
    }
}

fn addr(name: &str, net: u8) -> IpAddr {
    let h = name_hash(name);
    IpAddr::V4(Ipv4Addr::new(198, net, (h >> 8) as u8, (h as u8).max(1)))
}

/// What one flow looks like on the wire.
pub(crate) struct FlowWire<'a> {
    pub host: &'a str,
    pub dst: &'a str,
    pub proto: L4,
    pub sport: u16,
    pub dport: u16,
    pub dsfield: u8,
    pub tunnel: Option<&'a str>,
}

/// A flow's classification: (class path, flow hash, src host hash, dst host hash).
pub(crate) type FlowClass = (Vec<Handle>, u32, u32, u32);

/// Classifies a flow, or None if a filter drops it.
pub(crate) fn classify(sh: &TcShaper, w: &FlowWire) -> Result<Option<FlowClass>, String> {
    let mut spec = FrameSpec::udp(addr(w.host, 18), addr(w.dst, 19), w.sport, w.dport, 64);
    spec.proto = w.proto;
    spec.dsfield = w.dsfield;
    if let Some(t) = w.tunnel {
        spec.tunnel = Some(sluice_wire::Tunnel {
            kind: sluice_wire::TunnelKind::Ipip,
            src: addr(&format!("{t}-a"), 18),
            dst: addr(&format!("{t}-b"), 19),
            gre: Default::default(),
        });
    }
    let frame = spec.build().map_err(|e| e.to_string())?;
    let parsed = parse_frame(&frame, ParseOptions::default()).map_err(|e| e.to_string())?;
    let mut pkt: Packet = parsed.to_packet(0);
    let mut c = sh.classifier.lock().unwrap_or_else(|p| p.into_inner());
    match c.classify(&mut pkt, &parsed.keys, &frame, Time::ZERO) {
        ClassifyOutcome::Drop => Ok(None),
        ClassifyOutcome::Enqueue => Ok(Some((
            pkt.class_path.iter().copied().filter(|h| !h.is_unspec()).collect(),
            parsed.flow_hash,
            parsed.src_host_hash,
            parsed.dst_host_hash,
        ))),
    }
}

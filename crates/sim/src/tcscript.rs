//! The shaper from a tc script: parsed by `sluice-tc` into the model, built into an engine
//! [`Program`] for every run; the engine's classifier runs the real filters on every packet.
//!
//! Each flow gets a representative frame (its addresses, ports, protocol and TOS) built and parsed
//! once by `sluice-wire`: the engine classifies each packet from those cached keys and headers
//! with the packet's own length, mark and priority (so policers meter every packet). The flow's
//! hashes (used by fq_codel, SFQ and `flow` filters) come from the same parse, so they are what
//! the live shaper would compute.

use crate::model::name_hash;
use sluice_core::{FlowKeys, Handle, NatOrig, Rate};
use sluice_engine::{Program, ProgramOptions};
use sluice_tc::model::{Action, ClassOpts, DevKind, MirredDirection, QdiscOpts, State, H_MIN_INGRESS};
use sluice_tc::script::load_tc_script;
use sluice_wire::{parse_frame, FrameSpec, ParseOptions, L4};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// A loaded tc script.
pub(crate) struct TcShaper {
    pub state: State,
    /// The upload device: the first one with a root qdisc that is not an IFB.
    pub dev: String,
    /// Ingress shaping: the device whose ingress filters redirect (the WAN side) and the IFB
    /// they redirect to, with the IFB's and the WAN device's indexes in the state.
    pub download: Option<(String, String, u16, u16)>,
}

/// Loads and builds the script once (to report errors); `Err` is a message with line info.
pub(crate) fn load(file: &str, text: &str) -> Result<TcShaper, String> {
    let loaded = load_tc_script(file, text, &Default::default()).map_err(|e| e.to_string())?;
    let state = loaded.state;
    let dev = state
        .devices
        .iter()
        .find(|d| d.root().is_some() && d.kind != DevKind::Ifb)
        .or_else(|| state.devices.iter().find(|d| !d.qdiscs.is_empty()))
        .map(|d| d.name.clone())
        .ok_or_else(|| "the tc script adds no qdisc".to_string())?;
    // The first ingress filter that redirects (or mirrors) to a device's egress names the
    // download pair.
    let download = state.devices.iter().find_map(|d| {
        let target =
            d.filters.iter().filter(|f| f.parent == H_MIN_INGRESS).flat_map(|f| &f.actions).find_map(
                |a| match a {
                    Action::Mirred(m) if m.direction == MirredDirection::Egress => Some(m.dev.clone()),
                    _ => None,
                },
            )?;
        let idx = state.devices.iter().position(|x| x.name == target)?;
        let own = state.devices.iter().position(|x| x.name == d.name)?;
        Some((d.name.clone(), target, u16::try_from(idx).ok()?, u16::try_from(own).ok()?))
    });
    // Built once here so that what the engine cannot run is reported before any case runs.
    // Refused before the engine's tree is built from it.
    crate::scenario::memory::check_shaper(
        crate::scenario::memory::state_bytes(&state).0,
        "qdiscs and classes",
    )?;
    let opts = ProgramOptions::default();
    Program::from_model(&state, &dev, &opts).map_err(|e| e.to_string())?;
    if let Some((wan, ifb, _, _)) = &download {
        Program::from_model(&state, wan, &opts).map_err(|e| e.to_string())?;
        Program::from_model(&state, ifb, &opts).map_err(|e| e.to_string())?;
    }
    Ok(TcShaper { state, dev, download })
}

impl TcShaper {
    /// A fresh program (root qdisc and filters) of the upload device; random sources (netem)
    /// seeded from `seed`.
    pub(crate) fn program(&self, seed: u64) -> Program {
        self.program_of(&self.dev, seed)
    }

    /// A fresh program of any device of the script (built once already).
    pub(crate) fn program_of(&self, dev: &str, seed: u64) -> Program {
        let opts = ProgramOptions { seed, ..ProgramOptions::default() };
        Program::from_model(&self.state, dev, &opts).expect("built once already")
    }

    /// HTB classes of the upload device's root qdisc that have no child classes (what packets
    /// are charged to).
    pub(crate) fn leaf_classes(&self) -> Vec<(Handle, Rate, Rate)> {
        self.leaf_classes_of(&self.dev)
    }

    /// [`TcShaper::leaf_classes`] of any device.
    pub(crate) fn leaf_classes_of(&self, dev: &str) -> Vec<(Handle, Rate, Rate)> {
        let Some(d) = self.state.devices.iter().find(|d| d.name == dev) else { return vec![] };
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

    /// The root HTB's `default` class, when it is a leaf (where unclassified packets go).
    pub(crate) fn default_class(&self) -> Option<Handle> {
        self.default_class_of(&self.dev)
    }

    /// [`TcShaper::default_class`] of any device.
    pub(crate) fn default_class_of(&self, dev: &str) -> Option<Handle> {
        let d = self.state.devices.iter().find(|d| d.name == dev)?;
        let root = d.root()?;
        let QdiscOpts::Htb(h) = &root.opts else { return None };
        let id = Handle::new(root.handle.major(), h.default);
        (h.default != 0 && d.class(id).is_some() && d.child_classes(id).next().is_none()).then_some(id)
    }
}

fn addr(name: &str, net: u8) -> IpAddr {
    let h = name_hash(name);
    IpAddr::V4(Ipv4Addr::new(198, net, (h >> 8) as u8, (h as u8).max(1)))
}

/// What one flow looks like on the wire.
#[derive(Clone, Copy)]
pub(crate) struct FlowWire<'a> {
    pub host: &'a str,
    pub dst: &'a str,
    pub proto: L4,
    pub sport: u16,
    pub dport: u16,
    pub dsfield: u8,
    pub tunnel: Option<&'a str>,
    /// Source NAT: the source address the router puts on the packets.
    pub nat: Option<IpAddr>,
}

/// A flow as the shaper's filters see it.
pub(crate) struct FlowParsed {
    /// The representative frame (headers and a short payload).
    pub frame: Arc<[u8]>,
    pub keys: FlowKeys,
    pub flow_hash: u32,
    /// Source and destination host hashes.
    pub host_hashes: (u32, u32),
    /// Behind source NAT: the hashes of the original (inside) tuple, as conntrack keeps it.
    pub nat_orig: Option<NatOrig>,
}

impl TcShaper {
    /// Builds and parses the representative frame of a flow.
    pub(crate) fn flow_wire(&self, w: &FlowWire) -> Result<FlowParsed, String> {
        if let Some(wan) = w.nat {
            let inside = self.flow_wire(&FlowWire { nat: None, ..*w })?;
            let mut out = self.flow_wire_from(w, wan)?;
            out.nat_orig = Some(NatOrig {
                flow_hash: inside.flow_hash,
                src_host_hash: inside.host_hashes.0,
                dst_host_hash: inside.host_hashes.1,
            });
            return Ok(out);
        }
        self.flow_wire_from(w, addr(w.host, 18))
    }

    fn flow_wire_from(&self, w: &FlowWire, src: IpAddr) -> Result<FlowParsed, String> {
        let mut spec = FrameSpec::udp(src, addr(w.dst, 19), w.sport, w.dport, 64);
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
        Ok(FlowParsed {
            frame: Arc::from(frame),
            keys: parsed.keys,
            flow_hash: parsed.flow_hash,
            host_hashes: (parsed.src_host_hash, parsed.dst_host_hash),
            nat_orig: None,
        })
    }
}

//! The kernel backend's view of a tc configuration: qdiscs and classes on one device, mapped from
//! `sluice-config`'s model ([`Tree::from_device`]), so `sluice apply` accepts whatever
//! `sluice_config::script::load_file` accepts (tc scripts and the TOML form).
//!
//! It keeps only what the netlink encoder needs; kinds it does not encode are kept by name so they
//! can be reported, never silently dropped.

use crate::LabError;
use sluice_config::export::{filter_args, qdisc_args};
use sluice_config::model::{ClassOpts, Device, FilterOpts, LinkLayer, QdiscOpts, State, H_INGRESS, H_ROOT};
use sluice_config::shell::Vars;
use sluice_config::tc::args::proto_name;
use sluice_config::tc::show::classid_str;
use sluice_core::{Handle, Rate};
use std::collections::HashMap;
use std::path::Path;

/// tc's default HTB class mtu (also the default burst on hrtimer kernels).
pub const HTB_DEFAULT_MTU: u32 = 1600;

/// Where a qdisc or class hangs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    /// The device's root.
    Root,
    /// A class or qdisc handle.
    Handle(Handle),
}

impl Parent {
    /// The netlink parent value.
    pub fn raw(self) -> u32 {
        match self {
            Parent::Root => crate::netlink::TC_H_ROOT,
            Parent::Handle(h) => tc_handle(h),
        }
    }
}

/// The kernel's 32-bit handle of `h`. Trees are built from tc-sized handles
/// ([`Tree::from_model`]), so a minor above `ffff` cannot reach the kernel from here.
pub fn tc_handle(h: Handle) -> u32 {
    h.to_tc().expect("tree handles fit tc's 16-bit minors")
}

/// A qdisc and its options.
#[derive(Debug, Clone, PartialEq)]
pub enum QdiscKind {
    /// HTB root: default class minor, r2q, optional direct_qlen.
    Htb {
        /// Default class minor (`default 10` means `1:10`; parsed as hex like tc).
        default: u32,
        /// Rate to quantum divisor.
        r2q: u32,
        /// Direct queue length.
        direct_qlen: Option<u32>,
    },
    /// TBF.
    Tbf {
        /// Rate.
        rate: Rate,
        /// Bucket size in bytes.
        burst: u64,
        /// Queue limit in bytes (from `limit` or `latency`).
        limit: u64,
        /// Optional peak rate and its bucket (`mtu`/`minburst`).
        peak: Option<(Rate, u32)>,
    },
    /// pfifo with an optional packet limit.
    Pfifo(Option<u32>),
    /// bfifo with an optional byte limit.
    Bfifo(Option<u32>),
    /// Something the kernel backend does not encode (fq_codel, sfq, prio, ...): kept by name.
    Other {
        /// tc kind.
        kind: String,
        /// Its options as written.
        args: Vec<String>,
    },
}

impl QdiscKind {
    /// The tc kind string.
    pub fn name(&self) -> &str {
        match self {
            QdiscKind::Htb { .. } => "htb",
            QdiscKind::Tbf { .. } => "tbf",
            QdiscKind::Pfifo(_) => "pfifo",
            QdiscKind::Bfifo(_) => "bfifo",
            QdiscKind::Other { kind, .. } => kind,
        }
    }
}

/// One qdisc.
#[derive(Debug, Clone, PartialEq)]
pub struct QdiscSpec {
    /// Its handle (major:0); a missing handle is allocated by the kernel, we pick one instead.
    pub handle: Handle,
    /// Where it hangs.
    pub parent: Parent,
    /// Kind and options.
    pub kind: QdiscKind,
}

/// One HTB class.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassSpec {
    /// Class id.
    pub classid: Handle,
    /// Parent class or the qdisc.
    pub parent: Handle,
    /// Guaranteed rate.
    pub rate: Rate,
    /// Ceiling (defaults to rate).
    pub ceil: Rate,
    /// Explicit burst in bytes, if given.
    pub burst: Option<u64>,
    /// Explicit cburst in bytes, if given.
    pub cburst: Option<u64>,
    /// Priority 0..7.
    pub prio: u32,
    /// Explicit quantum.
    pub quantum: Option<u32>,
    /// Rate-table mtu.
    pub mtu: u32,
    /// Per-packet overhead and mpu.
    pub overhead: i32,
    /// Minimum packet unit.
    pub mpu: u32,
}

/// A filter line kept verbatim (the kernel backend does not program filters yet).
#[derive(Debug, Clone, PartialEq)]
pub struct FilterSpec {
    /// The line's words after `tc filter add dev X`.
    pub args: Vec<String>,
}

/// The configuration of one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tree {
    /// Qdiscs in script order.
    pub qdiscs: Vec<QdiscSpec>,
    /// Classes in script order (parents first, as tc requires).
    pub classes: Vec<ClassSpec>,
    /// Filters (reported, not programmed).
    pub filters: Vec<FilterSpec>,
}

impl Tree {
    /// The root qdisc, if any.
    pub fn root(&self) -> Option<&QdiscSpec> {
        self.qdiscs.iter().find(|q| q.parent == Parent::Root)
    }

    /// The qdisc attached under class `h`, if any.
    pub fn leaf_qdisc(&self, h: Handle) -> Option<&QdiscSpec> {
        self.qdiscs.iter().find(|q| q.parent == Parent::Handle(h))
    }

    /// Whether class `h` has child classes.
    pub fn has_children(&self, h: Handle) -> bool {
        self.classes.iter().any(|c| c.parent == h)
    }

    /// A single-class HTB tree at `rate` (used by measurements): `1:` htb default 1, class `1:1`,
    /// leaf `10:` pfifo with `limit` packets.
    pub fn single_htb(rate: Rate, limit: u32) -> Tree {
        Tree {
            qdiscs: vec![
                QdiscSpec {
                    handle: Handle::new(1, 0),
                    parent: Parent::Root,
                    kind: QdiscKind::Htb { default: 1, r2q: 10, direct_qlen: None },
                },
                QdiscSpec {
                    handle: Handle::new(0x10, 0),
                    parent: Parent::Handle(Handle::new(1, 1)),
                    kind: QdiscKind::Pfifo(Some(limit)),
                },
            ],
            classes: vec![ClassSpec {
                classid: Handle::new(1, 1),
                parent: Handle::new(1, 0),
                rate,
                ceil: rate,
                burst: None,
                cburst: None,
                prio: 0,
                quantum: None,
                mtu: HTB_DEFAULT_MTU,
                overhead: 0,
                mpu: 0,
            }],
            filters: vec![],
        }
    }

    /// Read a tc script through `sluice-config` (the full tc grammar, `$VAR` substitution with
    /// `vars`) and keep device `dev`'s tree (see [`Tree::from_state`]).
    pub fn parse_script(
        text: &str,
        vars: &HashMap<String, String>,
        dev: Option<&str>,
    ) -> Result<Tree, LabError> {
        let vars: Vars = vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let loaded = sluice_config::script::load_tc_script("<script>", text, &vars)
            .map_err(|e| LabError::Config(e.to_string()))?;
        Tree::from_state(&loaded.state, dev)
    }

    /// Load any configuration `sluice_config::script::load_file` accepts (tc script or TOML) and
    /// keep device `dev`'s tree. `$DEV` in a script is `dev` unless `vars` sets it.
    pub fn load_file(path: &Path, vars: &HashMap<String, String>, dev: &str) -> Result<Tree, LabError> {
        let mut vars: Vars = vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        vars.entry("DEV".into()).or_insert_with(|| dev.to_string());
        let loaded =
            sluice_config::script::load_file(path, &vars).map_err(|e| LabError::Config(e.to_string()))?;
        Tree::from_state(&loaded.state, Some(dev))
    }

    /// The tree of device `dev` in a `sluice-config` model; with `dev` None, or when no device has
    /// that name, the model's only device. Several devices and none named `dev` is an error.
    pub fn from_state(state: &State, dev: Option<&str>) -> Result<Tree, LabError> {
        let named = dev.and_then(|d| state.devices.iter().find(|x| x.name == d));
        let device = match (named, state.devices.as_slice()) {
            (Some(d), _) => d,
            (None, [only]) => only,
            (None, []) => return Err(LabError::Config("the configuration has no tc objects".into())),
            (None, all) => {
                let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
                return Err(LabError::Config(format!(
                    "the configuration has several devices ({}); none is {}",
                    names.join(", "),
                    dev.unwrap_or("given")
                )));
            }
        };
        Tree::from_device(device)
    }

    /// Map one `sluice-config` device to the objects the kernel backend programs: HTB, TBF, pfifo
    /// and bfifo with their options; other kinds by name (reported, never dropped). A burst the
    /// model marks as not given (`sluice_config::model::HtbClassOpts::burst_auto`) stays `None`, so the backend's
    /// burst rule sizes it. Options the backend cannot encode are an error, not ignored.
    pub fn from_device(dev: &Device) -> Result<Tree, LabError> {
        let bad = |what: String| {
            LabError::Config(format!("{}: {what} is not encoded by the kernel backend", dev.name))
        };
        // The kernel's handles have 16-bit minors; the native form allows 32.
        let tc_sized = |h: Handle, what: &str| {
            h.to_tc().map(|_| h).ok_or_else(|| {
                LabError::Config(format!(
                    "{}: {what} {h} has a minor above ffff, which the kernel's 16-bit class handles cannot \
                     hold (one kernel qdisc has at most 65535 classes): nest the tree, or shape with Sluice",
                    dev.name
                ))
            })
        };
        let mut tree = Tree::default();
        for q in &dev.qdiscs {
            let parent = match q.parent {
                H_ROOT => Parent::Root,
                H_INGRESS => return Err(bad(format!("{} qdisc", q.opts.kind()))),
                p => Parent::Handle(tc_sized(p, "parent")?),
            };
            let kind = match &q.opts {
                QdiscOpts::Htb(h) => {
                    if h.offload {
                        return Err(bad("htb offload".into()));
                    }
                    tc_sized(Handle::new(q.handle.major(), h.default), "default class")?;
                    QdiscKind::Htb { default: h.default, r2q: h.r2q, direct_qlen: h.direct_qlen }
                }
                QdiscOpts::Tbf(t) => {
                    if t.overhead != 0 || t.mpu != 0 || t.linklayer != LinkLayer::Ethernet {
                        return Err(bad("tbf overhead/mpu/linklayer".into()));
                    }
                    QdiscKind::Tbf {
                        rate: Rate::from_bps(t.rate),
                        burst: t.burst as u64,
                        limit: t.limit as u64,
                        peak: t.peakrate.map(|p| (Rate::from_bps(p), t.mtu.unwrap_or(1514))),
                    }
                }
                QdiscOpts::Pfifo(f) => QdiscKind::Pfifo(f.limit),
                QdiscOpts::Bfifo(f) => QdiscKind::Bfifo(f.limit),
                QdiscOpts::Ingress | QdiscOpts::Clsact => {
                    return Err(bad(format!("{} qdisc", q.opts.kind())))
                }
                other => QdiscKind::Other {
                    kind: other.kind().to_string(),
                    args: qdisc_args(other).split_whitespace().map(String::from).collect(),
                },
            };
            tree.qdiscs.push(QdiscSpec { handle: q.handle, parent, kind });
        }
        for c in &dev.classes {
            let ClassOpts::Htb(h) = &c.opts else {
                return Err(bad(format!("class {} (only htb classes)", classid_str(c.classid))));
            };
            if h.linklayer != LinkLayer::Ethernet {
                return Err(bad(format!("class {} linklayer", classid_str(c.classid))));
            }
            tree.classes.push(ClassSpec {
                classid: tc_sized(c.classid, "class")?,
                parent: tc_sized(c.parent, "parent")?,
                rate: Rate::from_bps(h.rate),
                ceil: Rate::from_bps(h.ceil),
                burst: (!h.burst_auto).then_some(h.burst as u64),
                cburst: (!h.cburst_auto).then_some(h.cburst as u64),
                prio: h.prio,
                quantum: h.quantum,
                mtu: h.mtu,
                overhead: h.overhead,
                mpu: h.mpu,
            });
        }
        for f in &dev.filters {
            let is_root_table = matches!(f.opts, FilterOpts::U32Table { .. }) && f.handle >> 20 >= 0x800;
            if is_root_table {
                continue; // created implicitly by the first u32 filter
            }
            tc_sized(f.parent, "filter parent")?;
            if let Some(c) = f.opts.classid() {
                tc_sized(c, "filter class")?;
            }
            let line = format!(
                "parent {} protocol {} prio {}{}",
                classid_str(f.parent),
                proto_name(f.protocol),
                f.prio,
                filter_args(f)
            );
            tree.filters.push(FilterSpec { args: line.split_whitespace().map(String::from).collect() });
        }
        Ok(tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_seed_style_script() {
        let script = "DEV=eth1\nrate=100\n\
            tc qdisc add dev $DEV root handle 1: htb default 1\n\
            tc class add dev $DEV parent 1: classid 1:1 htb rate ${rate}mbit mtu 9000\n\
            tc qdisc add dev $DEV parent 1:1 handle 10: pfifo\n\
            tc class add dev $DEV parent 1: classid 1:2 htb rate 1mbit\n\
            tc qdisc add dev $DEV parent 1:2 handle 20: fq_codel quantum 300\n";
        let t = Tree::parse_script(script, &HashMap::new(), None).unwrap();
        assert_eq!(t.qdiscs.len(), 3);
        assert_eq!(t.qdiscs[0].kind, QdiscKind::Htb { default: 1, r2q: 10, direct_qlen: None });
        assert_eq!(t.classes[0].rate, Rate::from_bps(100_000_000));
        assert_eq!(t.classes[0].ceil, t.classes[0].rate);
        assert_eq!(t.classes[0].mtu, 9000);
        assert_eq!((t.classes[0].burst, t.classes[0].cburst), (None, None), "not given: the rule sizes them");
        assert_eq!(t.qdiscs[1].kind, QdiscKind::Pfifo(None));
        assert!(
            matches!(&t.qdiscs[2].kind, QdiscKind::Other { kind, args } if kind == "fq_codel" && args.contains(&"300".to_string()))
        );
    }

    #[test]
    fn explicit_bursts_hex_default_and_errors() {
        let t = Tree::parse_script(
            "tc qdisc add dev x root handle 1: htb default 10\n\
             tc class add dev x parent 1: classid 1:10 htb rate 1mbit burst 10k\n",
            &HashMap::new(),
            None,
        )
        .unwrap();
        assert_eq!(t.qdiscs[0].kind, QdiscKind::Htb { default: 0x10, r2q: 10, direct_qlen: None });
        assert_eq!(t.classes[0].burst, Some(10 * 1024));
        assert_eq!(t.classes[0].cburst, None);
        let e = Tree::parse_script(
            "\ntc class add dev x parent 1: classid 1:1 htb ceil 1mbit",
            &HashMap::new(),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains(":2:"), "{e}");
        let e = Tree::parse_script("tc qdisc add dev x ingress", &HashMap::new(), None).unwrap_err();
        assert!(e.to_string().contains("ingress"), "{e}");
    }

    #[test]
    fn toml_and_device_choice() {
        let st = sluice_config::script::load_tc_script(
            "t",
            "tc qdisc add dev a root tbf rate 1mbit burst 10k latency 50ms\ntc qdisc add dev b root pfifo limit 5\n",
            &Vars::new(),
        )
        .unwrap()
        .state;
        let b = Tree::from_state(&st, Some("b")).unwrap();
        assert_eq!(b.qdiscs[0].kind, QdiscKind::Pfifo(Some(5)));
        assert!(Tree::from_state(&st, Some("c")).is_err(), "ambiguous");
        let dir = std::env::temp_dir().join(format!("sluice-lab-tree-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(&path, sluice_config::export::to_toml(&st).unwrap()).unwrap();
        let a = Tree::load_file(&path, &HashMap::new(), "a").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let QdiscKind::Tbf { rate, burst, limit, peak } = a.qdiscs[0].kind else { panic!("{a:?}") };
        assert_eq!((rate, burst, peak), (Rate::from_bps(1_000_000), 10 * 1024, None));
        assert_eq!(limit, Rate::from_bps(1_000_000).bytes_in(sluice_core::Span::from_millis(50)) + 10 * 1024);
    }
}

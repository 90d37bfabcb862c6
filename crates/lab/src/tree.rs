//! The kernel backend's view of a tc configuration: qdiscs and classes on one device, and a reader
//! for tc scripts (`tc qdisc|class add ...` lines with `$VAR` substitution).
//!
//! This is a deliberately small model, private to the kernel backend and the live shaper until
//! `sluice-config`'s model is available; unsupported kinds and options are kept so they can be
//! reported by name, never silently dropped.

use crate::LabError;
use sluice_core::units::{parse_rate, parse_size, parse_time};
use sluice_core::{Handle, Rate, Span};
use std::collections::HashMap;

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
            Parent::Handle(h) => h.0,
        }
    }
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

    /// Read a tc script. Lines other than `tc qdisc|class|filter add|replace ...` are ignored,
    /// except `NAME=value` assignments, which feed `$NAME` substitution (as do `vars`).
    /// Only lines for `dev` are kept (`$DEV`-style device names match anything if `dev` is None).
    pub fn parse_script(
        text: &str,
        vars: &HashMap<String, String>,
        dev: Option<&str>,
    ) -> Result<Tree, LabError> {
        let mut vars = vars.clone();
        let mut tree = Tree::default();
        let joined = text.replace("\\\n", " ");
        for (no, raw) in joined.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if let Some((k, v)) = line.split_once('=') {
                if !k.contains(' ') && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    vars.entry(k.to_string()).or_insert_with(|| v.trim_matches('"').to_string());
                    continue;
                }
            }
            let words: Vec<String> = line.split_whitespace().map(|w| substitute(w, &vars)).collect();
            let Some(pos) = words.iter().position(|w| w == "tc" || w.ends_with("/tc")) else {
                continue;
            };
            let w = &words[pos + 1..];
            let err = |m: String| LabError::Config(format!("line {}: {m}\n  {}", no + 1, raw.trim()));
            parse_tc_line(&mut tree, w, dev).map_err(err)?;
        }
        Ok(tree)
    }
}

fn substitute(word: &str, vars: &HashMap<String, String>) -> String {
    let mut out = String::new();
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let braced = chars.peek() == Some(&'{');
        if braced {
            chars.next();
        }
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                name.push(c);
                chars.next();
            } else {
                break;
            }
        }
        if braced && chars.peek() == Some(&'}') {
            chars.next();
        }
        match vars.get(&name) {
            Some(v) => out.push_str(v),
            None => {
                out.push('$');
                out.push_str(&name);
            }
        }
    }
    out.trim_matches('"').to_string()
}

fn parse_tc_line(tree: &mut Tree, w: &[String], dev: Option<&str>) -> Result<(), String> {
    let obj = w.first().map(String::as_str).unwrap_or("");
    let verb = w.get(1).map(String::as_str).unwrap_or("");
    if !matches!(verb, "add" | "replace" | "change") {
        return Ok(()); // del/show lines are not configuration
    }
    let mut i = 2;
    let mut parent = None;
    let mut handle = None;
    let mut line_dev = None;
    while i < w.len() {
        match w[i].as_str() {
            "dev" => {
                line_dev = w.get(i + 1).cloned();
                i += 2;
            }
            "root" => {
                parent = Some(Parent::Root);
                i += 1;
            }
            "parent" => {
                let h = w.get(i + 1).ok_or("parent needs a handle")?;
                parent = Some(Parent::Handle(Handle::parse(h).map_err(|e| e.0)?));
                i += 2;
            }
            "handle" | "classid" if obj != "filter" => {
                let h = w.get(i + 1).ok_or("handle needs a value")?;
                handle = Some(Handle::parse(h).map_err(|e| e.0)?);
                i += 2;
            }
            _ => break,
        }
    }
    if let (Some(want), Some(have)) = (dev, line_dev.as_deref()) {
        if want != have && !have.starts_with('$') {
            return Ok(());
        }
    }
    let kind = w.get(i).cloned().unwrap_or_default();
    let opts = &w[(i + 1).min(w.len())..];
    match obj {
        "qdisc" => {
            let parent = parent.ok_or("a qdisc needs `root` or `parent`")?;
            if kind == "ingress" || kind == "clsact" {
                return Err(format!("{kind} qdiscs are not supported by the kernel backend yet"));
            }
            let handle = handle.unwrap_or(Handle::new(0x8000 + tree.qdiscs.len() as u16, 0));
            let kind = parse_qdisc(&kind, opts)?;
            tree.qdiscs.push(QdiscSpec { handle, parent, kind });
        }
        "class" => {
            let Some(Parent::Handle(parent)) = parent else {
                return Err("a class needs `parent`".into());
            };
            let classid = handle.ok_or("a class needs `classid`")?;
            if kind != "htb" {
                return Err(format!("class kind `{kind}` is not supported (only htb classes)"));
            }
            tree.classes.push(parse_htb_class(classid, parent, opts)?);
        }
        "filter" => tree.filters.push(FilterSpec { args: w[2..].to_vec() }),
        _ => {}
    }
    Ok(())
}

fn value<'a>(opts: &'a [String], i: usize, key: &str) -> Result<&'a str, String> {
    opts.get(i + 1).map(String::as_str).ok_or_else(|| format!("`{key}` needs a value"))
}

fn parse_qdisc(kind: &str, opts: &[String]) -> Result<QdiscKind, String> {
    let mut i = 0;
    match kind {
        "htb" => {
            let (mut default, mut r2q, mut direct_qlen) = (0, 10, None);
            while i < opts.len() {
                let v = value(opts, i, &opts[i]);
                match opts[i].as_str() {
                    "default" => {
                        default = u32::from_str_radix(v?.trim_start_matches("0x"), 16)
                            .map_err(|e| format!("default: {e}"))?
                    }
                    "r2q" => r2q = v?.parse().map_err(|e| format!("r2q: {e}"))?,
                    "direct_qlen" => direct_qlen = Some(v?.parse().map_err(|e| format!("direct_qlen: {e}"))?),
                    o => return Err(format!("htb qdisc option `{o}` is not supported")),
                }
                i += 2;
            }
            Ok(QdiscKind::Htb { default, r2q, direct_qlen })
        }
        "tbf" => {
            let (mut rate, mut burst, mut limit, mut latency, mut peak, mut mtu) =
                (None, None, None, None, None, None);
            while i < opts.len() {
                let v = value(opts, i, &opts[i])?;
                match opts[i].as_str() {
                    "rate" => rate = Some(parse_rate(v).map_err(|e| e.to_string())?),
                    "burst" | "buffer" | "maxburst" => {
                        burst = Some(parse_size(v.split('/').next().unwrap_or(v)).map_err(|e| e.to_string())?)
                    }
                    "limit" => limit = Some(parse_size(v).map_err(|e| e.to_string())?),
                    "latency" => latency = Some(parse_time(v).map_err(|e| e.to_string())?),
                    "peakrate" => peak = Some(parse_rate(v).map_err(|e| e.to_string())?),
                    "mtu" | "minburst" => mtu = Some(parse_size(v).map_err(|e| e.to_string())? as u32),
                    o => return Err(format!("tbf option `{o}` is not supported")),
                }
                i += 2;
            }
            let rate = rate.ok_or("tbf needs `rate`")?;
            let burst = burst.ok_or("tbf needs `burst`")?;
            let limit = match (limit, latency) {
                (Some(l), None) => l,
                (None, Some(lat)) => tbf_limit_from_latency(rate, burst, lat),
                _ => return Err("tbf needs exactly one of `limit` and `latency`".into()),
            };
            Ok(QdiscKind::Tbf { rate, burst, limit, peak: peak.map(|p| (p, mtu.unwrap_or(1514))) })
        }
        "pfifo" | "bfifo" => {
            let mut limit = None;
            while i < opts.len() {
                let v = value(opts, i, &opts[i])?;
                match opts[i].as_str() {
                    "limit" => {
                        limit = Some(if kind == "bfifo" {
                            parse_size(v).map_err(|e| e.to_string())? as u32
                        } else {
                            v.parse().map_err(|e| format!("limit: {e}"))?
                        })
                    }
                    o => return Err(format!("{kind} option `{o}` is not supported")),
                }
                i += 2;
            }
            Ok(if kind == "pfifo" { QdiscKind::Pfifo(limit) } else { QdiscKind::Bfifo(limit) })
        }
        "" => Err("missing qdisc kind".into()),
        other => Ok(QdiscKind::Other { kind: other.to_string(), args: opts.to_vec() }),
    }
}

/// tc's `limit = rate × latency + burst` for TBF.
pub fn tbf_limit_from_latency(rate: Rate, burst: u64, latency: Span) -> u64 {
    rate.bytes_in(latency) + burst
}

fn parse_htb_class(classid: Handle, parent: Handle, opts: &[String]) -> Result<ClassSpec, String> {
    let mut c = ClassSpec {
        classid,
        parent,
        rate: Rate::from_bps(0),
        ceil: Rate::from_bps(0),
        burst: None,
        cburst: None,
        prio: 0,
        quantum: None,
        mtu: HTB_DEFAULT_MTU,
        overhead: 0,
        mpu: 0,
    };
    let mut ceil = None;
    let mut i = 0;
    while i < opts.len() {
        let v = value(opts, i, &opts[i])?;
        let size = |v: &str| parse_size(v.split('/').next().unwrap_or(v)).map_err(|e| e.to_string());
        match opts[i].as_str() {
            "rate" => c.rate = parse_rate(v).map_err(|e| e.to_string())?,
            "ceil" => ceil = Some(parse_rate(v).map_err(|e| e.to_string())?),
            "burst" | "buffer" | "maxburst" => c.burst = Some(size(v)?),
            "cburst" | "cbuffer" | "cmaxburst" => c.cburst = Some(size(v)?),
            "prio" => c.prio = v.parse().map_err(|e| format!("prio: {e}"))?,
            "quantum" => c.quantum = Some(v.parse().map_err(|e| format!("quantum: {e}"))?),
            "mtu" => c.mtu = v.parse().map_err(|e| format!("mtu: {e}"))?,
            "overhead" => c.overhead = v.parse().map_err(|e| format!("overhead: {e}"))?,
            "mpu" => c.mpu = v.parse().map_err(|e| format!("mpu: {e}"))?,
            o => return Err(format!("htb class option `{o}` is not supported")),
        }
        i += 2;
    }
    if c.rate.is_zero() {
        return Err(format!("class {classid:?}: htb classes need a non-zero `rate`"));
    }
    c.ceil = ceil.unwrap_or(c.rate);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_seed_style_script() {
        let script = "DEV=eth1\nrate=100\n\
            tc qdisc add dev $DEV root handle 1: htb default 1\n\
            tc class add dev $DEV parent 1: classid 1:1 htb rate ${rate}mbit mtu 9000\n\
            sudo /sbin/tc qdisc add dev eth1 parent 1:1 handle 10: pfifo\n\
            tc qdisc add dev $DEV parent 10:1 handle 20: fq_codel quantum 300\n";
        let t = Tree::parse_script(script, &HashMap::new(), None).unwrap();
        assert_eq!(t.qdiscs.len(), 3);
        assert_eq!(t.qdiscs[0].kind, QdiscKind::Htb { default: 1, r2q: 10, direct_qlen: None });
        assert_eq!(t.classes[0].rate, Rate::from_bps(100_000_000));
        assert_eq!(t.classes[0].ceil, t.classes[0].rate);
        assert_eq!(t.classes[0].mtu, 9000);
        assert_eq!(t.qdiscs[1].kind, QdiscKind::Pfifo(None));
        assert!(matches!(&t.qdiscs[2].kind, QdiscKind::Other { kind, .. } if kind == "fq_codel"));
    }

    #[test]
    fn htb_default_is_hex_and_errors_name_the_line() {
        let t = Tree::parse_script("tc qdisc add dev x root handle 1: htb default 10", &HashMap::new(), None)
            .unwrap();
        assert_eq!(t.qdiscs[0].kind, QdiscKind::Htb { default: 0x10, r2q: 10, direct_qlen: None });
        let e = Tree::parse_script(
            "\ntc class add dev x parent 1: classid 1:1 htb ceil 1mbit",
            &HashMap::new(),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = Tree::parse_script("tc qdisc add dev x root tbf rate 1mbit burst 10k", &HashMap::new(), None)
            .unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
    }
}

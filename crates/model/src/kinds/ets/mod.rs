//! The `ets` qdisc in tc's language: iproute2's grammar (`q_ets.c`: `bands`, `strict`, `quanta`,
//! `priomap`, and the class's `quantum`), the kernel's `ets_qdisc_change` and `ets_class_change`
//! checks, what `tc qdisc show` and `tc class show` print, and the `TCA_OPTIONS` tc sends.
//!
//! The kernel's rules: `bands` (1..=16) is required, tc derives it from `strict` + the number of
//! quanta when not given; the first `strict` bands are strict, the rest share by DRR with the
//! quanta given in order, the device's psched_mtu for those not given; priomap entries not
//! given name the last band. A `change` sets everything anew (nothing is kept from before), and
//! the qdiscs of bands that go away go with them. Classes `1..=bands` always exist; a class
//! change sets one DRR band's quantum (strict bands have none).

use super::{
    block_at, BuildCx, ClassChange, ClassKind, ClassList, ClassShowCx, DecodeError, QdiscKind, Unencodable,
    TCA_OPTIONS,
};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::helpers::*;
use crate::json::J;
use crate::model::{Device, QdiscNode, QdiscOpts, H_ROOT};
use crate::nlattr::{attrs, u32_of, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::classify::{ClassShape, Fallback, QdiscShape, ShapeKind};
use sluice_core::ets::{Ets as Core, EtsConfig};
use sluice_core::{Handle, Qdisc};
use std::fmt::Write;

/// ets, as tc sent it and the kernel keeps it: `quanta` are the DRR bands' quanta from band
/// `strict` on (those not given are the device's psched_mtu), `priomap` the entries given
/// (those not given name the last band). See the module's documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtsOpts {
    /// Number of bands, 1..=16.
    pub bands: u8,
    /// Strict bands (the first ones).
    #[serde(default)]
    pub strict: u8,
    /// Quanta of the first DRR bands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quanta: Vec<u32>,
    /// Band of priorities 0, 1, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priomap: Vec<u8>,
}

/// The kind (the qdisc; class changes are [`EtsClass`]).
pub struct Ets;

/// ETS classes: the qdisc's bands, whose quanta a class change sets.
pub struct EtsClass;

/// A class change (`tc class change ... ets [quantum N]`): ETS classes are the qdisc's bands,
/// kept in its [`EtsOpts`]; no class node holds this.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtsClassOpts {
    /// The band's new quantum.
    pub quantum: Option<u32>,
}

impl QdiscKind for Ets {
    const NAME: &'static str = "ets";
    const CLASSFUL: bool = true;
    type Opts = EtsOpts;

    fn parse(cur: &mut Cur) -> Result<EtsOpts, TcError> {
        parse(cur)
    }

    fn args(o: &EtsOpts) -> String {
        args(o)
    }

    fn show(o: &EtsOpts, dev: &Device, _d: bool) -> String {
        options(o, dev)
    }

    /// `ets_print_opt`: bands, strict (when any), the DRR bands' quanta, the priomap.
    fn json(o: &EtsOpts, dev: &Device, _d: bool) -> J {
        let mut j = J::obj();
        j.put("bands", o.bands as u32);
        if o.strict > 0 {
            j.put("strict", o.strict as u32);
        }
        let all = quanta(o, dev.psched_mtu());
        if o.bands > o.strict {
            j.put("quanta", J::Arr(all[o.strict as usize..].iter().map(|&q| J::from(q)).collect()));
        }
        j.put("priomap", J::Arr(priomap(o).iter().map(|&b| J::from(b as u32)).collect()));
        j
    }

    /// `ets_qdisc_change`: everything is set anew (nothing is kept from before).
    fn change(_dev: &Device, n: EtsOpts, _old: Option<&EtsOpts>) -> Result<EtsOpts, TcError> {
        kernel_check(&n)?;
        Ok(n)
    }

    /// `TCA_OPTIONS` with `NLA_F_NESTED`, as tc sends it.
    fn encode(o: &EtsOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.begin_nest(TCA_OPTIONS | attr::NESTED);
        put_options(o, out);
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<EtsOpts, DecodeError> {
        let short = |what: &str| DecodeError::new("ets", format!("{what} is short"));
        let mut o = EtsOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            match ty {
                attr::NBANDS => o.bands = *p.first().ok_or_else(|| short("NBANDS"))?,
                attr::NSTRICT => o.strict = *p.first().ok_or_else(|| short("NSTRICT"))?,
                attr::QUANTA => {
                    for (_, q) in attrs(p).filter(|(t, _)| *t == attr::QUANTA_BAND) {
                        o.quanta.push(u32_of(q).ok_or_else(|| short("QUANTA_BAND"))?);
                    }
                }
                attr::PRIOMAP => {
                    for (_, b) in attrs(p).filter(|(t, _)| *t == attr::PRIOMAP_BAND) {
                        o.priomap.push(*b.first().ok_or_else(|| short("PRIOMAP_BAND"))?);
                    }
                }
                _ => {}
            }
        }
        Ok(o)
    }

    const CLASS_OPS: bool = true;

    /// Classes `1..=bands`, always.
    fn has_class(o: &EtsOpts, _dev: &Device, _q: &QdiscNode, classid: Handle) -> bool {
        has_class(o, classid.minor())
    }

    fn classes(o: &EtsOpts, _dev: &Device, q: &QdiscNode) -> ClassList {
        ClassList::Implicit(
            (1..=o.bands as u32).map(|b| (Handle::new(q.handle.major(), b), H_ROOT)).collect(),
        )
    }

    /// Filters go on the qdisc only.
    fn filter_block(_o: &EtsOpts, dev: &Device, q: &QdiscNode, parent: Handle) -> Result<Handle, TcError> {
        block_at(dev, q, parent, || Err(TcError::kernel("ETS classid must be zero")))
    }

    fn build(o: &EtsOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        build(o, q, cx)
    }
}

impl ClassKind for EtsClass {
    type Qdisc = Ets;
    type Opts = EtsClassOpts;

    fn parse(cur: &mut Cur) -> Result<EtsClassOpts, TcError> {
        Ok(EtsClassOpts { quantum: parse_class(cur)? })
    }

    fn args(o: &EtsClassOpts) -> String {
        o.quantum.map(|q| format!(" quantum {q}")).unwrap_or_default()
    }

    /// The band's quantum (strict bands print none).
    fn show(_o: Option<&EtsClassOpts>, qo: &EtsOpts, cx: &ClassShowCx<'_>) -> (String, String) {
        (class_options(qo, cx.dev, cx.id.minor()), String::new())
    }

    /// `ets_class_change`: bands are neither added nor removed; a quantum goes to its DRR band.
    fn change(o: EtsClassOpts, cx: ClassChange<'_>) -> Result<Vec<String>, TcError> {
        if !cx.exists {
            return Err(TcError::kernel("Fine-grained class addition and removal is not supported"));
        }
        let mtu = cx.dev.psched_mtu();
        if let Some(QdiscNode { opts: QdiscOpts::Ets(e), .. }) =
            cx.dev.qdiscs.iter_mut().find(|x| x.handle == cx.q.handle)
        {
            class_change(e, mtu, cx.clid.minor(), o.quantum)?;
        }
        Ok(Vec::new())
    }

    /// `TCA_OPTIONS` with `NLA_F_NESTED`, holding `TCA_ETS_QUANTA_BAND` when given.
    fn encode(o: &EtsClassOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.begin_nest(TCA_OPTIONS | attr::NESTED);
        if let Some(q) = o.quantum {
            out.put_u32(attr::QUANTA_BAND, q);
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<EtsClassOpts, DecodeError> {
        let mut o = EtsClassOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            if ty == attr::QUANTA_BAND {
                o.quantum = Some(u32_of(p).ok_or_else(|| DecodeError::new("ets", "QUANTA_BAND is short"))?);
            }
        }
        Ok(o)
    }

    fn label(o: &EtsClassOpts) -> Vec<String> {
        vec![format!("quantum {}", o.quantum.map(|q| q.to_string()).unwrap_or("mtu".into()))]
    }
}

const USAGE: &str = "Usage: ... ets [bands NUMBER] [strict NUMBER] [quanta Q1 Q2...] [priomap P1 P2...]";
const CLASS_USAGE: &str = "Usage: ... ets [quantum Q1]";

/// `TCQ_ETS_MAX_BANDS`.
const MAX_BANDS: u32 = 16;

/// `TCA_ETS_*` (`linux/pkt_sched.h`).
pub mod attr {
    /// u8.
    pub const NBANDS: u16 = 1;
    /// u8.
    pub const NSTRICT: u16 = 2;
    /// Nested `QUANTA_BAND`s.
    pub const QUANTA: u16 = 3;
    /// u32 (also the class's one option).
    pub const QUANTA_BAND: u16 = 4;
    /// Nested `PRIOMAP_BAND`s.
    pub const PRIOMAP: u16 = 5;
    /// u8.
    pub const PRIOMAP_BAND: u16 = 6;
    /// `NLA_F_NESTED`, which tc sets on every nest it opens for ets.
    pub const NESTED: u16 = 0x8000;
}

/// `get_unsigned(.., 10)`: decimal digits (an optional `+`), at most `u32::MAX`.
fn unsigned(v: &str) -> Option<u32> {
    let d = v.strip_prefix('+').unwrap_or(v);
    if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    d.parse().ok()
}

fn usage_err(msg: &str, at: usize) -> TcError {
    TcError::usage(format!("{msg}\n{USAGE}"), Some(at))
}

/// `parse_quantum`.
fn quantum(v: &str, at: usize) -> Result<u32, TcError> {
    match unsigned(v) {
        None => Err(TcError::usage("Illegal \"quanta\" element", Some(at))),
        Some(0) => Err(TcError::usage("\"quanta\" must be > 0", Some(at))),
        Some(q) => Ok(q),
    }
}

/// `parse_nbands`.
fn nbands(v: &str, at: usize, what: &str) -> Result<u8, TcError> {
    let n = unsigned(v).ok_or_else(|| TcError::usage(format!("Illegal \"{what}\""), Some(at)))?;
    if n > MAX_BANDS {
        return Err(TcError::usage(format!("The number of \"{what}\" must be <= {MAX_BANDS}"), Some(at)));
    }
    Ok(n as u8)
}

/// `ets_parse_opt`: what tc sends (tc's own checks included).
pub fn parse(cur: &mut Cur) -> Result<EtsOpts, TcError> {
    let mut o = EtsOpts::default();
    let (mut quanta_mode, mut priomap_mode) = (false, false);
    let start = cur.pos;
    while let Some((at, w)) = cur.next_word() {
        match w {
            "bands" | "strict" => {
                let slot = if w == "bands" { o.bands } else { o.strict };
                if slot != 0 {
                    return Err(TcError::usage(format!("Duplicate \"{w}\""), Some(at)));
                }
                let (i, v) = cur.value()?;
                let n = nbands(v, i, w)?;
                if w == "bands" {
                    o.bands = n;
                } else {
                    o.strict = n;
                }
                quanta_mode = false;
                priomap_mode = false;
            }
            "quanta" | "priomap" => {
                let given = if w == "quanta" { !o.quanta.is_empty() } else { !o.priomap.is_empty() };
                if given {
                    return Err(TcError::usage(format!("Duplicate \"{w}\""), Some(at)));
                }
                let (i, v) = cur.value()?;
                quanta_mode = w == "quanta";
                priomap_mode = !quanta_mode;
                element(&mut o, quanta_mode, v, i)?;
            }
            "help" => return Err(TcError::usage(USAGE, Some(at))),
            _ if quanta_mode || priomap_mode => element(&mut o, quanta_mode, w, at)?,
            _ => return Err(usage_err(&format!("What is \"{w}\"?"), at)),
        }
    }
    if o.bands == 0 {
        // tc keeps the sum in a u8 (more than 16 quanta are the kernel's to refuse).
        o.bands = (o.quanta.len() + o.strict as usize).min(u8::MAX as usize) as u8;
    }
    if o.bands == 0 {
        return Err(usage_err("One of \"bands\", \"quanta\" or \"strict\" needs to be specified", start));
    }
    if o.strict as usize + o.quanta.len() > o.bands as usize {
        return Err(usage_err("Not enough total bands to cover all the strict bands and quanta", start));
    }
    if o.priomap.iter().any(|&b| b >= o.bands) {
        return Err(TcError::usage("\"priomap\" element is out of bounds", Some(start)));
    }
    Ok(o)
}

fn element(o: &mut EtsOpts, quanta: bool, v: &str, at: usize) -> Result<(), TcError> {
    if quanta {
        o.quanta.push(quantum(v, at)?);
        return Ok(());
    }
    let band = unsigned(v).ok_or_else(|| TcError::usage("Illegal \"priomap\" element", Some(at)))?;
    if o.priomap.len() > 15 {
        return Err(TcError::usage("\"priomap\" index cannot be higher than 15", Some(at)));
    }
    // tc keeps each entry in a u8 (256 is band 0).
    o.priomap.push(band as u8);
    Ok(())
}

/// `ets_parse_copt`: the class's `quantum`, if given.
pub fn parse_class(cur: &mut Cur) -> Result<Option<u32>, TcError> {
    let mut q = None;
    while let Some((at, w)) = cur.next_word() {
        match w {
            "quantum" => {
                if q.is_some() {
                    return Err(TcError::usage("Duplicate \"quantum\"", Some(at)));
                }
                let (i, v) = cur.value()?;
                q = Some(quantum(v, i)?);
            }
            "help" => return Err(TcError::usage(CLASS_USAGE, Some(at))),
            _ => return Err(TcError::usage(format!("What is \"{w}\"?\n{CLASS_USAGE}"), Some(at))),
        }
    }
    Ok(q)
}

/// `ets_qdisc_change`'s checks on what tc sent.
pub fn kernel_check(o: &EtsOpts) -> Result<(), TcError> {
    if !(1..=MAX_BANDS).contains(&(o.bands as u32)) {
        return Err(TcError::kernel("sch_ets: Invalid number of bands"));
    }
    if o.strict > o.bands {
        return Err(TcError::kernel("sch_ets: Invalid number of strict bands"));
    }
    if o.priomap.len() > 16 {
        return Err(TcError::kernel("sch_ets: Too many priorities in ETS priomap"));
    }
    if o.priomap.iter().any(|&b| b >= o.bands) {
        return Err(TcError::kernel("sch_ets: Invalid band number in ETS priomap"));
    }
    if o.strict as usize + o.quanta.len() > o.bands as usize {
        return Err(TcError::kernel("sch_ets: ETS quanta has more values than bands"));
    }
    if o.quanta.contains(&0) {
        return Err(TcError::kernel("ETS quantum cannot be zero"));
    }
    Ok(())
}

/// Every band's quantum as the kernel keeps it (0 for strict bands).
pub fn quanta(o: &EtsOpts, psched_mtu: u32) -> Vec<u32> {
    (0..o.bands as usize)
        .map(|b| match b.checked_sub(o.strict as usize) {
            None => 0,
            Some(i) => o.quanta.get(i).copied().unwrap_or(psched_mtu),
        })
        .collect()
}

/// The 16-entry priomap as the kernel keeps it.
pub fn priomap(o: &EtsOpts) -> [u8; 16] {
    let mut m = [o.bands.saturating_sub(1); 16];
    for (slot, b) in m.iter_mut().zip(&o.priomap) {
        *slot = *b;
    }
    m
}

/// True when class minor `minor` exists.
pub fn has_class(o: &EtsOpts, minor: u32) -> bool {
    (1..=o.bands as u32).contains(&minor)
}

/// `ets_class_change` of band `minor - 1` (the class exists): `None` changes nothing.
pub fn class_change(
    o: &mut EtsOpts,
    psched_mtu: u32,
    minor: u32,
    quantum: Option<u32>,
) -> Result<(), TcError> {
    let Some(q) = quantum else { return Ok(()) };
    let band = minor as usize - 1;
    if band < o.strict as usize {
        return Err(TcError::kernel("Strict bands do not have a configurable quantum"));
    }
    let mut all: Vec<u32> = quanta(o, psched_mtu).split_off(o.strict as usize);
    all[band - o.strict as usize] = q;
    o.quanta = all;
    Ok(())
}

/// What `tc qdisc show` prints after `refcnt N `.
pub fn options(o: &EtsOpts, dev: &Device) -> String {
    let mut s = format!("bands {} ", o.bands);
    if o.strict > 0 {
        let _ = write!(s, "strict {} ", o.strict);
    }
    if o.bands > o.strict {
        s.push_str("quanta");
        for q in &quanta(o, dev.psched_mtu())[o.strict as usize..] {
            let _ = write!(s, " {q}");
        }
        s.push(' ');
    }
    s.push_str("priomap");
    for b in priomap(o) {
        let _ = write!(s, " {b}");
    }
    s.push(' ');
    s
}

/// What `tc class show` prints for class `minor` after the parent and leaf.
pub fn class_options(o: &EtsOpts, dev: &Device, minor: u32) -> String {
    let band = minor as usize - 1;
    match quanta(o, dev.psched_mtu()).get(band) {
        Some(q) if band >= o.strict as usize => format!("quantum {q} "),
        _ => String::new(),
    }
}

/// tc's arguments for these options (`sluice apply --dry-run`, exports).
pub fn args(o: &EtsOpts) -> String {
    let mut s = format!(" bands {}", o.bands);
    if o.strict > 0 {
        let _ = write!(s, " strict {}", o.strict);
    }
    if !o.quanta.is_empty() {
        s.push_str(" quanta");
        for q in &o.quanta {
            let _ = write!(s, " {q}");
        }
    }
    if !o.priomap.is_empty() {
        s.push_str(" priomap");
        for b in &o.priomap {
            let _ = write!(s, " {b}");
        }
    }
    s
}

/// `NBANDS`, `NSTRICT` when not 0, the `QUANTA` nest when quanta were given, the `PRIOMAP` nest
/// when a priomap was (tc sets `NLA_F_NESTED` on both).
fn put_options(o: &EtsOpts, out: &mut Attrs) {
    out.put_u8(attr::NBANDS, o.bands);
    if o.strict > 0 {
        out.put_u8(attr::NSTRICT, o.strict);
    }
    if !o.quanta.is_empty() {
        out.begin_nest(attr::QUANTA | attr::NESTED);
        for q in &o.quanta {
            out.put_u32(attr::QUANTA_BAND, *q);
        }
        out.end_nest();
    }
    if !o.priomap.is_empty() {
        out.begin_nest(attr::PRIOMAP | attr::NESTED);
        for p in &o.priomap {
            out.put_u8(attr::PRIOMAP_BAND, *p);
        }
        out.end_nest();
    }
}

/// The payload of `TCA_OPTIONS` (sent with `NLA_F_NESTED`) as tc writes it (see `put_options`).
pub fn netlink_options(o: &EtsOpts) -> Vec<u8> {
    let mut a = Attrs::new();
    put_options(o, &mut a);
    a.into_bytes()
}

/// ETS: its bands (quanta resolved, default pfifo or the grafted qdisc) and a prio-like shape
/// (band by the result's minor, else the priomap).
fn build(e: &EtsOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
    let dev = cx.dev;
    let major = q.handle.major();
    let priomap = priomap(e);
    let mut ets = Core::new(EtsConfig {
        nbands: e.bands as usize,
        nstrict: e.strict as usize,
        quanta: quanta(e, dev.psched_mtu()),
        priomap,
        major,
        tos_mapping: Default::default(),
        default_limit: dev.txqueuelen,
    })?;
    let mut classes = Vec::new();
    for b in 0..e.bands as u32 {
        let id = Handle::new(major, b + 1);
        let child = dev.qdisc_at(id);
        if let Some(c) = child {
            ets.set_band_qdisc(b as usize, Some(cx.child(c)?))?;
        }
        let child = child.filter(|c| c.opts.is_classful()).map(|c| c.handle);
        classes.push(ClassShape { classid: id, inner: false, child });
    }
    let fallback = Fallback::Priomap(priomap.map(|b| Handle::new(major, b as u32 + 1)));
    cx.cls
        .set_shape(QdiscShape { handle: q.handle, kind: ShapeKind::Bands, classes, fallback })
        .map_err(BuildError::Filter)?;
    Ok(Box::new(ets))
}

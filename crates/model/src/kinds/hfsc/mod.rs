//! The `hfsc` qdisc and its classes in tc's language: iproute2 6.1's grammar (`q_hfsc.c`: the
//! `m1 d m2` and `umax dmax rate` forms and tc's conversion of the second), the kernel's
//! `hfsc_change_class` rules, and `tc class show` as the kernel reports the curves back
//! (`hfsc_dump_sc`, through the fixed-point form). The qdisc is [`Hfsc`], its classes
//! [`HfscClass`] (the kernel's `sch_hfsc.c`; the algorithm is `sluice_core::hfsc`).

use super::{
    block_at, BuildCx, ClassChange, ClassKind, ClassList, ClassShowCx, DecodeError, QdiscKind, Unencodable,
    TCA_OPTIONS,
};
use crate::build::{set_default_class_shape, BuildError};
use crate::error::TcError;
use crate::grammar::{matches, Cur};
use crate::json::J;
use crate::model::{ClassNode, ClassOpts, Device, QdiscNode, QdiscOpts};
use crate::nlattr::{attrs, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::classify::ClassShape;
use sluice_core::hfsc::{Curves, ServiceCurve};
use sluice_core::units::{format_rate, format_time, parse_rate, parse_size, parse_time};
use sluice_core::{Handle, Qdisc, Rate, Span};
use std::fmt::Write;

/// HFSC qdisc options (`struct tc_hfsc_qopt`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscOpts {
    /// Minor of the class unclassified packets go to (0: none, or the root class while there are
    /// no classes).
    #[serde(default)]
    pub default: u16,
    /// The root class's curves (`tc class change ... classid X: hfsc ...`). The kernel keeps and
    /// prints them; they shape nothing, since the root class takes part in no parent's
    /// virtual time and is never a leaf once the tree has classes.
    #[serde(default, skip_serializing_if = "HfscClassOpts::is_empty")]
    pub root_class: HfscClassOpts,
}

/// HFSC class curves as the kernel holds them (`tc class change` replaces the curves it sends and
/// keeps the others); see `crate::kinds::hfsc`. Values are tc's: bytes per second and µs.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscClassOpts {
    /// Real-time curve.
    pub rt: Option<sluice_core::hfsc::ServiceCurve>,
    /// Link-share curve.
    pub ls: Option<sluice_core::hfsc::ServiceCurve>,
    /// Upper-limit curve.
    pub ul: Option<sluice_core::hfsc::ServiceCurve>,
}

impl HfscClassOpts {
    /// No curve set.
    pub fn is_empty(&self) -> bool {
        self.rt.is_none() && self.ls.is_none() && self.ul.is_none()
    }
}

/// The kind (the qdisc; its classes are [`HfscClass`]).
pub struct Hfsc;

impl QdiscKind for Hfsc {
    const NAME: &'static str = "hfsc";
    const CLASSFUL: bool = true;
    type Opts = HfscOpts;

    fn parse(cur: &mut Cur) -> Result<HfscOpts, TcError> {
        parse_qdisc(cur)
    }

    fn args(o: &HfscOpts) -> String {
        export_qdisc_args(o)
    }

    fn show(o: &HfscOpts, _dev: &Device, _d: bool) -> String {
        qdisc_options(o)
    }

    /// `hfsc_print_opt`: the default class as hex.
    fn json(o: &HfscOpts, _dev: &Device, _d: bool) -> J {
        let mut j = J::obj();
        j.put("default", format!("{:#x}", o.default));
        j
    }

    /// `hfsc_change_qdisc` changes `default` only: the root class keeps its curves.
    fn change(_dev: &Device, mut n: HfscOpts, old: Option<&HfscOpts>) -> Result<HfscOpts, TcError> {
        if let Some(o) = old {
            n.root_class = o.root_class.clone();
        }
        Ok(n)
    }

    /// `struct tc_hfsc_qopt`: the default class minor, a bare `u16` (padded).
    fn encode(o: &HfscOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.put(TCA_OPTIONS, &o.default.to_ne_bytes());
        Ok(())
    }

    /// The qdisc's options (the root class's curves are a class request's).
    fn decode(options: Option<&[u8]>) -> Result<HfscOpts, DecodeError> {
        let Some(p) = options else { return Ok(HfscOpts::default()) };
        let b: [u8; 2] = p
            .get(..2)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| DecodeError::new("hfsc", "tc_hfsc_qopt is short"))?;
        Ok(HfscOpts { default: u16::from_ne_bytes(b), ..HfscOpts::default() })
    }

    const CLASS_OPS: bool = true;

    /// The root class is the qdisc's own handle.
    fn has_class(_o: &HfscOpts, dev: &Device, _q: &QdiscNode, classid: Handle) -> bool {
        classid.minor() == 0 || dev.class(classid).is_some()
    }

    fn classes(_o: &HfscOpts, _dev: &Device, _q: &QdiscNode) -> ClassList {
        ClassList::Nodes { root_class: true }
    }

    /// An inner class keeps its qdisc but reports no leaf.
    fn class_leaf<'d>(_o: &HfscOpts, dev: &'d Device, _q: &QdiscNode, id: Handle) -> Option<&'d QdiscNode> {
        dev.qdisc_at(id).filter(|_| dev.child_classes(id).next().is_none())
    }

    /// The root class cannot go.
    fn class_in_use(_o: &HfscOpts, q: &QdiscNode, clid: Handle) -> Result<&'static str, TcError> {
        if clid == q.handle {
            return Err(TcError::kernel("HFSC class in use"));
        }
        Ok("HFSC class in use")
    }

    /// Each class has a block of its own.
    fn filter_block(_o: &HfscOpts, dev: &Device, q: &QdiscNode, parent: Handle) -> Result<Handle, TcError> {
        block_at(dev, q, parent, || Ok(parent))
    }

    fn build(o: &HfscOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        build(o.default, q, cx)
    }
}

/// HFSC classes.
pub struct HfscClass;

/// `TCA_HFSC_*` of classes.
mod attr {
    pub const RSC: u16 = 1;
    pub const FSC: u16 = 2;
    pub const USC: u16 = 3;
}

impl ClassKind for HfscClass {
    type Qdisc = Hfsc;
    type Opts = HfscClassOpts;

    fn parse(cur: &mut Cur) -> Result<HfscClassOpts, TcError> {
        parse_class(cur)
    }

    fn args(o: &HfscClassOpts) -> String {
        export_class_args(o)
    }

    /// The curves (the root class's from the qdisc), and `-s`'s period and level lines.
    fn show(o: Option<&HfscClassOpts>, qo: &HfscOpts, cx: &ClassShowCx<'_>) -> (String, String) {
        let text = class_options(o.unwrap_or(&qo.root_class));
        (text, class_xstats(level(cx.dev, cx.q, cx.id)))
    }

    fn change(o: HfscClassOpts, cx: ClassChange<'_>) -> Result<Vec<String>, TcError> {
        class_modify(cx.dev, cx.q, cx.clid, cx.parent, cx.exists, &o)
    }

    /// `TCA_OPTIONS` holding `TCA_HFSC_RSC`, `FSC` and `USC`, each a `struct tc_service_curve`
    /// (m1, d, m2), the ones the class has, in that order.
    fn encode(o: &HfscClassOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.begin_nest(TCA_OPTIONS);
        for (ty, sc) in [(attr::RSC, o.rt), (attr::FSC, o.ls), (attr::USC, o.ul)] {
            if let Some(sc) = sc {
                let mut b = Vec::with_capacity(12);
                for v in [sc.m1, sc.d, sc.m2] {
                    b.extend_from_slice(&v.to_ne_bytes());
                }
                out.put(ty, &b);
            }
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<HfscClassOpts, DecodeError> {
        let mut o = HfscClassOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            let [m1, d, m2] = crate::nlattr::u32s::<3>(p)
                .ok_or_else(|| DecodeError::new("hfsc", "struct tc_service_curve is short"))?;
            let sc = Some(ServiceCurve { m1, d, m2 });
            match ty {
                attr::RSC => o.rt = sc,
                attr::FSC => o.ls = sc,
                attr::USC => o.ul = sc,
                _ => {}
            }
        }
        Ok(o)
    }

    fn label(o: &HfscClassOpts) -> Vec<String> {
        vec![class_options(o).trim_end().to_string()]
    }

    /// The guarantee is the real-time (else link-share) rate; the cap the upper limit, if any.
    fn rates(o: &HfscClassOpts) -> (f64, f64) {
        let m2 = |c: Option<ServiceCurve>| c.map_or(0.0, |c| c.m2 as f64 * 8.0);
        (if o.rt.is_some() { m2(o.rt) } else { m2(o.ls) }, m2(o.ul))
    }
}

const QDISC_USAGE: &str =
    "Usage: ... hfsc [ default CLASSID ]\n\n default: default class for unclassified packets\n";

const CLASS_USAGE: &str = "Usage: ... hfsc [ [ rt SC ] [ ls SC ] | [ sc SC ] ] [ ul SC ]\n\nSC := [ [ m1 BPS ] d SEC ] m2 BPS\n\n m1 : slope of first segment\n d  : x-coordinate of intersection\n m2 : slope of second segment\n\nAlternative format:\n\nSC := [ [ umax BYTE ] dmax SEC ] rate BPS\n\n umax : maximum unit of work\n dmax : maximum delay\n rate : rate\n\nRemarks:\n - at least one of 'rt', 'ls' or 'sc' must be specified\n - 'ul' can only be specified with 'ls' or 'sc'\n";

/// tc's `explain1`.
fn illegal(what: &str) -> String {
    format!("HFSC: Illegal \"{what}\"")
}

fn incomplete(at: usize) -> TcError {
    TcError::fatal("Command line is not complete. Try option \"help\"", Some(at))
}

/// `hfsc_parse_opt`.
pub fn parse_qdisc(cur: &mut Cur) -> Result<HfscOpts, TcError> {
    let mut o = HfscOpts::default();
    while let Some((at, w)) = cur.next_word() {
        if matches(w, "default") {
            let (i, v) = cur.value()?;
            if o.default != 0 {
                return Err(TcError::usage("HFSC: Double \"default\"", Some(i)));
            }
            o.default = get_u16_hex(v).ok_or_else(|| TcError::usage(illegal("default"), Some(i)))?;
        } else if matches(w, "help") {
            return Err(TcError::usage(QDISC_USAGE, Some(at)));
        } else {
            return Err(TcError::usage(format!("HFSC: What is \"{w}\" ?\n{QDISC_USAGE}"), Some(at)));
        }
    }
    Ok(o)
}

/// `get_u16(..., 16)`: hex with an optional `0x`, the whole word, at most `ffff`.
fn get_u16_hex(s: &str) -> Option<u16> {
    let t = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if t.is_empty() {
        return None;
    }
    u16::from_str_radix(t, 16).ok()
}

/// `get_rate`: bytes per second, refused above 32 bits.
fn get_rate(s: &str) -> Option<u32> {
    let r = parse_rate(s).ok()?;
    u32::try_from(r.bps() / 8).ok()
}

/// `get_time`: µs.
fn get_time(s: &str) -> Option<u32> {
    u32::try_from(parse_time(s).ok()?.as_nanos() / 1000).ok()
}

/// One `SC` form parsed at `argv[i]` onwards: the curve and the index of its last word, or the
/// lines tc printed (possibly none) when this form does not apply.
type ScResult = Result<(ServiceCurve, usize), Vec<String>>;

/// `argv[i]`, or tc's "not complete" exit (`NEXT_ARG`).
fn word(argv: &[String], i: usize) -> Result<&str, TcError> {
    argv.get(i).map(|s| s.as_str()).ok_or_else(|| incomplete(i.saturating_sub(1)))
}

/// `hfsc_get_sc1`: `[ [ m1 BPS ] d SEC ] m2 BPS`.
fn get_sc1(argv: &[String], mut i: usize) -> Result<ScResult, TcError> {
    let (mut m1, mut d) = (0, 0);
    if matches(word(argv, i)?, "m1") {
        i += 1;
        match get_rate(word(argv, i)?) {
            Some(v) => m1 = v,
            None => return Ok(Err(vec![illegal("m1")])),
        }
        i += 1;
        word(argv, i)?;
    }
    if matches(word(argv, i)?, "d") {
        i += 1;
        match get_time(word(argv, i)?) {
            Some(v) => d = v,
            None => return Ok(Err(vec![illegal("d")])),
        }
        i += 1;
        word(argv, i)?;
    }
    if !matches(word(argv, i)?, "m2") {
        return Ok(Err(Vec::new()));
    }
    i += 1;
    match get_rate(word(argv, i)?) {
        Some(m2) => Ok(Ok((ServiceCurve { m1, d, m2 }, i))),
        None => Ok(Err(vec![illegal("m2")])),
    }
}

/// `hfsc_get_sc2`: `[ [ umax BYTE ] dmax SEC ] rate BPS`, converted as tc converts it.
fn get_sc2(argv: &[String], mut i: usize) -> Result<ScResult, TcError> {
    let (mut umax, mut dmax) = (0u32, 0u32);
    if matches(word(argv, i)?, "umax") {
        i += 1;
        match parse_size(word(argv, i)?).ok().and_then(|v| u32::try_from(v).ok()) {
            Some(v) => umax = v,
            None => return Ok(Err(vec![illegal("umax")])),
        }
        i += 1;
        word(argv, i)?;
    }
    if matches(word(argv, i)?, "dmax") {
        i += 1;
        match get_time(word(argv, i)?) {
            Some(v) => dmax = v,
            None => return Ok(Err(vec![illegal("dmax")])),
        }
        i += 1;
        word(argv, i)?;
    }
    if !matches(word(argv, i)?, "rate") {
        return Ok(Err(Vec::new()));
    }
    i += 1;
    let Some(rate) = get_rate(word(argv, i)?) else {
        return Ok(Err(vec![illegal("rate")]));
    };
    if umax != 0 && dmax == 0 {
        return Ok(Err(vec!["HFSC: umax given but dmax is zero.".into()]));
    }
    let steep = if dmax != 0 { (umax as f64 * 1e6 / dmax as f64).ceil() } else { 0.0 };
    let sc = if dmax != 0 && steep > rate as f64 {
        // Concave: slope umax/dmax up to dmax.
        ServiceCurve { m1: steep as u32, d: dmax, m2: rate }
    } else {
        // Convex: flat until dmax - umax/rate, in tc's unsigned 32-bit arithmetic.
        if rate == 0 {
            return Ok(Err(vec![illegal("rate")]));
        }
        let d = dmax.wrapping_sub(umax.wrapping_mul(1_000_000) / rate);
        ServiceCurve { m1: 0, d, m2: rate }
    };
    Ok(Ok((sc, i)))
}

/// `hfsc_get_sc`: either form, then the two-zero-slopes check. On success the cursor is past it.
fn get_sc(cur: &mut Cur, key: &str) -> Result<ServiceCurve, TcError> {
    let start = cur.pos;
    let r = match get_sc1(cur.argv, start)? {
        Ok(x) => Ok(x),
        Err(mut lines) => match get_sc2(cur.argv, start)? {
            Ok(x) => Ok(x),
            Err(more) => {
                lines.extend(more);
                Err(lines)
            }
        },
    };
    let (sc, last) = match r {
        Ok(x) => x,
        Err(mut lines) => {
            lines.push(illegal(key));
            return Err(TcError::usage(lines.join("\n"), Some(start)));
        }
    };
    if sc.is_zero() {
        return Err(TcError::usage(
            format!("HFSC: Service Curve has two zero slopes\n{}", illegal(key)),
            Some(start),
        ));
    }
    cur.pos = last + 1;
    Ok(sc)
}

/// `hfsc_parse_class_opt`: the curves tc sends.
pub fn parse_class(cur: &mut Cur) -> Result<HfscClassOpts, TcError> {
    let mut o = HfscClassOpts::default();
    while let Some((at, w)) = cur.next_word() {
        let key = if matches(w, "rt") {
            "rt"
        } else if matches(w, "ls") {
            "ls"
        } else if matches(w, "sc") {
            "sc"
        } else if matches(w, "ul") {
            "ul"
        } else if matches(w, "help") {
            return Err(TcError::usage(CLASS_USAGE, Some(at)));
        } else {
            return Err(TcError::usage(format!("HFSC: What is \"{w}\" ?\n{CLASS_USAGE}"), Some(at)));
        };
        if cur.peek().is_none() {
            return Err(incomplete(at));
        }
        let sc = get_sc(cur, key)?;
        match key {
            "rt" => o.rt = Some(sc),
            "ls" => o.ls = Some(sc),
            "sc" => {
                o.rt = Some(sc);
                o.ls = Some(sc);
            }
            _ => o.ul = Some(sc),
        }
    }
    if o.rt.is_none() && o.ls.is_none() && o.ul.is_none() {
        return Err(TcError::usage(format!("HFSC: no parameters given\n{CLASS_USAGE}"), Some(cur.pos)));
    }
    if o.ul.is_some() && o.ls.is_none() {
        return Err(TcError::usage(
            format!("HFSC: Upper-limit Service Curve without Link-Share Service Curve\n{CLASS_USAGE}"),
            Some(cur.pos),
        ));
    }
    Ok(o)
}

/// A curve the kernel acts on (both slopes zero: ignored).
fn given(sc: Option<ServiceCurve>) -> Option<ServiceCurve> {
    sc.filter(|s| !s.is_zero())
}

/// `hfsc_change_class` on the model: a change replaces the curves sent; a new class needs a
/// real-time or link-share curve, a classid of this qdisc, and a parent that is this qdisc's root
/// class or one of its classes (an `rt`-only parent takes its curve as link-share curve too, with
/// the kernel's warning).
pub fn class_modify(
    dev: &mut Device,
    q: &QdiscNode,
    clid: Handle,
    parent: Handle,
    exists: bool,
    opts: &HfscClassOpts,
) -> Result<Vec<String>, TcError> {
    let einval = || TcError::errno("Invalid argument");
    if exists {
        if clid == q.handle {
            // The root class has no parent: one named must be `root` (hfsc_change_class).
            if parent != Handle::UNSPEC && parent != crate::model::H_ROOT {
                return Err(einval());
            }
            if let Some(QdiscNode { opts: QdiscOpts::Hfsc(h), .. }) =
                dev.qdiscs.iter_mut().find(|x| x.handle == q.handle)
            {
                let cur = &mut h.root_class;
                cur.rt = given(opts.rt).or(cur.rt);
                cur.ls = given(opts.ls).or(cur.ls);
                cur.ul = given(opts.ul).or(cur.ul);
            }
            return Ok(Vec::new());
        }
        let Some(node) = dev.classes.iter_mut().find(|c| c.classid == clid) else {
            return Err(einval());
        };
        if parent != Handle::UNSPEC && node.parent != parent {
            return Err(einval());
        }
        if let ClassOpts::Hfsc(cur) = &mut node.opts {
            cur.rt = given(opts.rt).or(cur.rt);
            cur.ls = given(opts.ls).or(cur.ls);
            cur.ul = given(opts.ul).or(cur.ul);
        }
        return Ok(Vec::new());
    }
    if parent == crate::model::H_ROOT {
        return Err(TcError::errno("File exists"));
    }
    let parent = if parent.is_unspec() { q.handle } else { parent };
    if parent != q.handle && !dev.classes.iter().any(|c| c.classid == parent) {
        return Err(TcError::errno("No such file or directory"));
    }
    if clid.is_unspec() || clid.qdisc() != q.handle || clid.minor() == 0 {
        return Err(einval());
    }
    if given(opts.rt).is_none() && given(opts.ls).is_none() {
        return Err(einval());
    }
    let mut warnings = Vec::new();
    if let Some(p) = dev.classes.iter_mut().find(|c| c.classid == parent) {
        if let ClassOpts::Hfsc(po) = &mut p.opts {
            if po.ls.is_none() {
                po.ls = po.rt;
                warnings.push("Warning: Forced curve change on parent 'rt' to 'sc'".to_string());
            }
        }
    }
    let opts = HfscClassOpts { rt: given(opts.rt), ls: given(opts.ls), ul: given(opts.ul) };
    dev.classes.push(ClassNode {
        classid: clid,
        parent,
        opts: ClassOpts::Hfsc(opts),
        stats: Default::default(),
    });
    Ok(warnings)
}

/// The core's curves of a class.
pub fn curves(o: &HfscClassOpts) -> Curves {
    Curves { rt: o.rt, ls: o.ls, ul: o.ul }
}

/// `hfsc_print_opt`.
pub fn qdisc_options(o: &HfscOpts) -> String {
    if o.default != 0 {
        format!("default {:x} ", o.default)
    } else {
        String::new()
    }
}

fn print_sc(s: &mut String, name: &str, sc: &ServiceCurve) {
    let sc = sc.as_reported();
    let _ = write!(
        s,
        "{name} m1 {} d {} m2 {} ",
        format_rate(Rate::from_bps(sc.m1 as u64 * 8)),
        format_time(Span::from_micros(sc.d as u64)),
        format_rate(Rate::from_bps(sc.m2 as u64 * 8))
    );
}

/// `hfsc_print_class_opt`: `sc` when the real-time and link-share curves are the same.
pub fn class_options(o: &HfscClassOpts) -> String {
    let mut s = String::new();
    match (&o.rt, &o.ls) {
        (Some(r), Some(l)) if r.as_reported() == l.as_reported() => print_sc(&mut s, "sc", r),
        (r, l) => {
            if let Some(r) = r {
                print_sc(&mut s, "rt", r);
            }
            if let Some(l) = l {
                print_sc(&mut s, "ls", l);
            }
        }
    }
    if let Some(u) = &o.ul {
        print_sc(&mut s, "ul", u);
    }
    s
}

/// `hfsc_print_xstats` of an idle class (period 0, no work), then tc's empty line.
pub fn class_xstats(level: u32) -> String {
    format!(" period 0 level {level} \n\n")
}

/// The class's level: 0 for a leaf, one above its highest child (the root class `X:0` included).
pub fn level(dev: &Device, q: &QdiscNode, id: Handle) -> u32 {
    fn go(dev: &Device, q: &QdiscNode, id: Handle, depth: u32) -> u32 {
        if depth > 64 {
            return 0;
        }
        dev.classes
            .iter()
            .filter(|c| c.parent == id && c.classid != id && c.classid.qdisc() == q.handle)
            .map(|c| go(dev, q, c.classid, depth + 1) + 1)
            .max()
            .unwrap_or(0)
    }
    go(dev, q, id, 0)
}

/// Curves in tc syntax that read back to the same bytes per second and µs.
pub fn export_class_args(o: &HfscClassOpts) -> String {
    let mut s = String::new();
    let mut one = |name: &str, sc: &ServiceCurve| {
        let _ = write!(s, " {name} m1 {}bit d {}us m2 {}bit", sc.m1 as u64 * 8, sc.d, sc.m2 as u64 * 8);
    };
    if let Some(r) = &o.rt {
        one("rt", r);
    }
    if let Some(l) = &o.ls {
        one("ls", l);
    }
    if let Some(u) = &o.ul {
        one("ul", u);
    }
    s
}

/// The qdisc's options in tc syntax.
pub fn export_qdisc_args(o: &HfscOpts) -> String {
    if o.default != 0 {
        format!(" default {:x}", o.default)
    } else {
        String::new()
    }
}

/// HFSC: its classes (parents before children), their curves, the grafted qdiscs of leaves,
/// and the classifier's shape (filters on the qdisc and on inner classes; the `default` class when
/// it is a leaf).
fn build(default: u16, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
    let dev = cx.dev;
    let mut hfsc = sluice_core::hfsc::Hfsc::new(q.handle, default as u32, dev.txqueuelen);
    let classes: Vec<&ClassNode> = dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle).collect();
    // Parents first: a class is added once its parent is there (the model keeps creation
    // order, which already is such an order; this also survives a hand-edited state file).
    let mut added = vec![false; classes.len()];
    let mut progress = true;
    while progress {
        progress = false;
        for (i, c) in classes.iter().enumerate() {
            let ready =
                c.parent == q.handle || classes.iter().zip(&added).any(|(p, &a)| a && p.classid == c.parent);
            if added[i] || !ready {
                continue;
            }
            let ClassOpts::Hfsc(o) = &c.opts else { continue };
            hfsc.add_class(c.classid, c.parent, curves(o))?;
            added[i] = true;
            progress = true;
        }
    }
    // With no classes, the root class is the leaf (a qdisc may be grafted on `X:`).
    if dev.child_classes(q.handle).next().is_none() {
        if let Some(l) = dev.qdisc_at(q.handle) {
            hfsc.set_class_qdisc(q.handle, Some(cx.child(l)?))?;
        }
    }
    let mut shapes = Vec::new();
    for c in classes.iter().zip(&added).filter(|(_, &a)| a).map(|(c, _)| c) {
        let leaf = dev.child_classes(c.classid).next().is_none();
        let child = dev.qdisc_at(c.classid);
        if let (true, Some(l)) = (leaf, child) {
            hfsc.set_class_qdisc(c.classid, Some(cx.child(l)?))?;
        }
        let classful_child = child.filter(|l| leaf && l.opts.is_classful()).map(|l| l.handle);
        shapes.push(ClassShape { classid: c.classid, inner: !leaf, child: classful_child });
    }
    set_default_class_shape(cx, q, default as u32, shapes)?;
    Ok(Box::new(hfsc))
}

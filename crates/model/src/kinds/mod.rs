//! The kind registry: everything Sluice knows about each qdisc kind, one folder per kind, and the
//! one list ([`qdisc_registry!`] at the end of this file) that makes every dispatch.
//!
//! A kind implements [`QdiscKind`], in the shape of iproute2's `struct qdisc_util`
//! (`parse_qopt`, `print_qopt`, `print_xstats`) and the kernel's `struct Qdisc_ops` (`init`,
//! `change`, `dump`): its options as the model holds them, tc's words for them, how `tc qdisc
//! show` prints them (text, `-d`, `-s`, `-j`), the kernel's rules on add and change, the
//! `TCA_OPTIONS` tc sends, their decoding, and the running core object. Front ends and back ends
//! reach a kind only through the methods the list generates on [`QdiscOpts`]:
//! [`QdiscOpts::parse_kind`], [`QdiscOpts::args`], [`QdiscOpts::show`], [`QdiscOpts::json`],
//! [`QdiscOpts::change`], [`QdiscOpts::encode`], [`QdiscOpts::decode`], [`QdiscOpts::build`].
//!
//! Adding a kind: its algorithm in `sluice-core`, its folder here (`kinds/NAME/mod.rs`), one line
//! in the list, and a byte-for-byte netlink fixture captured from iproute2's tc
//! (`crates/kernel/tests/fixtures/`). The registry's property tests then cover it.
//!
//! Filters (classifiers) have their own trait, [`FilterKind`] (iproute2's `struct filter_util`,
//! the kernel's `struct tcf_proto_ops`), and list, [`filter_registry!`], which generates
//! [`FilterOpts`]; what every filter kind shares (the contexts of its hooks, the kernel's
//! `change` for classifiers keyed by one handle, the `classid`/`match` words) is in
//! [`filter_common`]. Adding a filter kind: its classifier in `sluice-core`, its folder here,
//! one line in that list, captured requests (`crates/kernel/tests/registry_netlink.rs` wants two)
//! and a block in `crates/model/tests/registry_props.rs`.
//!
//! Kinds not moved here yet are still dispatched by the older per-file matches (the generated
//! methods return `None` for them); see `docs/handoff.md`.

use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::Cur;
use crate::json::J;
use crate::model::{Action, Device, FilterNode, Handle, QdiscNode};
use crate::nlattr::Attrs;
use action_common::ActErr;
use filter_common::{FilterChange, FilterEncodeCx, FilterNl, FilterParseCx, FilterParsed, FilterReg};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use sluice_core::classify::Classifier;
use sluice_core::filter::action::Action as CoreAction;
use sluice_core::filter::action::Actions as CoreActions;
use sluice_core::filter::FilterConfig;
use sluice_core::Qdisc;
use std::fmt::Debug;

pub mod action_common;
pub mod basic;
pub mod cake;
pub mod clsact;
pub mod codel;
pub mod drr;
pub mod ematch;
pub mod ets;
pub mod fifo;
pub mod filter_common;
pub mod flow;
pub mod fq;
pub mod fq_codel;
pub mod fq_pie;
pub mod fw;
pub mod gact;
pub mod hfsc;
pub mod htb;
pub mod ingress;
pub mod matchall;
pub mod mirred;
pub mod mq;
pub mod netem;
pub mod pfifo_fast;
pub mod pie;
pub mod police;
pub mod prio;
pub mod red;
pub mod sfq;
pub mod skbedit;
pub mod tbf;
// `u32` would shadow the integer type in this module.
#[path = "u32/mod.rs"]
pub mod cls_u32;

/// `TCA_OPTIONS`: the attribute that holds a kind's options in a tc request.
pub const TCA_OPTIONS: u16 = 2;

/// Everything about one qdisc kind. Each method is one of tc's or the kernel's per-kind hooks.
pub trait QdiscKind {
    /// tc's name of the kind (`TCA_KIND`).
    const NAME: &'static str;
    /// The kind has classes that child qdiscs and filters can name.
    const CLASSFUL: bool = false;
    /// The kind sits at the ingress slot (`ffff:fff1`), and only such kinds may: the kernel's
    /// `TCQ_F_INGRESS` (ingress, clsact).
    const INGRESS: bool = false;
    /// The options as the model holds them: what tc sent, `None` for what was not given.
    type Opts: Clone + Debug + PartialEq + Default + Serialize + DeserializeOwned;

    /// tc's words after the kind name (`parse_qopt`), to the end of `cur`.
    fn parse(cur: &mut Cur) -> Result<Self::Opts, TcError>;

    /// [`QdiscKind::parse`], with the lines tc prints on stderr when it succeeds (RED reports
    /// the bandwidth it assumed and a burst it finds too large; most kinds print nothing).
    fn parse_warned(cur: &mut Cur) -> Result<(Self::Opts, Vec<String>), TcError> {
        Self::parse(cur).map(|o| (o, Vec::new()))
    }

    /// Words that [`QdiscKind::parse`] reads back as `o`, each with a leading space (export, the
    /// commands a dry run prints).
    fn args(o: &Self::Opts) -> String;

    /// What `tc qdisc show` prints after `refcnt N ` (`print_qopt`); `d` is `-d`.
    fn show(o: &Self::Opts, dev: &Device, d: bool) -> String;

    /// The `options` object of `tc -j qdisc show`.
    fn json(o: &Self::Opts, dev: &Device, d: bool) -> J;

    /// The kind's own statistics lines of `tc -s` (`print_xstats`), as an idle qdisc on `dev`
    /// prints them (CAKE's thresholds depend on the device's psched_mtu).
    fn xstats_text(_o: &Self::Opts, _dev: &Device) -> String {
        String::new()
    }

    /// The `xstats` object of `tc -s -j` (None: the kind prints none).
    fn xstats_json(_o: &Self::Opts) -> Option<J> {
        None
    }

    /// The kernel's checks on add (`old` is `None`) and change, and what a change keeps of `old`
    /// (attributes not sent keep their value where the kernel's `change` does so).
    fn change(_dev: &Device, new: Self::Opts, _old: Option<&Self::Opts>) -> Result<Self::Opts, TcError> {
        Ok(new)
    }

    /// The kernel's checks on where a new qdisc of this kind goes (its `init` looking at
    /// `sch->parent` and the device), after the generic ones (only [`QdiscKind::INGRESS`] kinds
    /// at the ingress slot).
    fn check_parent(_dev: &Device, _parent: Handle) -> Result<(), TcError> {
        Ok(())
    }

    /// The attributes tc 6.1 sends after `TCA_KIND` for `o` (usually one `TCA_OPTIONS`), byte
    /// for byte. An option that cannot be sent is an error naming it, before anything is sent.
    fn encode(o: &Self::Opts, out: &mut Attrs) -> Result<(), Unencodable>;

    /// The options of a request's `TCA_OPTIONS` payload (`None`: the request had none).
    fn decode(options: Option<&[u8]>) -> Result<Self::Opts, DecodeError>;

    /// The running qdisc (its children built through `cx`).
    fn build(o: &Self::Opts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError>;

    /// A few words for `sluice viz` (None: the kind alone says enough).
    fn label(_o: &Self::Opts) -> Option<String> {
        None
    }

    /// The kernel's `Qdisc_class_ops` exist for the kind: a qdisc can be grafted under it
    /// (`qdisc_graft` refuses "Parent qdisc is not classful" otherwise; sfq, fq_codel and cake
    /// have class ops, for their flows, and nothing to graft on).
    const CLASS_OPS: bool = false;

    /// `cl_ops->find`: `classid` (a class id of qdisc `q`) names a class: explicit classes of
    /// the model, implicit ones (prio and ETS bands, HFSC's root class), or any minor (TBF, RED
    /// and netem answer for every minor with their one class).
    fn has_class(_o: &Self::Opts, _dev: &Device, _q: &QdiscNode, _classid: Handle) -> bool {
        false
    }

    /// The classes `tc class show` lists for qdisc `q`.
    fn classes(_o: &Self::Opts, _dev: &Device, _q: &QdiscNode) -> ClassList {
        ClassList::None
    }

    /// The qdisc `tc class show` names as the `leaf` of class `id` (`cl_ops->leaf`).
    fn class_leaf<'d>(_o: &Self::Opts, dev: &'d Device, _q: &QdiscNode, id: Handle) -> Option<&'d QdiscNode> {
        dev.qdisc_at(id)
    }

    /// `cl_ops->delete` of class `clid`: the kernel's message when the class is in use (it has
    /// child classes or a filter names it), or the refusal (the kind deletes no classes).
    fn class_in_use(_o: &Self::Opts, _q: &QdiscNode, _clid: Handle) -> Result<&'static str, TcError> {
        Err(TcError::errno("Operation not supported"))
    }

    /// `cl_ops->tcf_block` for filter parent `parent` (`q`'s major; minor 0 for the qdisc
    /// itself): the block the filter goes to, or the kernel's refusal. Kinds with filters use
    /// [`block_at`].
    fn filter_block(
        _o: &Self::Opts,
        _dev: &Device,
        _q: &QdiscNode,
        _parent: Handle,
    ) -> Result<Handle, TcError> {
        Err(TcError::kernel("Class doesn't support blocks"))
    }
}

/// The filter-parent rule of kinds with a filter block (`tcf_block`): minor 0 is the qdisc's
/// block; a class that does not exist is refused; otherwise `class` (the class's own block, or
/// the kind's refusal).
pub fn block_at(
    dev: &Device,
    q: &QdiscNode,
    parent: Handle,
    class: impl FnOnce() -> Result<Handle, TcError>,
) -> Result<Handle, TcError> {
    if parent.minor() == 0 {
        return Ok(q.handle);
    }
    if !q.opts.has_class(dev, q, parent) {
        return Err(TcError::kernel("Specified class doesn't exist"));
    }
    class()
}

/// `tc class change` of an existing class node: it takes the new options.
pub fn set_class_opts(dev: &mut Device, clid: Handle, opts: ClassOpts) {
    if let Some(cl) = dev.classes.iter_mut().find(|x| x.classid == clid) {
        cl.opts = opts;
    }
}

/// A new class needs a minor (the kernel refuses `X:0` with EINVAL).
pub fn new_classid(clid: Handle) -> Result<(), TcError> {
    if clid.minor() == 0 {
        return Err(TcError::errno("Invalid argument"));
    }
    Ok(())
}

/// An option the kernel encoder cannot send (refused before anything is sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {option}: {why}")]
pub struct Unencodable {
    /// The kind.
    pub kind: &'static str,
    /// The option, as tc names it.
    pub option: String,
    /// Why it cannot be sent.
    pub why: String,
}

/// A `TCA_OPTIONS` payload that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {why}")]
pub struct DecodeError {
    /// The kind.
    pub kind: &'static str,
    /// What is wrong.
    pub why: String,
}

impl DecodeError {
    /// A decode error of `kind`.
    pub fn new(kind: &'static str, why: impl Into<String>) -> DecodeError {
        DecodeError { kind, why: why.into() }
    }
}

/// What building a qdisc needs beyond its own options: its device, the classifier that learns
/// the tree's shape, and the run's seed.
pub struct BuildCx<'a> {
    /// The device the qdisc is on.
    pub dev: &'a Device,
    /// The device's classifier.
    pub cls: &'a mut Classifier,
    /// The run's seed (randomised kinds derive theirs from it).
    pub seed: u64,
}

impl BuildCx<'_> {
    /// Builds a child qdisc (the one grafted on a class of the qdisc being built).
    pub fn child(&mut self, q: &QdiscNode) -> Result<Box<dyn Qdisc>, BuildError> {
        crate::build::build_qdisc(self.dev, q, self.cls, self.seed)
    }
}

/// The classes `tc class show` lists for a qdisc ([`QdiscKind::classes`]).
pub enum ClassList {
    /// None.
    None,
    /// Classes the qdisc has by itself (prio and ETS bands, TBF's one class, mq's queues):
    /// `(classid, tcm_parent)` in dump order.
    Implicit(Vec<(Handle, Handle)>),
    /// The model's class nodes of the qdisc (HTB, DRR, HFSC), in the kernel's hash order; with
    /// `root_class`, the qdisc's own root class `X:` first, and parents shown as they are (HFSC),
    /// else a top class shows `root`.
    Nodes {
        /// The qdisc has a root class `X:` of its own.
        root_class: bool,
    },
}

/// What `tc class show` needs to print a class ([`ClassKind::show`]).
pub struct ClassShowCx<'a> {
    /// The device.
    pub dev: &'a Device,
    /// The class's qdisc.
    pub q: &'a QdiscNode,
    /// The class.
    pub id: Handle,
    /// `-d`.
    pub details: bool,
}

/// A `tc class add|change|replace` that passed the generic checks of `tc_ctl_tclass`, for the
/// kind's `cl_ops->change` ([`ClassKind::change`]).
pub struct ClassChange<'a> {
    /// The device (the kind adds or changes the class in it).
    pub dev: &'a mut Device,
    /// The qdisc (as it was before the request).
    pub q: &'a QdiscNode,
    /// The class id (its major is the qdisc's).
    pub clid: Handle,
    /// The parent given (`tcm_parent`, its major resolved), or [`Handle::UNSPEC`] when none was.
    pub parent: Handle,
    /// The class exists (a change).
    pub exists: bool,
}

/// Everything about one kind's class options, in the shape of iproute2's `parse_copt` /
/// `print_copt` and the kernel's `Qdisc_class_ops` (`change`, `dump`). What classes a qdisc has,
/// which qdisc is a class's leaf and where filters go are the qdisc kind's
/// ([`QdiscKind::has_class`], [`QdiscKind::classes`], ...). Kinds whose classes take no options
/// (prio, TBF, mq, ...) have no `ClassKind`.
pub trait ClassKind {
    /// The qdisc kind the classes belong to (its [`QdiscKind::NAME`] is the class's kind).
    type Qdisc: QdiscKind;
    /// The options of one class as the model holds them.
    type Opts: Clone + Debug + PartialEq + Serialize + DeserializeOwned;

    /// tc's words after the kind name (`parse_copt`), to the end of `cur`.
    fn parse(cur: &mut Cur) -> Result<Self::Opts, TcError>;

    /// Words that [`ClassKind::parse`] reads back as `o`, each with a leading space.
    fn args(o: &Self::Opts) -> String;

    /// What `tc class show` prints after the leaf (`print_copt`), and the `-s` statistics lines
    /// (`print_xstats`, each ending in a newline); `o` is `None` for a class that has no node in
    /// the model (ETS bands, HFSC's root class), `qo` is the qdisc's options.
    fn show(
        o: Option<&Self::Opts>,
        qo: &<Self::Qdisc as QdiscKind>::Opts,
        cx: &ClassShowCx<'_>,
    ) -> (String, String);

    /// The kernel's `cl_ops->change`: adds the class to `cx.dev` or changes it, with the
    /// kernel's checks and warnings.
    fn change(o: Self::Opts, cx: ClassChange<'_>) -> Result<Vec<String>, TcError>;

    /// The attributes tc 6.1 sends after `TCA_KIND` in `RTM_NEWTCLASS` for `o`, byte for byte.
    fn encode(o: &Self::Opts, out: &mut Attrs) -> Result<(), Unencodable>;

    /// The options of a class request's `TCA_OPTIONS` payload.
    fn decode(options: Option<&[u8]>) -> Result<Self::Opts, DecodeError>;

    /// Lines for `sluice viz`.
    fn label(o: &Self::Opts) -> Vec<String>;

    /// The configured (guaranteed, ceiling) rates in bit/s, for `sluice viz` (0: none).
    fn rates(_o: &Self::Opts) -> (f64, f64) {
        (0.0, 0.0)
    }
}

/// The one list of class kinds: for each `Variant => Kind`, `ClassOpts::Variant` holds
/// `<Kind as ClassKind>::Opts`, `QdiscOpts::Variant` is its qdisc, and every method below
/// dispatches to `Kind`.
macro_rules! class_registry {
    ($($(#[$doc:meta])* $variant:ident => $kind:ty),* $(,)?) => {
        /// tc names of the kinds whose classes take options.
        pub const CLASS_KINDS: &[&str] = &[$(<<$kind as ClassKind>::Qdisc as QdiscKind>::NAME),*];

        /// Class options by kind (the state file's `"kind"`, as for [`QdiscOpts`]).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        pub enum ClassOpts {
            $($(#[$doc])* $variant(<$kind as ClassKind>::Opts),)*
        }

        impl ClassOpts {
            /// tc's class option words for `kind` (`None`: no kind with class options).
            pub fn parse_kind(kind: &str, cur: &mut Cur) -> Option<Result<ClassOpts, TcError>> {
                $(if kind == <<$kind as ClassKind>::Qdisc as QdiscKind>::NAME {
                    return Some(<$kind as ClassKind>::parse(cur).map(ClassOpts::$variant));
                })*
                None
            }

            /// tc's kind name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(ClassOpts::$variant(_) => <<$kind as ClassKind>::Qdisc as QdiscKind>::NAME,)*
                }
            }

            /// [`ClassKind::args`].
            pub fn args(&self) -> String {
                match self {
                    $(ClassOpts::$variant(o) => <$kind as ClassKind>::args(o),)*
                }
            }

            /// [`ClassKind::change`] (the kind is the qdisc's: the caller checked).
            pub fn change(self, cx: ClassChange<'_>) -> Result<Vec<String>, TcError> {
                match self {
                    $(ClassOpts::$variant(o) => <$kind as ClassKind>::change(o, cx),)*
                }
            }

            /// [`ClassKind::encode`].
            pub fn encode(&self, out: &mut Attrs) -> Result<(), Unencodable> {
                match self {
                    $(ClassOpts::$variant(o) => <$kind as ClassKind>::encode(o, out),)*
                }
            }

            /// [`ClassKind::decode`] for the kind named `kind` (`None`: no such class kind).
            pub fn decode(kind: &str, options: Option<&[u8]>) -> Option<Result<ClassOpts, DecodeError>> {
                $(if kind == <<$kind as ClassKind>::Qdisc as QdiscKind>::NAME {
                    return Some(<$kind as ClassKind>::decode(options).map(ClassOpts::$variant));
                })*
                None
            }

            /// [`ClassKind::label`].
            pub fn label(&self) -> Vec<String> {
                match self {
                    $(ClassOpts::$variant(o) => <$kind as ClassKind>::label(o),)*
                }
            }

            /// [`ClassKind::rates`].
            pub fn rates(&self) -> (f64, f64) {
                match self {
                    $(ClassOpts::$variant(o) => <$kind as ClassKind>::rates(o),)*
                }
            }
        }

        impl QdiscOpts {
            /// [`ClassKind::show`] of a class of this qdisc (`node`: its options in the model,
            /// if it has a node); empty for kinds whose classes take no options.
            #[allow(unreachable_patterns)]
            pub fn show_class(&self, node: Option<&ClassOpts>, cx: &ClassShowCx<'_>) -> (String, String) {
                match self {
                    $(QdiscOpts::$variant(q) => {
                        let o = match node {
                            Some(ClassOpts::$variant(o)) => Some(o),
                            _ => None,
                        };
                        <$kind as ClassKind>::show(o, q, cx)
                    })*
                    _ => (String::new(), String::new()),
                }
            }
        }
    };
}

/// The one list of kinds. For each `Variant => Kind`, `QdiscOpts::Variant` holds
/// `<Kind as QdiscKind>::Opts`, and every method below dispatches to `Kind`.
macro_rules! qdisc_registry {
    ($($(#[$doc:meta])* $variant:ident => $kind:ty),* $(,)?) => {
        /// tc names of the kinds in the registry.
        pub const QDISC_KINDS: &[&str] = &[$(<$kind as QdiscKind>::NAME),*];

        /// Qdisc kinds and their options (the state file's `"kind"`: the variant in
        /// snake_case, which is tc's name).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        pub enum QdiscOpts {
            $($(#[$doc])* $variant(<$kind as QdiscKind>::Opts),)*
        }

        impl QdiscOpts {
            /// tc's option words for `kind` (`None`: no such kind).
            pub fn parse_kind(kind: &str, cur: &mut Cur) -> Option<Result<QdiscOpts, TcError>> {
                $(if kind == <$kind as QdiscKind>::NAME {
                    return Some(<$kind as QdiscKind>::parse(cur).map(QdiscOpts::$variant));
                })*
                None
            }

            /// [`QdiscKind::parse_warned`] for `kind`: the options and tc's stderr lines.
            pub fn parse_kind_warned(kind: &str, cur: &mut Cur) -> Option<Result<(QdiscOpts, Vec<String>), TcError>> {
                $(if kind == <$kind as QdiscKind>::NAME {
                    return Some(<$kind as QdiscKind>::parse_warned(cur).map(|(o, w)| (QdiscOpts::$variant(o), w)));
                })*
                None
            }

            /// tc's kind name ([`QdiscKind::NAME`]).
            pub fn kind(&self) -> &'static str {
                match self {
                    $(QdiscOpts::$variant(_) => <$kind as QdiscKind>::NAME,)*
                }
            }

            /// The kind has classes a child qdisc or filter can refer to ([`QdiscKind::CLASSFUL`]).
            pub fn is_classful(&self) -> bool {
                match self {
                    $(QdiscOpts::$variant(_) => <$kind as QdiscKind>::CLASSFUL,)*
                }
            }

            /// The kind sits at the ingress slot (`ffff:fff1`), and only such kinds may (the
            /// kernel's `TCQ_F_INGRESS`; [`QdiscKind::INGRESS`]).
            pub fn is_ingress(&self) -> bool {
                match self {
                    $(QdiscOpts::$variant(_) => <$kind as QdiscKind>::INGRESS,)*
                }
            }

            /// [`QdiscKind::check_parent`] for a new qdisc of this kind at `parent`.
            pub fn check_parent(&self, dev: &Device, parent: Handle) -> Result<(), TcError> {
                match self {
                    $(QdiscOpts::$variant(_) => <$kind as QdiscKind>::check_parent(dev, parent),)*
                }
            }

            /// [`QdiscKind::args`].
            pub fn args(&self) -> String {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::args(o),)*
                }
            }

            /// [`QdiscKind::show`].
            pub fn show(&self, dev: &Device, d: bool) -> String {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::show(o, dev, d),)*
                }
            }

            /// [`QdiscKind::json`].
            pub fn json(&self, dev: &Device, d: bool) -> J {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::json(o, dev, d),)*
                }
            }

            /// [`QdiscKind::xstats_text`].
            pub fn xstats_text(&self, dev: &Device) -> String {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::xstats_text(o, dev),)*
                }
            }

            /// [`QdiscKind::xstats_json`].
            pub fn xstats_json(&self) -> Option<J> {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::xstats_json(o),)*
                }
            }

            /// [`QdiscKind::change`]: `self` is what was sent, `old` what the qdisc had.
            pub fn change(&self, dev: &Device, old: Option<&QdiscOpts>) -> Result<QdiscOpts, TcError> {
                match self {
                    $(QdiscOpts::$variant(n) => {
                        let old = match old {
                            Some(QdiscOpts::$variant(o)) => Some(o),
                            _ => None,
                        };
                        <$kind as QdiscKind>::change(dev, n.clone(), old).map(QdiscOpts::$variant)
                    })*
                }
            }

            /// [`QdiscKind::encode`].
            pub fn encode(&self, out: &mut Attrs) -> Result<(), Unencodable> {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::encode(o, out),)*
                }
            }

            /// [`QdiscKind::decode`] for the kind named `kind` (`None`: no such kind).
            pub fn decode(kind: &str, options: Option<&[u8]>) -> Option<Result<QdiscOpts, DecodeError>> {
                $(if kind == <$kind as QdiscKind>::NAME {
                    return Some(<$kind as QdiscKind>::decode(options).map(QdiscOpts::$variant));
                })*
                None
            }

            /// [`QdiscKind::build`].
            pub fn build(&self, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::build(o, q, cx),)*
                }
            }

            /// [`QdiscKind::CLASS_OPS`].
            pub fn has_class_ops(&self) -> bool {
                match self {
                    $(QdiscOpts::$variant(_) => <$kind as QdiscKind>::CLASS_OPS,)*
                }
            }

            /// [`QdiscKind::has_class`] for qdisc `q` (whose options these are).
            pub fn has_class(&self, dev: &Device, q: &QdiscNode, classid: Handle) -> bool {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::has_class(o, dev, q, classid),)*
                }
            }

            /// [`QdiscKind::classes`].
            pub fn classes(&self, dev: &Device, q: &QdiscNode) -> ClassList {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::classes(o, dev, q),)*
                }
            }

            /// [`QdiscKind::class_leaf`].
            pub fn class_leaf<'d>(&self, dev: &'d Device, q: &QdiscNode, id: Handle) -> Option<&'d QdiscNode> {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::class_leaf(o, dev, q, id),)*
                }
            }

            /// [`QdiscKind::class_in_use`].
            pub fn class_in_use(&self, q: &QdiscNode, clid: Handle) -> Result<&'static str, TcError> {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::class_in_use(o, q, clid),)*
                }
            }

            /// [`QdiscKind::filter_block`].
            pub fn filter_block(&self, dev: &Device, q: &QdiscNode, parent: Handle) -> Result<Handle, TcError> {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::filter_block(o, dev, q, parent),)*
                }
            }

            /// [`QdiscKind::label`].
            pub fn label(&self) -> Option<String> {
                match self {
                    $(QdiscOpts::$variant(o) => <$kind as QdiscKind>::label(o),)*
                }
            }
        }
    };
}

qdisc_registry! {
    /// Packet-limited FIFO.
    Pfifo => fifo::Pfifo,
    /// Byte-limited FIFO.
    Bfifo => fifo::Bfifo,
    /// Packet FIFO dropping from the head when full.
    PfifoHeadDrop => fifo::PfifoHeadDrop,
    /// Three-band default qdisc.
    PfifoFast => pfifo_fast::PfifoFast,
    /// Strict priority bands.
    Prio => prio::Prio,
    /// Hierarchical token bucket (qdisc part).
    Htb => htb::Htb,
    /// Token bucket filter.
    Tbf => tbf::Tbf,
    /// Stochastic fairness queueing.
    Sfq => sfq::Sfq,
    /// Controlled delay AQM.
    Codel => codel::Codel,
    /// Flow queueing with CoDel.
    FqCodel => fq_codel::FqCodel,
    /// Fair queueing with per-flow pacing (EDT).
    Fq => fq::Fq,
    /// Network emulator (boxed: its options are the largest).
    Netem => netem::Netem,
    /// Deficit round robin.
    Drr => drr::Drr,
    /// Random early detection.
    Red => red::Red,
    /// Common Applications Kept Enhanced.
    Cake => cake::Cake,
    /// Hierarchical fair service curve.
    Hfsc => hfsc::Hfsc,
    /// Enhanced transmission selection (strict and DRR bands).
    Ets => ets::Ets,
    /// Ingress hook.
    Ingress => ingress::Ingress,
    /// Ingress+egress filter hook.
    Clsact => clsact::Clsact,
    /// One class per transmit queue (root only, multi-queue devices).
    Mq => mq::Mq,
    /// Proportional Integral controller Enhanced (RFC 8033).
    Pie => pie::Pie,
    /// Flow queueing with a PIE controller per flow.
    FqPie => fq_pie::FqPie,
}

class_registry! {
    /// HTB class.
    Htb => htb::HtbClass,
    /// DRR class.
    Drr => drr::DrrClass,
    /// HFSC class.
    Hfsc => hfsc::HfscClass,
    /// ETS class change (`tc class change ... ets [quantum N]`): ETS classes are the qdisc's
    /// bands, kept in its options; no class node holds this.
    Ets => ets::EtsClass,
}

/// `TCA_ACT_OPTIONS`: the nest that holds an action kind's options.
pub const TCA_ACT_OPTIONS: u16 = 2;

/// What encoding an action needs beyond its options: the machine's interface indexes (mirred
/// names its target by index).
pub struct ActEncodeCx<'a> {
    /// The ifindex of a device name.
    pub ifindex: &'a dyn Fn(&str) -> Option<u32>,
}

/// Everything about one action kind, in the shape of iproute2's `struct action_util`
/// (`parse_aopt`, `print_aopt`) and the kernel's `struct tc_action_ops` (`init`, `dump`). What is
/// generic to every action (the action list, `index` lookups in the table, ref and bind counts,
/// `cookie`, the `TCA_ACT_*` nest around the options) is not the kind's: the central files do it.
pub trait ActionKind {
    /// tc's name of the kind (`TCA_ACT_KIND`).
    const NAME: &'static str;
    /// The options as the model holds them (with the action's index).
    type Opts: Clone + Debug + PartialEq + Serialize + DeserializeOwned;

    /// The action's index in its kind's table (0: not assigned yet).
    fn index(o: &Self::Opts) -> u32;

    /// Sets the index.
    fn set_index(o: &mut Self::Opts, index: u32);

    /// tc's words of the kind (`parse_aopt`), `cur` at the word that chose the kind (the kind's
    /// name; for gact also a bare control word). Stops at the first word it does not know.
    /// Returns the options and whether only an index was given (the action binds an existing
    /// one).
    fn parse(cur: &mut Cur) -> Result<(Self::Opts, bool), ActErr>;

    /// Words that [`ActionKind::parse`] reads back as `o`, starting with the kind's name.
    fn args(o: &Self::Opts) -> String;

    /// The kind's lines of `tc actions list` and `tc filter show` (`print_aopt`); `refs`,
    /// `bind` and `tm` (the `-s` times, may be empty) are the generic parts it prints among its
    /// own; `d` is `-d`.
    fn show(o: &Self::Opts, out: &mut String, refs: u32, bind: u32, tm: &str, d: bool);

    /// The kind's members of the action's `-j` object, with `ref` and `bind`, and `tm` (the
    /// `-s` times) where the kind prints them.
    fn json(o: &Self::Opts, j: &mut J, refs: u32, bind: u32, tm: &dyn Fn(&mut J), d: bool);

    /// The device the action names (tc resolves it before it sends anything).
    fn device(_o: &Self::Opts) -> Option<&str> {
        None
    }

    /// The kernel's checks when it makes (or replaces) the action; `bare`: only an index was
    /// given; `in_filter`: a filter holds it (only then can a verdict `goto chain`).
    fn check(o: &Self::Opts, bare: bool, in_filter: bool) -> Result<(), TcError>;

    /// The attributes inside `TCA_ACT_OPTIONS` (or a filter's `TCA_*_POLICE`) that tc 6.1 sends
    /// for `o`, byte for byte.
    fn encode(o: &Self::Opts, out: &mut Attrs, cx: &ActEncodeCx<'_>) -> Result<(), Unencodable>;

    /// The options of a `TCA_ACT_OPTIONS` payload.
    fn decode(options: &[u8]) -> Result<Self::Opts, DecodeError>;

    /// The core action (`devices`: the configuration's devices, in order).
    fn build(o: &Self::Opts, devices: &[Device]) -> Result<CoreAction, BuildError>;

    /// A few words for `sluice viz` after the filter.
    fn label(o: &Self::Opts) -> String;
}

/// The one list of action kinds: for each `Variant => Kind`, `Action::Variant` holds
/// `<Kind as ActionKind>::Opts`, and every method below dispatches to `Kind`.
macro_rules! action_registry {
    ($($variant:ident => $kind:ty),* $(,)?) => {
        /// tc names of the action kinds in the registry.
        pub const ACTION_KINDS: &[&str] = &[$(<$kind as ActionKind>::NAME),*];

        #[allow(unreachable_patterns)]
        impl Action {
            /// [`ActionKind::parse`] for `kind` (`None`: not a registry kind).
            pub fn parse_kind(kind: &str, cur: &mut Cur) -> Option<Result<(Action, bool), ActErr>> {
                $(if kind == <$kind as ActionKind>::NAME {
                    return Some(<$kind as ActionKind>::parse(cur).map(|(o, b)| (Action::$variant(o), b)));
                })*
                None
            }

            /// [`ActionKind::NAME`].
            pub fn registry_name(&self) -> Option<&'static str> {
                match self {
                    $(Action::$variant(_) => Some(<$kind as ActionKind>::NAME),)*
                    _ => None,
                }
            }

            /// [`ActionKind::index`].
            pub fn registry_index(&self) -> Option<u32> {
                match self {
                    $(Action::$variant(o) => Some(<$kind as ActionKind>::index(o)),)*
                    _ => None,
                }
            }

            /// [`ActionKind::set_index`] (false: not a registry kind).
            pub fn registry_set_index(&mut self, index: u32) -> bool {
                match self {
                    $(Action::$variant(o) => { <$kind as ActionKind>::set_index(o, index); true })*
                    _ => false,
                }
            }

            /// [`ActionKind::args`].
            pub fn args(&self) -> Option<String> {
                match self {
                    $(Action::$variant(o) => Some(<$kind as ActionKind>::args(o)),)*
                    _ => None,
                }
            }

            /// [`ActionKind::show`] (false: not a registry kind).
            pub fn show(&self, out: &mut String, refs: u32, bind: u32, tm: &str, d: bool) -> bool {
                match self {
                    $(Action::$variant(o) => { <$kind as ActionKind>::show(o, out, refs, bind, tm, d); true })*
                    _ => false,
                }
            }

            /// [`ActionKind::json`] (false: not a registry kind).
            pub fn json(&self, j: &mut J, refs: u32, bind: u32, tm: &dyn Fn(&mut J), d: bool) -> bool {
                match self {
                    $(Action::$variant(o) => { <$kind as ActionKind>::json(o, j, refs, bind, tm, d); true })*
                    _ => false,
                }
            }

            /// [`ActionKind::device`].
            pub fn device(&self) -> Option<&str> {
                match self {
                    $(Action::$variant(o) => <$kind as ActionKind>::device(o),)*
                    _ => None,
                }
            }

            /// [`ActionKind::check`].
            pub fn check(&self, bare: bool, in_filter: bool) -> Option<Result<(), TcError>> {
                match self {
                    $(Action::$variant(o) => Some(<$kind as ActionKind>::check(o, bare, in_filter)),)*
                    _ => None,
                }
            }

            /// [`ActionKind::encode`].
            pub fn encode(&self, out: &mut Attrs, cx: &ActEncodeCx<'_>) -> Option<Result<(), Unencodable>> {
                match self {
                    $(Action::$variant(o) => Some(<$kind as ActionKind>::encode(o, out, cx)),)*
                    _ => None,
                }
            }

            /// [`ActionKind::decode`] for the kind named `kind` (`None`: not a registry kind).
            pub fn decode(kind: &str, options: &[u8]) -> Option<Result<Action, DecodeError>> {
                $(if kind == <$kind as ActionKind>::NAME {
                    return Some(<$kind as ActionKind>::decode(options).map(Action::$variant));
                })*
                None
            }

            /// [`ActionKind::build`].
            pub fn build(&self, devices: &[Device]) -> Option<Result<CoreAction, BuildError>> {
                match self {
                    $(Action::$variant(o) => Some(<$kind as ActionKind>::build(o, devices)),)*
                    _ => None,
                }
            }

            /// [`ActionKind::label`].
            pub fn label(&self) -> Option<String> {
                match self {
                    $(Action::$variant(o) => Some(<$kind as ActionKind>::label(o)),)*
                    _ => None,
                }
            }
        }
    };
}

action_registry! {
    Gact => gact::Gact,
    Police => police::Police,
    Skbedit => skbedit::Skbedit,
    Mirred => mirred::Mirred,
}

/// Everything about one filter (classifier) kind, in the shape of iproute2's `struct filter_util`
/// (`parse_fopt`, `print_fopt`) and the kernel's `struct tcf_proto_ops` (`change`, `delete`,
/// `walk`, `dump`). What is generic to every filter (the block, chain, priority and protocol of
/// the classifier instance, the automatic priority, the action list and its table, the
/// `TCA_KIND`/`TCA_CHAIN` around the options) is not the kind's: the central files do it.
///
/// One [`FilterNode`] is one object the kernel dumps: a filter, or for u32 also a hash table.
pub trait FilterKind {
    /// tc's name of the kind (`TCA_KIND`).
    const NAME: &'static str;
    /// tc prints the filter's own `police` keyword on a line of its own after the kind's
    /// options (u32, basic), not right after them (fw, flow).
    const POLICE_OWN_LINE: bool = false;
    /// The options as the model holds them.
    type Opts: Clone + Debug + PartialEq + Serialize + DeserializeOwned;
    /// Its attributes in the kernel's dumps ([`FilterNl`]).
    const NL: FilterNl;

    /// tc's words after the kind name (`parse_fopt`), to the end of `cur`; `handle` is the
    /// `handle` word the command gave (tc hands it to the kind), `cx` parses `action` and
    /// `police`.
    fn parse(
        cur: &mut Cur,
        handle: Option<(usize, &str)>,
        cx: &mut dyn FilterParseCx,
    ) -> Result<FilterParsed<Self::Opts>, TcError>;

    /// Words from `handle` on that [`FilterKind::parse`] reads back as `f` (without its
    /// actions), each with a leading space: ` handle H KIND ...` (export, dry-run commands).
    fn args(o: &Self::Opts, f: &FilterNode) -> String;

    /// What `tc filter show` prints after `KIND chain C ` (`print_fopt`), before the actions;
    /// `pretty` is `-p`.
    fn show(o: &Self::Opts, f: &FilterNode, pretty: bool) -> String;

    /// The `options` object of `tc -j filter show`, without the actions.
    fn json(o: &Self::Opts, f: &FilterNode, pretty: bool) -> J;

    /// The class the filter sends packets to, when fixed (the class it binds).
    fn classid(_o: &Self::Opts) -> Option<Handle> {
        None
    }

    /// The first class the filter's results name (flow's `baseclass`; else [`FilterKind::classid`]).
    fn target(o: &Self::Opts) -> Option<Handle> {
        Self::classid(o)
    }

    /// How many classes from [`FilterKind::target`] on its results spread over (flow's divisor).
    fn spread(_o: &Self::Opts) -> u32 {
        1
    }

    /// The object is a container of filters, not a filter (u32's hash tables): it holds no
    /// actions, the builder and the summaries do not count it.
    fn is_table(_o: &Self::Opts) -> bool {
        false
    }

    /// The kernel makes the object itself with the classifier instance (u32's root table): it
    /// is neither sent nor exported nor built.
    fn implicit(_o: &Self::Opts, _handle: u32) -> bool {
        false
    }

    /// The kernel's `change` (add, change, replace) for `o` in the classifier instance of `cx`:
    /// its checks, the handle it allocates, what a change keeps, the nodes it adds to
    /// `cx.dev.filters`. The default is the classifier keyed by one handle
    /// ([`filter_common::change_by_handle`]) with the hooks below.
    fn change(cx: &mut FilterChange<'_>, o: Self::Opts, reg: &FilterReg<Self::Opts>) -> Result<(), TcError>
    where
        Self: Sized,
    {
        filter_common::change_by_handle::<Self>(cx, o, reg)
    }

    /// [`filter_common::change_by_handle`]: the kernel's checks on the request before anything
    /// (fw refuses a handle without options).
    fn check(_o: &Self::Opts, _cx: &FilterChange<'_>) -> Result<(), TcError> {
        Ok(())
    }

    /// [`filter_common::change_by_handle`]: the handle the kernel gives a new filter added
    /// without one (the lowest free from 1).
    fn new_handle(cx: &FilterChange<'_>) -> Result<u32, TcError> {
        let mut h = 1;
        while cx.dev.filters.iter().any(|f| cx.in_tp(f) && f.handle == h) {
            h += 1;
        }
        Ok(h)
    }

    /// [`filter_common::change_by_handle`]: the kernel's checks on a new filter and the
    /// defaults it fills in; `tp_exists`: the classifier instance had filters already.
    fn create(o: Self::Opts, _cx: &FilterChange<'_>, _tp_exists: bool) -> Result<Self::Opts, TcError> {
        Ok(o)
    }

    /// [`filter_common::change_by_handle`]: what a change of `old` to `new` keeps (`given`:
    /// what the request carried, from [`FilterParsed::given`]).
    fn merge(new: Self::Opts, _old: &Self::Opts, _given: &[&'static str]) -> Self::Opts {
        new
    }

    /// The kernel's `delete` of one object besides removing it (u32 drops a table's nodes).
    fn delete(_o: &Self::Opts, _removed: &FilterNode, _dev: &mut Device) {}

    /// The order `tc filter show` lists the objects of one classifier instance in (the kernel's
    /// `walk`); `tp` is in creation order.
    fn dump<'a>(_dev: &'a Device, _first: &'a FilterNode, tp: Vec<&'a FilterNode>) -> Vec<&'a FilterNode> {
        tp
    }

    /// The attributes tc 6.1 sends after `TCA_KIND` for `f` (usually one `TCA_OPTIONS`), byte for
    /// byte; the actions through `cx`. An option that cannot be sent is an error naming it.
    fn encode(
        o: &Self::Opts,
        f: &FilterNode,
        out: &mut Attrs,
        cx: &FilterEncodeCx<'_>,
    ) -> Result<(), Unencodable>;

    /// The options of a request's `TCA_OPTIONS` payload (`None`: the request had none); the
    /// actions in it are not the kind's.
    fn decode(options: Option<&[u8]>) -> Result<Self::Opts, DecodeError>;

    /// The core classifier (`None`: nothing to build, as for u32's root tables); `acts` are the
    /// filter's actions, built.
    fn build(o: &Self::Opts, f: &FilterNode, acts: CoreActions) -> Result<Option<FilterConfig>, BuildError>;

    /// A few words for `sluice viz` (the actions follow).
    fn label(o: &Self::Opts, f: &FilterNode) -> String;

    /// What of the model's `o` the kernel's object (its dump, decoded) holds otherwise, as
    /// `sluice apply` checks after applying: one phrase per difference (`"divisor 1 (model 16)"`).
    /// The class and the generic fields are compared centrally.
    fn differs(_o: &Self::Opts, _kernel: &Self::Opts) -> Vec<String> {
        Vec::new()
    }
}

/// The one list of filter kinds. For each `Variant => Kind`, `FilterOpts::Variant` holds
/// `<Kind as FilterKind>::Opts`, and every method below dispatches to `Kind`.
macro_rules! filter_registry {
    ($($(#[$doc:meta])* $variant:ident => $kind:ty),* $(,)?) => {
        /// tc names of the filter kinds in the registry.
        pub const FILTER_KINDS: &[&str] = &[$(<$kind as FilterKind>::NAME),*];

        /// Filter kinds and their options (the state file's `"kind"`: the variant in
        /// snake_case, which is tc's name).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        pub enum FilterOpts {
            $($(#[$doc])* $variant(<$kind as FilterKind>::Opts),)*
        }

        impl FilterOpts {
            /// [`FilterKind::parse`] for `kind` (`None`: no such kind).
            pub fn parse_kind(
                kind: &str,
                cur: &mut Cur,
                handle: Option<(usize, &str)>,
                cx: &mut dyn FilterParseCx,
            ) -> Option<Result<FilterParsed<FilterOpts>, TcError>> {
                $(if kind == <$kind as FilterKind>::NAME {
                    return Some(<$kind as FilterKind>::parse(cur, handle, cx).map(|p| p.map(FilterOpts::$variant)));
                })*
                None
            }

            /// tc's kind name ([`FilterKind::NAME`]).
            pub fn kind(&self) -> &'static str {
                match self {
                    $(FilterOpts::$variant(_) => <$kind as FilterKind>::NAME,)*
                }
            }

            /// [`FilterKind::NL`] of the kind named `kind` (`None`: no such kind).
            pub fn nl(kind: &str) -> Option<&'static FilterNl> {
                $(if kind == <$kind as FilterKind>::NAME {
                    return Some(&<$kind as FilterKind>::NL);
                })*
                None
            }

            /// [`FilterKind::POLICE_OWN_LINE`].
            pub fn police_own_line(&self) -> bool {
                match self {
                    $(FilterOpts::$variant(_) => <$kind as FilterKind>::POLICE_OWN_LINE,)*
                }
            }

            /// [`FilterKind::args`].
            pub fn args(&self, f: &FilterNode) -> String {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::args(o, f),)*
                }
            }

            /// [`FilterKind::show`].
            pub fn show(&self, f: &FilterNode, pretty: bool) -> String {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::show(o, f, pretty),)*
                }
            }

            /// [`FilterKind::json`].
            pub fn json(&self, f: &FilterNode, pretty: bool) -> J {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::json(o, f, pretty),)*
                }
            }

            /// [`FilterKind::classid`]: the class this filter sends packets to, if fixed.
            pub fn classid(&self) -> Option<Handle> {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::classid(o),)*
                }
            }

            /// [`FilterKind::target`].
            pub fn target(&self) -> Option<Handle> {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::target(o),)*
                }
            }

            /// [`FilterKind::spread`].
            pub fn spread(&self) -> u32 {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::spread(o),)*
                }
            }

            /// [`FilterKind::is_table`].
            pub fn is_table(&self) -> bool {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::is_table(o),)*
                }
            }

            /// [`FilterKind::implicit`] for the object with `handle`.
            pub fn implicit(&self, handle: u32) -> bool {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::implicit(o, handle),)*
                }
            }

            /// [`FilterKind::change`]: `self` is what the request carried.
            pub fn change(self, cx: &mut FilterChange<'_>) -> Result<(), TcError> {
                match self {
                    $(FilterOpts::$variant(o) => {
                        let reg = FilterReg {
                            wrap: FilterOpts::$variant,
                            get: |f| match f {
                                FilterOpts::$variant(o) => Some(o),
                                #[allow(unreachable_patterns)]
                                _ => None,
                            },
                        };
                        <$kind as FilterKind>::change(cx, o, &reg)
                    })*
                }
            }

            /// [`FilterKind::delete`] of `removed` (whose options these are).
            pub fn delete(&self, removed: &FilterNode, dev: &mut Device) {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::delete(o, removed, dev),)*
                }
            }

            /// [`FilterKind::dump`] for the instance led by `first`.
            pub fn dump<'a>(dev: &'a Device, first: &'a FilterNode, tp: Vec<&'a FilterNode>) -> Vec<&'a FilterNode> {
                match &first.opts {
                    $(FilterOpts::$variant(_) => <$kind as FilterKind>::dump(dev, first, tp),)*
                }
            }

            /// [`FilterKind::encode`] for `f` (whose options these are).
            pub fn encode(&self, f: &FilterNode, out: &mut Attrs, cx: &FilterEncodeCx<'_>) -> Result<(), Unencodable> {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::encode(o, f, out, cx),)*
                }
            }

            /// [`FilterKind::decode`] for the kind named `kind` (`None`: no such kind).
            pub fn decode(kind: &str, options: Option<&[u8]>) -> Option<Result<FilterOpts, DecodeError>> {
                $(if kind == <$kind as FilterKind>::NAME {
                    return Some(<$kind as FilterKind>::decode(options).map(FilterOpts::$variant));
                })*
                None
            }

            /// [`FilterKind::build`] for `f` (whose options these are).
            pub fn build(&self, f: &FilterNode, acts: CoreActions) -> Result<Option<FilterConfig>, BuildError> {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::build(o, f, acts),)*
                }
            }

            /// [`FilterKind::differs`] (`kernel`: the kernel's dump decoded).
            pub fn differs(&self, kernel: &FilterOpts) -> Vec<String> {
                match (self, kernel) {
                    $((FilterOpts::$variant(o), FilterOpts::$variant(k)) => <$kind as FilterKind>::differs(o, k),)*
                    #[allow(unreachable_patterns)]
                    _ => vec![format!("kind {} (model {})", kernel.kind(), self.kind())],
                }
            }

            /// [`FilterKind::label`] for `f` (whose options these are).
            pub fn label(&self, f: &FilterNode) -> String {
                match self {
                    $(FilterOpts::$variant(o) => <$kind as FilterKind>::label(o, f),)*
                }
            }
        }
    };
}

filter_registry! {
    /// u32: key nodes and hash tables (a state file's older `u32_table` is a table).
    #[serde(alias = "u32_table")]
    U32 => cls_u32::U32,
    /// flow: a class from a hash or a map of packet keys.
    Flow => flow::Flow,
    /// fw: the class from the firewall mark.
    Fw => fw::Fw,
    /// matchall: every packet.
    Matchall => matchall::Matchall,
    /// basic: an ematch tree.
    Basic => basic::Basic,
}

//! Registry properties, kind by kind, for random valid options: (a) the model's tc words parse
//! back to the same model, (b) the netlink options tc would send decode to the same model, (c)
//! the builder accepts it.

mod codel_props {
    use super::kinds_a::*;
    use proptest::prelude::*;
    use sluice_model::model::{CodelOpts, QdiscOpts};

    fn opts() -> impl Strategy<Value = CodelOpts> {
        (
            proptest::option::of(1u32..=1_000_000),
            proptest::option::of(1u32..=60_000_000),
            proptest::option::of(1u32..=60_000_000),
            // tc's "no threshold" is ~0; 0 is a threshold it sends.
            proptest::option::of(0u32..u32::MAX),
            proptest::option::of(any::<bool>()),
        )
            .prop_map(|(limit, target, interval, ce_threshold, ecn)| CodelOpts {
                limit,
                target,
                interval,
                ce_threshold,
                ecn,
            })
    }

    proptest! {
        #[test]
        fn codel_words_netlink_and_build(o in opts()) {
            check(&QdiscOpts::Codel(o))?;
        }
    }
}

mod sfq_props {
    use super::kinds_a::*;
    use proptest::prelude::*;
    use sluice_model::model::{QdiscOpts, SfqOpts};

    /// tc words for RED mode: what a person writes (the model holds what tc derives from them).
    fn red_words() -> impl Strategy<Value = String> {
        (
            3u32..=1_000_000,
            // max and min as fractions of the limit and of max (0: tc's defaults).
            prop_oneof![Just(0.0), 0.01f64..1.0],
            prop_oneof![Just(0.0), 0.01f64..1.0],
            proptest::option::of(1u32..=9000),
            proptest::option::of(0u32..=10_000),
            // Probabilities as people write them: up to six decimals, or 1.
            prop_oneof![(1u32..1_000_000).prop_map(|k| format!("0.{k:06}")), Just("1".to_string())],
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(limit, fmax, fmin, avpkt, burst, p, ecn, harddrop)| {
                let max = (limit as f64 * fmax) as u32;
                let min = (max as f64 * fmin) as u32;
                let mut s = format!("redflowlimit {limit} min {min} max {max} probability {p}");
                if let Some(a) = avpkt {
                    s += &format!(" avpkt {a}");
                }
                if let Some(b) = burst {
                    s += &format!(" burst {b}");
                }
                if ecn {
                    s += " ecn";
                }
                if harddrop {
                    s += " harddrop";
                }
                s
            })
    }

    fn opts() -> impl Strategy<Value = SfqOpts> {
        (
            proptest::option::of(2u32..=100_000),
            // The kernel keeps the deficit of a quantum in 15 bits of 8 bytes.
            proptest::option::of(1u32..=262_136),
            // A perturb 0 beside other options is the same request as none (a lone one is kept).
            proptest::option::of(1u32..=3600),
            proptest::option::of((0u32..=16).prop_map(|s| 1u32 << s)),
            proptest::option::of(1u32..=127),
            proptest::option::of(1u32..=65_408),
            any::<bool>(),
            proptest::option::of(red_words()),
        )
            .prop_filter_map(
                "tc refuses the RED words",
                |(limit, quantum, perturb, divisor, depth, flows, headdrop, red)| {
                    let red = match red {
                        Some(w) => match parse("sfq", &w) {
                            Ok(QdiscOpts::Sfq(s)) => s.red,
                            _ => return None,
                        },
                        None => None,
                    };
                    // sluice-core refuses max == redflowlimit, which tc sends (see the report).
                    if red.as_ref().is_some_and(|r| r.max >= r.flowlimit) {
                        return None;
                    }
                    Some(SfqOpts { limit, quantum, perturb, divisor, depth, flows, headdrop, red })
                },
            )
    }

    proptest! {
        #[test]
        fn sfq_words_netlink_and_build(o in opts()) {
            check(&QdiscOpts::Sfq(o))?;
        }
    }

    #[test]
    fn a_lone_perturb_0_is_kept() {
        let o = parse("sfq", "perturb 0").unwrap();
        assert_eq!(o, QdiscOpts::Sfq(SfqOpts { perturb: Some(0), ..SfqOpts::default() }));
        check(&o).unwrap();
        check(&QdiscOpts::Sfq(SfqOpts::default())).unwrap();
    }

    #[test]
    fn red_words_tc_refuses_are_refused() {
        for (words, msg) in [
            ("min 10", "Required parameter (redflowlimit) is missing"),
            ("redflowlimit 1000 max 2000", "\"max\" is larger than \"limit\""),
            ("redflowlimit 10000 min 3000 max 3000", "\"min\" is not smaller than \"max\""),
            ("redflowlimit 100000 min 8000 max 60000 probability 0", "SFQ: failed to calculate probability."),
            ("redflowlimit 10000 avpkt 5000 burst 1", "SFQ: failed to calculate EWMA constant."),
        ] {
            let e = parse("sfq", words).unwrap_err();
            assert!(e.message.ends_with(msg), "{words}: {}", e.message);
        }
    }
}

mod prio_props {
    use super::kinds_a::*;
    use proptest::prelude::*;
    use sluice_model::model::{PrioOpts, QdiscOpts};

    fn opts() -> impl Strategy<Value = PrioOpts> {
        (2u32..=16, proptest::collection::vec(any::<u8>(), 16), any::<bool>()).prop_map(
            |(bands, map, multiqueue)| PrioOpts {
                bands,
                priomap: map.into_iter().map(|b| b % bands as u8).collect(),
                multiqueue,
            },
        )
    }

    proptest! {
        #[test]
        fn prio_words_netlink_and_build(o in opts()) {
            check(&QdiscOpts::Prio(o))?;
        }
    }
}

mod pfifo_fast_props {
    use super::kinds_a::*;
    use sluice_model::model::{DevKind, Device, Handle, PfifoFastOpts, QdiscNode, QdiscOpts, State, H_ROOT};

    #[test]
    fn pfifo_fast_words_netlink_and_build() {
        check(&QdiscOpts::PfifoFast(PfifoFastOpts {})).unwrap();
        assert!(parse("pfifo_fast", "limit 10").is_err());
    }

    #[test]
    fn a_state_file_naming_the_kind_alone_loads() {
        let q: QdiscOpts = serde_json::from_str(r#"{"kind":"pfifo_fast"}"#).unwrap();
        assert_eq!(q, QdiscOpts::PfifoFast(PfifoFastOpts {}));
        assert_eq!(serde_json::to_string(&q).unwrap(), r#"{"kind":"pfifo_fast"}"#);
        // Inside a state file as older versions wrote it.
        let mut st = State::default();
        let mut dev = Device::new("e0", DevKind::Dummy, 2);
        dev.qdiscs.push(QdiscNode {
            handle: Handle::new(1, 0),
            parent: H_ROOT,
            opts: q.clone(),
            stab: None,
            stats: Default::default(),
        });
        st.devices.push(dev);
        let text = serde_json::to_string(&st).unwrap();
        assert!(text.contains(r#""opts":{"kind":"pfifo_fast"}"#), "{text}");
        assert_eq!(serde_json::from_str::<State>(&text).unwrap(), st);
    }
}

/// What the properties of codel, sfq, prio and pfifo_fast share.
mod kinds_a {
    use proptest::prelude::*;
    use sluice_core::classify::Classifier;
    use sluice_model::error::TcError;
    use sluice_model::grammar::Cur;
    use sluice_model::kinds::{BuildCx, TCA_OPTIONS};
    use sluice_model::model::{DevKind, Device, Handle, QdiscNode, QdiscOpts, H_ROOT};
    use sluice_model::nlattr::{find, Attrs};

    /// `kind` with tc words `words`, through the registry's parser.
    pub fn parse(kind: &str, words: &str) -> Result<QdiscOpts, TcError> {
        let argv: Vec<String> = words.split_whitespace().map(String::from).collect();
        let mut cur = Cur { argv: &argv, pos: 0, max_minor: 0xffff };
        QdiscOpts::parse_kind(kind, &mut cur).expect("a registry kind")
    }

    /// The three properties for `o`.
    pub fn check(o: &QdiscOpts) -> Result<(), TestCaseError> {
        let kind = o.kind();
        // (a) tc words and back.
        let words = o.args();
        let back = parse(kind, &words).map_err(|e| TestCaseError::fail(format!("{words}: {}", e.message)))?;
        prop_assert_eq!(&back, o, "words: {}", words);
        // (b) netlink and back.
        let mut a = Attrs::new();
        o.encode(&mut a).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let bytes = a.into_bytes();
        let decoded = QdiscOpts::decode(kind, find(&bytes, TCA_OPTIONS))
            .expect("a registry kind")
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&decoded, o, "netlink: {:02x?}", bytes);
        // (c) the builder.
        let mut dev = Device::new("eth0", DevKind::Dummy, 2);
        let node = QdiscNode {
            handle: Handle::new(1, 0),
            parent: H_ROOT,
            opts: o.clone(),
            stab: None,
            stats: Default::default(),
        };
        dev.qdiscs.push(node.clone());
        let mut cls = Classifier::new();
        let built = o.build(&node, &mut BuildCx { dev: &dev, cls: &mut cls, seed: 1 });
        prop_assert!(built.is_ok(), "build: {:?}", built.err());
        Ok(())
    }
}

// Registry properties, kind by kind: random valid options (as tc's parser makes them) survive
// (a) `args` then tc's parser, (b) `encode` then `decode`, and (c) the kernel's checks on add
// and the builder.

/// What every kind's properties below use.
mod kindsc_util {
    use sluice_core::classify::Classifier;
    use sluice_model::grammar::Cur;
    use sluice_model::kinds::{BuildCx, TCA_OPTIONS};
    use sluice_model::model::{DevKind, Device, Handle, QdiscNode, QdiscOpts, H_ROOT};
    use sluice_model::nlattr::{find, Attrs};

    /// tc's parser on `args` (what [`QdiscOpts::args`] wrote) for kind `kind`.
    pub fn parse(kind: &str, args: &str) -> (QdiscOpts, Vec<String>) {
        let argv: Vec<String> = args.split_whitespace().map(String::from).collect();
        let mut cur = Cur { argv: &argv, pos: 0, max_minor: 0xFFFF };
        QdiscOpts::parse_kind_warned(kind, &mut cur)
            .expect("a registry kind")
            .unwrap_or_else(|e| panic!("{kind}{args}: {}", e.message))
    }

    /// `o` -> args -> tc's parser.
    pub fn reparse(o: &QdiscOpts) -> QdiscOpts {
        parse(o.kind(), &o.args()).0
    }

    /// The attributes `o` encodes to (after `TCA_KIND`).
    pub fn encode(o: &QdiscOpts) -> Vec<u8> {
        let mut a = Attrs::new();
        o.encode(&mut a).expect("encodable");
        a.into_bytes()
    }

    /// `o` -> netlink -> decode.
    pub fn redecode(o: &QdiscOpts) -> QdiscOpts {
        let b = encode(o);
        QdiscOpts::decode(o.kind(), find(&b, TCA_OPTIONS))
            .expect("a registry kind")
            .unwrap_or_else(|e| panic!("{o:?}: {e}"))
    }

    /// The kernel's checks on add, then the builder, on a dummy device's root.
    pub fn builds(o: &QdiscOpts) {
        let mut dev = Device::new("dummy0", DevKind::Dummy, 2);
        let opts = o.change(&dev, None).unwrap_or_else(|e| panic!("{o:?}: {e:?}"));
        let node = QdiscNode {
            handle: Handle::new(1, 0),
            parent: H_ROOT,
            opts,
            stab: None,
            stats: Default::default(),
        };
        dev.qdiscs.push(node.clone());
        let mut cls = Classifier::new();
        let mut cx = BuildCx { dev: &dev, cls: &mut cls, seed: 7 };
        if let Err(e) = node.opts.build(&node, &mut cx) {
            panic!("{o:?}: {e}");
        }
    }

    /// A probability as tc scales it (`u32::MAX` is 100%), the ends likelier.
    pub fn pct() -> impl proptest::strategy::Strategy<Value = u32> {
        use proptest::prelude::*;
        prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()]
    }
}

mod netem_props {
    use super::kindsc_util::*;
    use proptest::prelude::*;
    use sluice_model::model::*;

    /// ns the kernel keeps for `us` µs: tc's ticks (µs · 15.625, truncated), shifted by 6.
    fn ticks_ns(us: u32) -> u64 {
        ((us as f64 * 15.625) as u32 as u64) << 6
    }

    fn dist() -> impl Strategy<Value = NetemDist> {
        prop_oneof![Just("normal"), Just("pareto"), Just("paretonormal")]
            .prop_map(|n| NetemDist { name: n.into(), table: Vec::new() })
    }

    fn loss_model() -> impl Strategy<Value = Option<NetemLoss>> {
        prop_oneof![
            Just(None),
            (pct(), pct(), pct(), pct(), pct())
                .prop_map(|(p13, p31, p32, p23, p14)| Some(NetemLoss::State { p13, p31, p32, p23, p14 })),
            (pct(), pct(), pct(), pct()).prop_map(|(p, r, h, k1)| Some(NetemLoss::Gemodel { p, r, h, k1 })),
        ]
    }

    fn rate() -> impl Strategy<Value = NetemRateOpts> {
        (1u64..=1 << 40, any::<i32>(), any::<u32>(), any::<i32>()).prop_map(|(b, po, cs, co)| NetemRateOpts {
            bytes_per_sec: b,
            packet_overhead: po,
            cell_size: cs,
            cell_overhead: co,
        })
    }

    /// A slot (plain, or with a table) and its table.
    fn slot() -> impl Strategy<Value = Option<(NetemSlotOpts, Option<NetemDist>)>> {
        let limits = (0..=i32::MAX, 0..=i32::MAX);
        prop_oneof![
            Just(None),
            (0i64..1_000_000_000_000, 0i64..1_000_000_000_000, limits.clone()).prop_map(|(a, d, (p, b))| {
                Some((
                    NetemSlotOpts {
                        min_delay: a,
                        max_delay: a + d,
                        max_packets: p,
                        max_bytes: b,
                        ..Default::default()
                    },
                    None,
                ))
            }),
            (0i64..1_000_000_000_000, 1i64..1_000_000_000_000, limits, dist()).prop_map(
                |(dd, dj, (p, b), d)| {
                    Some((
                        NetemSlotOpts {
                            dist_delay: dd,
                            dist_jitter: dj,
                            max_packets: p,
                            max_bytes: b,
                            ..Default::default()
                        },
                        Some(d),
                    ))
                }
            ),
        ]
    }

    /// Options tc's parser makes: its rules on what goes with what applied.
    fn opts() -> impl Strategy<Value = NetemOpts> {
        let times = (1u32..=100_000, 0u32..=10_000_000, 0u32..=2_000_000);
        let probs = (pct(), pct(), loss_model(), any::<bool>(), proptest::option::of((pct(), pct(), pct())));
        let more = (
            proptest::option::of((pct(), pct())),
            proptest::option::of((pct(), pct())),
            1u32..=1000,
            proptest::option::of(rate()),
            slot(),
            proptest::option::of(dist()),
        );
        (times, probs, more).prop_map(
            |(
                (limit, lat, jit),
                (loss, duplicate, loss_model, ecn, corr),
                (reorder, corrupt, gap, rate, slot, d),
            )| {
                let latency = ticks_ns(lat);
                let jitter = ticks_ns(jit);
                // A loss model excludes random loss and its correlation.
                let loss = if loss_model.is_some() { 0 } else { loss };
                let corr = corr.map(|(delay, l, dup)| NetemCorr {
                    delay,
                    loss: if loss_model.is_some() { 0 } else { l },
                    duplicate: dup,
                });
                // Without the correlation attribute, no correlation was given.
                let prob = |p: Option<(u32, u32)>| {
                    p.map(|(probability, c)| NetemProb { probability, correlation: corr.map_or(0, |_| c) })
                };
                // Reordering needs a delay; a gap needs reordering (tc's default gap is 1).
                let reorder = prob(reorder).filter(|_| latency != 0);
                let gap = if reorder.is_some_and(|r| r.probability != 0) { gap } else { 0 };
                let (slot, slot_distribution) = match slot {
                    Some((s, d)) => (Some(s), d),
                    None => (None, None),
                };
                NetemOpts {
                    limit,
                    latency,
                    jitter,
                    loss,
                    gap,
                    duplicate,
                    corr,
                    reorder,
                    corrupt: prob(corrupt),
                    ecn: ecn && (loss != 0 || loss_model.is_some()),
                    loss_model,
                    rate,
                    slot,
                    distribution: d.filter(|_| latency != 0 && jitter != 0),
                    slot_distribution,
                }
            },
        )
    }

    proptest! {
        #[test]
        fn netem_options_survive_tc_netlink_and_the_builder(o in opts()) {
            let o = QdiscOpts::Netem(Box::new(o));
            prop_assert_eq!(reparse(&o), o.clone(), "{}", o.args());
            prop_assert_eq!(redecode(&o), o.clone());
            builds(&o);
        }
    }
}

mod red_props {
    use super::kindsc_util::*;
    use proptest::prelude::*;
    use sluice_model::kinds::red::{eval_ewma, eval_idle_damping, eval_p, kernel_check};
    use sluice_model::model::*;

    /// Options as tc derives them from its inputs (Wlog, Plog, Scell_log and max_P), when it can
    /// and the kernel takes them.
    fn opts() -> impl Strategy<Value = RedOpts> {
        // min below `burst` packets of `avpkt` (else no Wlog lets the burst in).
        let sizes = (1u32..=65_536, 1u32..=1000).prop_flat_map(|(avpkt, burst)| {
            (1u32..=u32::MAX, 1..=avpkt as u64 * burst as u64, 0u32..=10_000_000, Just(avpkt), Just(burst))
        });
        let rest = (1u32..=u32::MAX, prop_oneof![Just(0u32), any::<u32>()], any::<[bool; 4]>());
        (sizes, rest).prop_filter_map(
            "tc derives no Wlog, Plog or idle table, or the kernel refuses them",
            |((limit, min, delta, avpkt, burst), (rate, max_p, [ecn, harddrop, adaptive, nodrop]))| {
                let min = u32::try_from(min).ok()?;
                let max = min.checked_add(delta)?;
                let wlog = eval_ewma(min, burst, avpkt).ok()?;
                // max_P 0 is what `probability 1` gives.
                let probability = if max_p == 0 { 1.0 } else { max_p as f64 / 4_294_967_296.0 };
                let plog = eval_p(min, max, probability)?;
                let (scell_log, _) = eval_idle_damping(wlog, avpkt, rate)?;
                let o = RedOpts {
                    limit,
                    min,
                    max,
                    avpkt,
                    burst,
                    bandwidth: rate as u64 * 8,
                    wlog,
                    plog,
                    scell_log,
                    max_p,
                    ecn,
                    harddrop,
                    adaptive,
                    nodrop,
                };
                // What the kernel then accepts (thresholds shifted by Wlog fit 32 bits, ...).
                kernel_check(&o).is_ok().then_some(o)
            },
        )
    }

    proptest! {
        #[test]
        fn red_options_survive_tc_netlink_and_the_builder(r in opts()) {
            let o = QdiscOpts::Red(r.clone());
            prop_assert_eq!(reparse(&o), o.clone(), "{}", o.args());
            // tc's inputs of the idle table and of Wlog are not sent: decoding finds others that
            // send the same bytes (and, when a burst does, parse back to the same options).
            let back = redecode(&o);
            let QdiscOpts::Red(d) = &back else { panic!("{back:?}") };
            prop_assert_eq!(
                RedOpts { avpkt: r.avpkt, burst: r.burst, bandwidth: r.bandwidth, ..d.clone() },
                r.clone()
            );
            prop_assert_eq!(encode(&back), encode(&o));
            if d.burst != 0 {
                prop_assert_eq!(reparse(&back), back.clone(), "{}", back.args());
            }
            builds(&o);
        }
    }
}

mod cake_props {
    use super::kindsc_util::*;
    use proptest::option::of;
    use proptest::prelude::*;
    use sluice_core::cake::{AckFilter, AtmMode, FlowMode, TinMode};
    use sluice_model::model::*;

    /// Options tc's parser makes: `bandwidth`/`unlimited` also send autorate off, `rtt` sends
    /// the target (rtt / 20), `raw` sends an overhead and a cell mode.
    fn opts() -> impl Strategy<Value = CakeOpts> {
        let head = (
            of(prop_oneof![Just(0u64), 1u64..=1 << 40]),
            any::<bool>(),
            of(prop::sample::select(TinMode::ALL.to_vec())),
            of(prop::sample::select(FlowMode::ALL.to_vec())),
            of(prop::sample::select(vec![AtmMode::Noatm, AtmMode::Atm, AtmMode::Ptm])),
            of(-64i32..=256),
            any::<bool>(),
            of(1u32..=256),
        );
        let tail = (
            of(1u32..=1_000_000_000),
            of(1u32..=u32::MAX),
            of(1u32..=u32::MAX),
            of(any::<bool>()),
            of(any::<bool>()),
            of(any::<bool>()),
            of(any::<bool>()),
            of(prop::sample::select(vec![AckFilter::None, AckFilter::Filter, AckFilter::Aggressive])),
        );
        (head, tail).prop_map(
            |(
                (bandwidth, autorate, diffserv, flow_mode, atm, overhead, raw, mpu),
                (rtt, memlimit, fwmark, nat, wash, split_gso, ingress, ack_filter),
            )| CakeOpts {
                bandwidth,
                autorate: match (bandwidth, autorate) {
                    (_, true) => Some(true),
                    (Some(_), false) => Some(false),
                    (None, false) => None,
                },
                diffserv,
                flow_mode,
                atm: if raw { atm.or(Some(AtmMode::Noatm)) } else { atm },
                overhead: if raw { overhead.or(Some(0)) } else { overhead },
                raw,
                mpu,
                rtt,
                target: rtt.map(|r| (r / 20).max(1)),
                memlimit,
                fwmark,
                nat,
                wash,
                split_gso,
                ingress,
                ack_filter,
            },
        )
    }

    proptest! {
        #[test]
        fn cake_options_survive_tc_netlink_and_the_builder(c in opts()) {
            let o = QdiscOpts::Cake(c);
            prop_assert_eq!(reparse(&o), o.clone(), "{}", o.args());
            prop_assert_eq!(redecode(&o), o.clone());
            builds(&o);
        }
    }
}

mod hfsc_props {
    use super::kindsc_util::*;
    use proptest::prelude::*;
    use sluice_model::model::*;

    proptest! {
        #[test]
        fn hfsc_options_survive_tc_netlink_and_the_builder(default in any::<u16>()) {
            let o = QdiscOpts::Hfsc(HfscOpts { default, ..HfscOpts::default() });
            prop_assert_eq!(reparse(&o), o.clone(), "{}", o.args());
            prop_assert_eq!(redecode(&o), o.clone());
            builds(&o);
        }
    }
}

mod ets_props {
    use super::kindsc_util::*;
    use proptest::prelude::*;
    use sluice_model::model::*;

    /// 1..=16 bands, the first `strict` strict, quanta for some of the others, a priomap of up to
    /// 16 bands that exist.
    fn opts() -> impl Strategy<Value = EtsOpts> {
        (1u8..=16)
            .prop_flat_map(|bands| (Just(bands), 0..=bands))
            .prop_flat_map(|(bands, strict)| {
                let drr = (bands - strict) as usize;
                (
                    Just(bands),
                    Just(strict),
                    prop::collection::vec(1u32..=u32::MAX, 0..=drr),
                    prop::collection::vec(0..bands, 0..=16),
                )
            })
            .prop_map(|(bands, strict, quanta, priomap)| EtsOpts { bands, strict, quanta, priomap })
    }

    proptest! {
        #[test]
        fn ets_options_survive_tc_netlink_and_the_builder(e in opts()) {
            let o = QdiscOpts::Ets(e);
            prop_assert_eq!(reparse(&o), o.clone(), "{}", o.args());
            prop_assert_eq!(redecode(&o), o.clone());
            builds(&o);
        }
    }
}

/// Helpers of the base kinds' blocks (fifos, tbf, htb, drr, mq, ingress, clsact).
#[allow(dead_code)]
mod base_kinds {
    use sluice_model::build::{build_device, build_hook, BuildError};
    use sluice_model::grammar::Cur;
    use sluice_model::kinds::TCA_OPTIONS;
    use sluice_model::model::{
        DevKind, Device, FifoOpts, Handle, QdiscNode, QdiscOpts, State, H_INGRESS, H_MIN_INGRESS, H_ROOT,
    };
    use sluice_model::nlattr::{find, Attrs};

    /// `o`'s tc words read back by the kind's parser.
    pub fn reparsed(o: &QdiscOpts) -> QdiscOpts {
        let argv: Vec<String> = o.args().split_whitespace().map(String::from).collect();
        let mut cur = Cur { argv: &argv, pos: 0, max_minor: Handle::TC_MAX_MINOR };
        QdiscOpts::parse_kind(o.kind(), &mut cur)
            .expect("a registry kind")
            .unwrap_or_else(|e| panic!("{argv:?}: {e:?}"))
    }

    /// `o` sent as tc sends it and decoded back.
    pub fn decoded(o: &QdiscOpts) -> QdiscOpts {
        let mut a = Attrs::new();
        o.encode(&mut a).unwrap_or_else(|e| panic!("{o:?}: {e}"));
        let bytes = a.into_bytes();
        QdiscOpts::decode(o.kind(), find(&bytes, TCA_OPTIONS)).unwrap().unwrap()
    }

    /// A device holding `o` at `parent` (and a pfifo root when `o` goes on the ingress slot).
    pub fn state_with(o: &QdiscOpts, parent: Handle) -> State {
        let mut dev = Device::new("t0", DevKind::Dummy, 2);
        dev.num_tx_queues = 4;
        if parent == H_INGRESS {
            dev.qdiscs.push(node(QdiscOpts::Pfifo(FifoOpts::default()), Handle::new(1, 0), H_ROOT));
            dev.qdiscs.push(node(o.clone(), Handle::new(0xFFFF, 0), H_INGRESS));
        } else {
            dev.qdiscs.push(node(o.clone(), Handle::new(1, 0), parent));
        }
        State { devices: vec![dev], ..State::default() }
    }

    fn node(opts: QdiscOpts, handle: Handle, parent: Handle) -> QdiscNode {
        QdiscNode { handle, parent, opts, stab: None, stats: Default::default() }
    }

    /// The builder makes the running root qdisc.
    pub fn builds(o: &QdiscOpts) -> Result<(), BuildError> {
        build_device(&state_with(o, H_ROOT), "t0").map(|_| ())
    }

    /// The builder makes the device with `o` on its ingress slot (and its hook's filters).
    pub fn builds_at_ingress(o: &QdiscOpts) -> Result<(), BuildError> {
        let st = state_with(o, H_INGRESS);
        build_device(&st, "t0")?;
        build_hook(&st, "t0", H_MIN_INGRESS).map(|_| ())
    }
}

mod fifo_props {
    use super::base_kinds::*;
    use proptest::prelude::*;
    use sluice_model::model::{FifoOpts, QdiscOpts};

    fn limit() -> impl Strategy<Value = Option<u32>> {
        proptest::option::of(1u32..=u32::MAX)
    }

    proptest! {
        #[test]
        fn pfifo(limit in limit()) {
            let o = QdiscOpts::Pfifo(FifoOpts { limit });
            prop_assert_eq!(reparsed(&o), o.clone());
            prop_assert_eq!(decoded(&o), o.clone());
            prop_assert!(builds(&o).is_ok());
        }

        #[test]
        fn bfifo(limit in limit()) {
            let o = QdiscOpts::Bfifo(FifoOpts { limit });
            prop_assert_eq!(reparsed(&o), o.clone());
            prop_assert_eq!(decoded(&o), o.clone());
            prop_assert!(builds(&o).is_ok());
        }

        #[test]
        fn pfifo_head_drop(limit in limit()) {
            let o = QdiscOpts::PfifoHeadDrop(FifoOpts { limit });
            prop_assert_eq!(reparsed(&o), o.clone());
            prop_assert_eq!(decoded(&o), o.clone());
            prop_assert!(builds(&o).is_ok());
        }
    }
}

mod tbf_props {
    use super::base_kinds::*;
    use proptest::prelude::*;
    use sluice_model::model::{LinkLayer, QdiscOpts, TbfOpts};

    /// Valid TBF options: rates in whole bytes per second (tc sends bytes), a peak rate above the
    /// rate with its bucket (`mtu` without a peak rate only sizes the table's cells and is not
    /// read back), tc's 16-bit overhead and mpu.
    fn tbf() -> impl Strategy<Value = TbfOpts> {
        (
            1u64..=12_500_000_000,
            1u32..=u32::MAX,
            1u32..=u32::MAX,
            proptest::option::of((1u64..=12_500_000_000, 1u32..=u32::MAX)),
            0i32..=65535,
            0u32..=65535,
            any::<bool>(),
        )
            .prop_map(|(bytes, burst, limit, peak, overhead, mpu, atm)| TbfOpts {
                rate: bytes * 8,
                burst,
                limit,
                peakrate: peak.map(|(extra, _)| (bytes + extra) * 8),
                mtu: peak.map(|(_, mtu)| mtu),
                overhead,
                mpu,
                linklayer: if atm { LinkLayer::Atm } else { LinkLayer::Ethernet },
            })
    }

    proptest! {
        #[test]
        fn tbf_round_trips_and_builds(t in tbf()) {
            let o = QdiscOpts::Tbf(t);
            prop_assert_eq!(reparsed(&o), o.clone());
            prop_assert_eq!(decoded(&o), o.clone());
            prop_assert!(builds(&o).is_ok(), "{:?}", builds(&o).err());
        }
    }
}

mod htb_props {
    use super::base_kinds::*;
    use proptest::prelude::*;
    use sluice_model::kinds::Unencodable;
    use sluice_model::model::{HtbOpts, QdiscOpts};
    use sluice_model::nlattr::Attrs;

    fn htb() -> impl Strategy<Value = HtbOpts> {
        (
            1u32..=u32::MAX,
            0u32..=0xFFFF,
            proptest::option::of(any::<u32>()),
            any::<bool>(),
            any::<bool>(),
            any::<u32>(),
        )
            .prop_map(|(r2q, default, direct_qlen, offload, textbook, debug)| HtbOpts {
                r2q,
                default,
                direct_qlen,
                offload,
                textbook,
                debug,
            })
    }

    proptest! {
        #[test]
        fn htb_round_trips_and_builds(h in htb()) {
            let o = QdiscOpts::Htb(h.clone());
            prop_assert_eq!(reparsed(&o), o.clone());
            if h.textbook {
                // Sluice's own sharing: the kernel has no such HTB, `apply` refuses it by name.
                let e: Unencodable = o.encode(&mut Attrs::new()).unwrap_err();
                prop_assert_eq!(e.option, "textbook");
            } else {
                prop_assert_eq!(decoded(&o), o.clone());
            }
            prop_assert!(builds(&o).is_ok());
        }
    }
}

mod drr_props {
    use super::base_kinds::*;
    use sluice_model::model::{DrrOpts, QdiscOpts};

    #[test]
    fn drr_round_trips_and_builds() {
        let o = QdiscOpts::Drr(DrrOpts {});
        assert_eq!(reparsed(&o), o);
        assert_eq!(decoded(&o), o);
        assert!(builds(&o).is_ok());
    }

    /// State files of before the registry wrote the kind alone.
    #[test]
    fn kind_alone_loads() {
        let o: QdiscOpts = serde_json::from_str(r#"{"kind":"drr"}"#).unwrap();
        assert_eq!(o, QdiscOpts::Drr(DrrOpts {}));
        assert_eq!(serde_json::to_string(&o).unwrap(), r#"{"kind":"drr"}"#);
    }
}

mod mq_props {
    use super::base_kinds::*;
    use sluice_model::build::BuildError;
    use sluice_model::model::{MqOpts, QdiscOpts};

    #[test]
    fn mq_round_trips_and_the_builder_refuses_it_by_name() {
        let o = QdiscOpts::Mq(MqOpts::default());
        assert_eq!(reparsed(&o), o);
        assert_eq!(decoded(&o), o);
        // One qdisc per transmit queue is not something sluice-core runs.
        assert!(matches!(builds(&o), Err(BuildError::Unsupported(w)) if w.contains("mq")));
    }
}

mod ingress_props {
    use super::base_kinds::*;
    use sluice_model::model::{IngressOpts, QdiscOpts};

    #[test]
    fn ingress_round_trips_and_builds() {
        let o = QdiscOpts::Ingress(IngressOpts {});
        assert_eq!(reparsed(&o), o);
        assert_eq!(decoded(&o), o);
        assert!(builds_at_ingress(&o).is_ok());
        let o: QdiscOpts = serde_json::from_str(r#"{"kind":"ingress"}"#).unwrap();
        assert_eq!(o, QdiscOpts::Ingress(IngressOpts {}));
    }
}

mod clsact_props {
    use super::base_kinds::*;
    use sluice_model::model::{ClsactOpts, QdiscOpts};

    #[test]
    fn clsact_round_trips_and_builds() {
        let o = QdiscOpts::Clsact(ClsactOpts {});
        assert_eq!(reparsed(&o), o);
        assert_eq!(decoded(&o), o);
        assert!(builds_at_ingress(&o).is_ok());
        let o: QdiscOpts = serde_json::from_str(r#"{"kind":"clsact"}"#).unwrap();
        assert_eq!(o, QdiscOpts::Clsact(ClsactOpts {}));
    }
}

/// Class options of every class kind (HTB, DRR, HFSC, ETS): (a) `args` then tc's parser gives the
/// same model; (b) `encode` then `decode` gives the same model (HTB: the same request again,
/// since buckets travel as ticks and the mtu as the tables' cell size); (c) the builder accepts a
/// tree holding the class. State files written before the class registry still load.
mod class_props {
    use proptest::option::of;
    use proptest::prelude::*;
    use sluice_core::hfsc::ServiceCurve;
    use sluice_model::build::build_device;
    use sluice_model::grammar::Cur;
    use sluice_model::kinds::TCA_OPTIONS;
    use sluice_model::model::*;
    use sluice_model::nlattr::{find, Attrs};

    fn parse(kind: &str, words: &str) -> ClassOpts {
        let argv: Vec<String> = words.split_whitespace().map(String::from).collect();
        let mut cur = Cur { argv: &argv, pos: 0, max_minor: 0xFFFF };
        ClassOpts::parse_kind(kind, &mut cur)
            .expect("a class kind")
            .unwrap_or_else(|e| panic!("{kind} {words}: {}", e.message))
    }

    fn encoded(o: &ClassOpts) -> Vec<u8> {
        let mut a = Attrs::new();
        o.encode(&mut a).unwrap_or_else(|e| panic!("{o:?}: {e}"));
        a.into_bytes()
    }

    fn decoded(o: &ClassOpts) -> ClassOpts {
        let bytes = encoded(o);
        let opts = find(&bytes, TCA_OPTIONS).or_else(|| find(&bytes, TCA_OPTIONS | 0x8000));
        ClassOpts::decode(o.kind(), opts).expect("a class kind").unwrap_or_else(|e| panic!("{o:?}: {e}"))
    }

    /// A device with qdisc `q` as root and class `1:1` holding `c` (with a pfifo on it).
    fn builds(q: QdiscOpts, c: ClassOpts) {
        let mut dev = Device::new("t0", DevKind::Dummy, 2);
        let node =
            |opts, handle, parent| QdiscNode { handle, parent, opts, stab: None, stats: Default::default() };
        dev.qdiscs.push(node(q, Handle::new(1, 0), H_ROOT));
        dev.classes.push(ClassNode {
            classid: Handle::new(1, 1),
            parent: Handle::new(1, 0),
            opts: c,
            stats: Default::default(),
        });
        dev.qdiscs.push(node(QdiscOpts::Pfifo(FifoOpts::default()), Handle::new(2, 0), Handle::new(1, 1)));
        let st = State { devices: vec![dev], ..State::default() };
        if let Err(e) = build_device(&st, "t0") {
            panic!("build: {e}");
        }
    }

    /// An HTB class's request with its two bucket words (ticks) apart.
    fn htb_request(o: &ClassOpts) -> (Vec<u8>, u32, u32) {
        let mut bytes = encoded(o);
        let opts = find(&bytes, TCA_OPTIONS).unwrap();
        let parms = find(opts, 1).unwrap();
        let at = parms.as_ptr() as usize - bytes.as_ptr() as usize + 24;
        let word = |b: &[u8], i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
        let (buffer, cbuffer) = (word(&bytes, at), word(&bytes, at + 4));
        bytes[at..at + 8].fill(0);
        (bytes, buffer, cbuffer)
    }

    /// tc words of an HTB class (rates in whole bytes per second, as the kernel holds them; from
    /// 800 kbit so that a bucket of up to 10 MB is less than 2^32 ticks, which tc would wrap).
    fn htb_words() -> impl Strategy<Value = String> {
        (
            (100_000u64..=12_500_000_000, of(100_000u64..=12_500_000_000)),
            (of(1u32..=10_000_000), of(1u32..=10_000_000)),
            (0u32..=7, of(1u32..=u32::MAX)),
            (of(64u32..=65535), 0u32..=65535, 0u32..=65535, any::<bool>()),
        )
            .prop_map(
                |((rate, ceil), (burst, cburst), (prio, quantum), (mtu, mpu, overhead, atm))| {
                    let mut s = format!("rate {}bit", rate * 8);
                    if let Some(c) = ceil {
                        s += &format!(" ceil {}bit", c * 8);
                    }
                    if let Some(b) = burst {
                        s += &format!(" burst {b}");
                    }
                    if let Some(b) = cburst {
                        s += &format!(" cburst {b}");
                    }
                    s += &format!(" prio {prio} mpu {mpu} overhead {overhead}");
                    if let Some(q) = quantum {
                        s += &format!(" quantum {q}");
                    }
                    if let Some(m) = mtu {
                        s += &format!(" mtu {m}");
                    }
                    if atm {
                        s += " linklayer atm";
                    }
                    s
                },
            )
    }

    fn curve() -> impl Strategy<Value = ServiceCurve> {
        (0u32..=1_000_000_000, 0u32..=10_000_000, 0u32..=1_000_000_000)
            .prop_filter("two zero slopes", |(m1, _, m2)| *m1 != 0 || *m2 != 0)
            .prop_map(|(m1, d, m2)| ServiceCurve { m1, d, m2 })
    }

    /// rt and/or ls, and ul only with ls (as tc requires).
    fn hfsc_opts() -> impl Strategy<Value = HfscClassOpts> {
        (of(curve()), of(curve()), of(curve()))
            .prop_filter("rt or ls", |(rt, ls, _)| rt.is_some() || ls.is_some())
            .prop_map(|(rt, ls, ul)| HfscClassOpts { rt, ls: ls.or(rt), ul })
    }

    proptest! {
        #[test]
        fn htb_classes_survive_tc_netlink_and_the_builder(words in htb_words()) {
            let o = parse("htb", &words);
            prop_assert_eq!(parse("htb", &o.args()), o.clone(), "{}", o.args());
            let d = decoded(&o);
            let (again, first) = (htb_request(&d), htb_request(&o));
            prop_assert_eq!(&again.0, &first.0, "{}", words);
            // Buckets go as ticks and come back as bytes: the same ticks again.
            prop_assert_eq!((again.1, again.2), (first.1, first.2), "{}", words);
            let (ClassOpts::Htb(a), ClassOpts::Htb(b)) = (&o, &d) else { unreachable!() };
            prop_assert_eq!(
                (a.rate, a.ceil, a.prio, a.quantum, a.mpu, a.overhead, a.linklayer),
                (b.rate, b.ceil, b.prio, b.quantum, b.mpu, b.overhead, b.linklayer)
            );
            builds(QdiscOpts::Htb(HtbOpts::default()), o);
        }

        #[test]
        fn drr_classes_survive_tc_netlink_and_the_builder(quantum in of(1u32..=u32::MAX)) {
            let o = ClassOpts::Drr(DrrClassOpts { quantum });
            prop_assert_eq!(parse("drr", &o.args()), o.clone());
            prop_assert_eq!(decoded(&o), o.clone());
            builds(QdiscOpts::Drr(DrrOpts {}), o);
        }

        #[test]
        fn hfsc_classes_survive_tc_netlink_and_the_builder(h in hfsc_opts()) {
            let o = ClassOpts::Hfsc(h);
            prop_assert_eq!(parse("hfsc", &o.args()), o.clone(), "{}", o.args());
            prop_assert_eq!(decoded(&o), o.clone());
            builds(QdiscOpts::Hfsc(HfscOpts::default()), o);
        }

        #[test]
        fn ets_class_changes_survive_tc_and_netlink(quantum in of(1u32..=u32::MAX)) {
            let o = ClassOpts::Ets(EtsClassOpts { quantum });
            prop_assert_eq!(parse("ets", &o.args()), o.clone());
            prop_assert_eq!(decoded(&o), o.clone());
        }
    }

    /// Class options as state files held them before the class registry (DRR and ETS were struct
    /// variants `{"kind":"drr","quantum":N}`; the JSON is the same).
    #[test]
    fn class_options_of_older_state_files_load() {
        let load = |s: &str| serde_json::from_str::<ClassOpts>(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(
            load(r#"{"kind":"drr","quantum":1514}"#),
            ClassOpts::Drr(DrrClassOpts { quantum: Some(1514) })
        );
        assert_eq!(load(r#"{"kind":"drr"}"#), ClassOpts::Drr(DrrClassOpts { quantum: None }));
        assert_eq!(
            load(r#"{"kind":"ets","quantum":3000}"#),
            ClassOpts::Ets(EtsClassOpts { quantum: Some(3000) })
        );
        let rt = ServiceCurve { m1: 250_000, d: 10_000, m2: 125_000 };
        assert_eq!(
            load(r#"{"kind":"hfsc","rt":{"m1":250000,"d":10000,"m2":125000}}"#),
            ClassOpts::Hfsc(HfscClassOpts { rt: Some(rt), ls: None, ul: None })
        );
        for o in
            [ClassOpts::Drr(DrrClassOpts { quantum: Some(9000) }), ClassOpts::Drr(DrrClassOpts::default())]
        {
            let text = serde_json::to_string(&o).unwrap();
            assert_eq!(load(&text), o);
        }
        assert_eq!(
            serde_json::to_string(&ClassOpts::Drr(DrrClassOpts::default())).unwrap(),
            r#"{"kind":"drr"}"#
        );
        let htb = parse("htb", "rate 10mbit ceil 20mbit prio 2");
        let text = serde_json::to_string(&htb).unwrap();
        assert!(text.starts_with(r#"{"kind":"htb","rate":"#), "{text}");
        assert_eq!(load(&text), htb);
    }
}

mod pie_props {
    use super::kindsc_util::*;
    use proptest::prelude::*;
    use sluice_model::model::{PieOpts, PieShared, QdiscOpts};

    /// The controller's options as tc's parser makes them (numbers not 0, gains at most 32).
    pub fn shared() -> impl Strategy<Value = PieShared> {
        let flag = || proptest::option::of(any::<bool>());
        (
            proptest::option::of(1u32..=u32::MAX),
            proptest::option::of(1u32..=u32::MAX),
            proptest::option::of(1u32..=32),
            proptest::option::of(1u32..=32),
            flag(),
            flag(),
            flag(),
        )
            .prop_map(|(target, tupdate, alpha, beta, ecn, bytemode, dq_rate_estimator)| PieShared {
                target,
                tupdate,
                alpha,
                beta,
                ecn,
                bytemode,
                dq_rate_estimator,
            })
    }

    fn opts() -> impl Strategy<Value = PieOpts> {
        (proptest::option::of(1u32..=u32::MAX), shared()).prop_map(|(limit, pie)| PieOpts { limit, pie })
    }

    proptest! {
        #[test]
        fn pie_words_netlink_and_build(o in opts()) {
            let o = QdiscOpts::Pie(o);
            prop_assert_eq!(reparse(&o), o.clone());
            prop_assert_eq!(redecode(&o), o.clone());
            builds(&o);
            // The state file (the shared options are flattened into the kind's object).
            let back: QdiscOpts = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
            prop_assert_eq!(back, o);
        }
    }

    #[test]
    fn a_state_file_naming_the_kind_alone_loads() {
        let o: QdiscOpts = serde_json::from_str(r#"{"kind":"pie"}"#).unwrap();
        assert_eq!(o, QdiscOpts::Pie(PieOpts::default()));
        let o: QdiscOpts = serde_json::from_str(r#"{"kind":"pie","limit":5,"ecn":true}"#).unwrap();
        let QdiscOpts::Pie(p) = o else { panic!() };
        assert_eq!((p.limit, p.pie.ecn), (Some(5), Some(true)));
    }
}

mod fq_pie_props {
    use super::kindsc_util::*;
    use proptest::prelude::*;
    use sluice_model::model::{FqPieOpts, QdiscOpts};

    fn opts() -> impl Strategy<Value = FqPieOpts> {
        (
            proptest::option::of(1u32..=u32::MAX),
            proptest::option::of(1u32..=65536),
            proptest::option::of(1u32..=1 << 20),
            proptest::option::of(1u32..=u32::MAX),
            proptest::option::of(1u32..=99),
            super::pie_props::shared(),
        )
            .prop_map(|(limit, flows, quantum, memory_limit, ecn_prob, pie)| FqPieOpts {
                limit,
                flows,
                quantum,
                memory_limit,
                ecn_prob,
                pie,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn fq_pie_words_netlink_and_build(o in opts()) {
            let o = QdiscOpts::FqPie(o);
            prop_assert_eq!(reparse(&o), o.clone());
            prop_assert_eq!(redecode(&o), o.clone());
            builds(&o);
            let back: QdiscOpts = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
            prop_assert_eq!(back, o);
        }
    }

    #[test]
    fn a_state_file_naming_the_kind_alone_loads() {
        let o: QdiscOpts = serde_json::from_str(r#"{"kind":"fq_pie"}"#).unwrap();
        assert_eq!(o, QdiscOpts::FqPie(FqPieOpts::default()));
    }
}

mod fq_props {
    use super::kinds_a::*;
    use super::kindsc_util::builds;
    use proptest::prelude::*;
    use sluice_model::kinds::fq::FqOpts;
    use sluice_model::model::QdiscOpts;

    fn u32s() -> impl Strategy<Value = Option<u32>> {
        proptest::option::of(prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()])
    }

    /// Options tc 6.1 sends and the kernel accepts (bucket log 1..=18, quantum 1..=2^20,
    /// initial quantum up to 2^31-1).
    fn opts() -> impl Strategy<Value = FqOpts> {
        (
            (u32s(), u32s(), proptest::option::of(1u32..=18), proptest::option::of(1u32..=1 << 20)),
            (
                proptest::option::of(0u32..=i32::MAX as u32),
                proptest::option::of(any::<bool>()),
                u32s(),
                u32s(),
            ),
            (u32s(), u32s(), u32s(), u32s()),
            (u32s(), u32s(), proptest::option::of(any::<bool>())),
        )
            .prop_map(
                |(
                    (limit, flow_limit, buckets_log, quantum),
                    (initial_quantum, pacing, maxrate, low_rate_threshold),
                    (defrate, refill_delay, orphan_mask, ce_threshold),
                    (timer_slack, horizon, horizon_drop),
                )| FqOpts {
                    limit,
                    flow_limit,
                    buckets_log,
                    quantum,
                    initial_quantum,
                    pacing,
                    maxrate,
                    low_rate_threshold,
                    defrate,
                    refill_delay,
                    orphan_mask,
                    ce_threshold,
                    timer_slack,
                    horizon,
                    horizon_drop,
                },
            )
    }

    proptest! {
        #[test]
        fn fq_words_netlink_and_build(o in opts()) {
            let q = QdiscOpts::Fq(o);
            check(&q)?;
            builds(&q);
        }
    }

    #[test]
    fn fq_words_tc_sends_but_the_kernel_refuses() {
        for words in
            ["quantum 0", "quantum 1048577", "initial_quantum 0x80000000", "buckets 1", "buckets 1000000"]
        {
            let o = parse("fq", words).unwrap();
            let dev = sluice_model::model::Device::new("eth0", sluice_model::model::DevKind::Dummy, 2);
            assert!(o.change(&dev, None).is_err(), "{words}");
        }
        assert_eq!(parse("fq", "buckets 0").unwrap(), QdiscOpts::Fq(FqOpts::default()));
        assert!(parse("fq", "maxrate 50%").is_err());
        assert!(parse("fq", "maxrate 40gbit").is_err());
    }
}

mod filter_props {
    //! Filter kinds: (a) the model's words (`FilterKind::args`) parse back to the same model and
    //! handle, (b) the options tc would send decode to the same model, (c) the builder accepts
    //! them; and state files written before the filter registry still load.
    use proptest::prelude::*;
    use sluice_core::filter::action::Actions;
    use sluice_model::error::TcError;
    use sluice_model::grammar::Cur;
    use sluice_model::kinds::ematch;
    use sluice_model::kinds::filter_common::{FilterEncodeCx, FilterParseCx};
    use sluice_model::model::*;
    use sluice_model::nlattr::{self, Attrs};

    /// No actions in these properties: a parser reaching one fails.
    struct NoActions;
    impl FilterParseCx for NoActions {
        fn action(&mut self, cur: &mut Cur) -> Result<(), TcError> {
            Err(TcError::usage("no actions here", Some(cur.pos)))
        }
        fn police(&mut self, cur: &mut Cur) -> Result<(), TcError> {
            Err(TcError::usage("no police here", Some(cur.pos)))
        }
    }

    /// Words as a shell splits them (single quotes only: what `args` writes).
    fn words(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let (mut quoted, mut any) = (false, false);
        for c in s.chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    any = true;
                }
                ' ' if !quoted => {
                    if any || !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                    any = false;
                }
                c => cur.push(c),
            }
        }
        if any || !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    fn node(opts: FilterOpts, handle: u32, protocol: u16) -> FilterNode {
        FilterNode {
            parent: Handle::new(1, 0),
            chain: 0,
            prio: 1,
            protocol,
            handle,
            opts,
            actions: Vec::new(),
            police_keyword: false,
        }
    }

    fn check(f: &FilterNode, table: Option<u32>) -> Result<(), TestCaseError> {
        // (a) args -> parse: ` handle H KIND WORDS...`.
        let args = f.opts.args(f);
        let w = words(&args);
        prop_assert_eq!(w[0].as_str(), "handle", "{}", args);
        prop_assert_eq!(w[2].as_str(), f.opts.kind(), "{}", args);
        let rest = w[3..].to_vec();
        let mut cur = Cur { argv: &rest, pos: 0, max_minor: 0xFFFF };
        let p = FilterOpts::parse_kind(f.opts.kind(), &mut cur, Some((1, &w[1])), &mut NoActions)
            .expect("a registry kind")
            .map_err(|e| TestCaseError::fail(format!("{args}: {e:?}")))?;
        prop_assert_eq!(&p.opts, &f.opts, "{}", args);
        prop_assert_eq!(p.handle, f.handle, "{}", args);
        prop_assert_eq!(p.table, table, "{}", args);
        // (b) encode -> decode.
        let mut out = Attrs::new();
        f.opts.encode(f, &mut out, &FilterEncodeCx { actions: &|_, _, _| Ok(()) }).unwrap();
        let bytes = out.into_bytes();
        let options = nlattr::find(&bytes, sluice_model::kinds::TCA_OPTIONS);
        let back = FilterOpts::decode(f.opts.kind(), options).expect("a registry kind").unwrap();
        prop_assert_eq!(&back, &f.opts, "{}", args);
        // (c) the builder accepts it.
        prop_assert!(f.opts.build(f, Actions::new(Vec::new())).is_ok());
        Ok(())
    }

    fn class() -> impl Strategy<Value = Handle> {
        (1u16..0x8000, 1u32..=0xFFFF).prop_map(|(a, b)| Handle::new(a, b))
    }

    /// Ematch trees in the model's canonical form.
    fn ematch_text() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "cmp(u16 at 2 layer 2 mask 0xff00 trans gt 10)",
            "u32(u32 0xc6120000 0xffff0000 at 12) and (cmp(u8 at 9 layer 1 eq 17) or not nbyte(\"ab\" at 0 layer 2))",
            "(cmp(u8 at 9 layer 1 eq 6) and (u32(u32 0x500000 0xffff0000 at 20) or u32(u32 0x1bb0000 0xffff0000 at 20))) or cmp(u8 at 9 layer 1 eq 1)",
            "not u32(u16 0x1122 0xffff at nexthdr+4)",
        ])
        .prop_map(|s| ematch::canonical(&ematch::parse_text(s).unwrap()))
    }

    fn u32_key() -> impl Strategy<Value = U32Opts> {
        let key = (any::<u32>(), any::<u32>(), -64i32..64, any::<bool>()).prop_map(|(v, m, o, n)| U32Key {
            val: v & m,
            mask: m,
            off: o * 4,
            nexthdr: n,
        });
        let offset = (
            proptest::option::of(any::<i16>()),
            any::<bool>(),
            -100i16..100,
            any::<u16>(),
            any::<u8>(),
            any::<bool>(),
        )
            .prop_filter("something set", |(p, v, _, _, _, e)| p.is_some() || *v || *e)
            .prop_map(|(plus, var, at, mask, shift, eat)| U32OffsetOpts {
                plus,
                var,
                at: if var { at * 2 } else { 0 },
                mask: if var { mask } else { 0 },
                shift: if var { shift } else { 0 },
                eat,
            });
        (
            proptest::collection::vec(key, 1..6),
            proptest::option::of(class()),
            proptest::option::of((1u32..0x800).prop_map(|t| t << 20)),
            proptest::option::of((1u32..=u32::MAX, -100i32..100)),
            proptest::option::of("[a-z][a-z0-9]{0,6}"),
            proptest::option::of(offset),
        )
            .prop_map(|(keys, classid, link, hashkey, indev, offset)| {
                // One key per offset (tc merges samples at the same offset).
                let mut seen = Vec::new();
                let keys = keys.into_iter().filter(|k| {
                    let new = !seen.contains(&(k.off, k.nexthdr));
                    seen.push((k.off, k.nexthdr));
                    new
                });
                U32Opts { keys: keys.collect(), classid, link, hashkey, indev, offset }
            })
    }

    proptest! {
        #[test]
        fn u32_keys(u in u32_key(), ht in 1u32..0x1000, bkt in 0u32..0x100, id in 1u32..0x1000, v4 in any::<bool>()) {
            let h = ht << 20 | bkt << 12 | id;
            let f = node(FilterOpts::U32(U32Filter::Key(u)), h, if v4 { ETH_P_IP } else { ETH_P_ALL });
            check(&f, Some(h & 0xFFFF_F000))?;
        }

        #[test]
        fn u32_tables(ht in 1u32..0x800, d in 0u32..=8) {
            let f = node(FilterOpts::U32(U32Filter::Table(U32TableOpts { divisor: 1 << d })), ht << 20, ETH_P_IP);
            check(&f, None)?;
        }

        #[test]
        fn flow(
            hash in any::<bool>(),
            keys in 1u32..(1 << FLOW_KEYS.len()),
            one in 0usize..FLOW_KEYS.len(),
            mask in prop_oneof![Just(u32::MAX), any::<u32>()],
            xor in prop_oneof![Just(0u32), any::<u32>()],
            rshift in proptest::option::of(0u32..32),
            addend in proptest::option::of(any::<u32>()),
            divisor in proptest::option::of(1u32..=65536),
            baseclass in class(),
            perturb in proptest::option::of(0u32..3600),
            em in proptest::option::of(ematch_text()),
            handle in 1u32..=u32::MAX,
        ) {
            // map mode takes one key.
            let keys = if hash { keys } else { 1 << one };
            // A made flow filter has its base class (the kernel's default when not given).
            let o = FlowOpts { hash, keys, mask, xor, rshift, addend, divisor, baseclass: Some(baseclass), perturb, ematch: em };
            check(&node(FilterOpts::Flow(o), handle, ETH_P_ALL), None)?;
        }

        #[test]
        fn fw(classid in class(), mask in proptest::option::of(any::<u32>()), handle in 1u32..=u32::MAX) {
            // Without a class (and no actions) tc sends no options, which the kernel refuses.
            let o = FwOpts { classid: Some(classid), mask };
            check(&node(FilterOpts::Fw(o), handle, ETH_P_IP), None)?;
        }

        #[test]
        fn matchall(classid in proptest::option::of(class()), skip_hw in any::<bool>(), handle in 1u32..=u32::MAX) {
            let o = SimpleResult { classid, skip_hw };
            check(&node(FilterOpts::Matchall(o), handle, ETH_P_ALL), None)?;
        }

        #[test]
        fn basic(classid in proptest::option::of(class()), em in proptest::option::of(ematch_text()), handle in 1u32..=u32::MAX) {
            // tc refuses a tree that ends the command: without actions, a class follows it.
            let classid = if em.is_some() { classid.or(Some(Handle::new(1, 1))) } else { classid };
            let o = BasicOpts { classid, ematch: em };
            check(&node(FilterOpts::Basic(o), handle, ETH_P_IP), None)?;
        }
    }

    /// Filters as state files hold them before the filter registry (u32 hash tables were
    /// `"u32_table"`) load as they did.
    #[test]
    fn older_state_files_load() {
        let json = r#"[
            {"parent":"1:","chain":0,"prio":1,"protocol":2048,"handle":2147483648,"opts":{"kind":"u32_table","divisor":1}},
            {"parent":"1:","chain":0,"prio":1,"protocol":2048,"handle":2147485696,
             "opts":{"kind":"u32","keys":[{"val":22,"mask":65535,"off":20,"nexthdr":false}],"classid":"1:10"}},
            {"parent":"1:","prio":2,"protocol":3,"handle":1,"opts":{"kind":"flow","hash":true,"keys":3,"divisor":16,"baseclass":"1:10"}},
            {"parent":"1:","prio":3,"protocol":2048,"handle":5,"opts":{"kind":"fw","classid":"1:10","mask":255}},
            {"parent":"1:","prio":4,"protocol":3,"handle":1,"opts":{"kind":"matchall","classid":"1:10","skip_hw":true}},
            {"parent":"1:","prio":5,"protocol":2048,"handle":1,"opts":{"kind":"basic","classid":"1:10","ematch":"cmp(u8 at 9 layer 1 eq 6)"}}
        ]"#;
        let f: Vec<FilterNode> = serde_json::from_str(json).unwrap();
        assert_eq!(f[0].opts, FilterOpts::U32(U32Filter::Table(U32TableOpts { divisor: 1 })));
        let FilterOpts::U32(U32Filter::Key(k)) = &f[1].opts else { panic!("{:?}", f[1].opts) };
        assert_eq!(k.keys, vec![U32Key { val: 22, mask: 0xFFFF, off: 20, nexthdr: false }]);
        assert_eq!(k.classid, Some(Handle::new(1, 0x10)));
        assert!(matches!(&f[2].opts, FilterOpts::Flow(x) if x.hash && x.keys == 3 && x.mask == u32::MAX));
        assert_eq!(
            f[3].opts,
            FilterOpts::Fw(FwOpts { classid: Some(Handle::new(1, 0x10)), mask: Some(255) })
        );
        assert_eq!(
            f[4].opts,
            FilterOpts::Matchall(SimpleResult { classid: Some(Handle::new(1, 0x10)), skip_hw: true })
        );
        assert!(
            matches!(&f[5].opts, FilterOpts::Basic(b) if b.ematch.as_deref() == Some("cmp(u8 at 9 layer 1 eq 6)"))
        );
        // Written again, tables are `"u32"` with their divisor, and read back the same.
        let again: Vec<FilterNode> = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(again, f);
    }
}

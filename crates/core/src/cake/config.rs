//! CAKE's configuration as the kernel keeps it, and what `cake_reconfigure` derives from it:
//! the tins of each Diffserv mode (their DSCP maps, bandwidth thresholds and DRR weights), the
//! per-tin COBALT parameters and the memory limit.

use serde::{Deserialize, Serialize};

/// Flow queues per tin (`CAKE_QUEUES`).
pub const QUEUES: usize = 1024;
/// Ways of the set-associative hash (`CAKE_SET_WAYS`).
pub const SET_WAYS: usize = 8;
/// Most tins of any mode (`CAKE_MAX_TINS`).
pub const MAX_TINS: usize = 8;
/// The qdisc's packet limit (`sch->limit`, fixed by `cake_init`).
pub const SCH_LIMIT: u32 = 10240;

/// Diffserv (tin) modes, numbered as `TCA_CAKE_DIFFSERV_MODE` carries them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TinMode {
    /// Three tins: Bulk, Best Effort, Voice.
    #[default]
    Diffserv3 = 0,
    /// Four tins: Bulk, Best Effort, Video, Voice.
    Diffserv4 = 1,
    /// Eight tins.
    Diffserv8 = 2,
    /// One tin.
    Besteffort = 3,
    /// Eight tins by IP precedence (the DSCP's top three bits).
    Precedence = 4,
}

impl TinMode {
    /// Every mode, by number.
    pub const ALL: [TinMode; 5] = [
        TinMode::Diffserv3,
        TinMode::Diffserv4,
        TinMode::Diffserv8,
        TinMode::Besteffort,
        TinMode::Precedence,
    ];

    /// The keyword tc prints.
    pub fn as_str(self) -> &'static str {
        ["diffserv3", "diffserv4", "diffserv8", "besteffort", "precedence"][self as usize]
    }

    /// The mode numbered `v`, if any.
    pub fn from_u32(v: u32) -> Option<TinMode> {
        TinMode::ALL.get(v as usize).copied()
    }

    /// Number of tins.
    pub fn tins(self) -> usize {
        match self {
            TinMode::Besteffort => 1,
            TinMode::Diffserv3 => 3,
            TinMode::Diffserv4 => 4,
            TinMode::Diffserv8 | TinMode::Precedence => 8,
        }
    }

    /// The tin (internal index) of a DSCP.
    pub fn tin_of_dscp(self, dscp: u8) -> usize {
        let d = dscp & 63;
        match self {
            TinMode::Besteffort => 0,
            TinMode::Precedence => (d >> 3) as usize,
            TinMode::Diffserv3 => match d {
                1 | 8 => 1,                 // LE, CS1
                4 | 44 | 46 | 48 | 56 => 2, // TOS4, VA, EF, CS6, CS7
                _ => 0,
            },
            TinMode::Diffserv4 => match d {
                1 | 8 => 1,                                                    // LE, CS1
                32 | 40 | 44 | 46 | 48 | 56 => 3,                              // CS4, CS5, VA, EF, CS6, CS7
                4 | 16 | 18 | 20 | 22 | 24 | 26 | 28 | 30 | 34 | 36 | 38 => 2, // TOS4, CS2, AF2x-AF4x, CS3
                _ => 0,
            },
            TinMode::Diffserv8 => match d {
                1 => 0,                                // LE: background
                2 | 8 | 10 | 12 | 14 => 1,             // TOS2, CS1, AF1x: high throughput
                24 | 26 | 28 | 30 | 34 | 36 | 38 => 3, // CS3, AF3x, AF4x: video
                4 | 18 | 20 | 22 => 4,                 // TOS4, AF2x: low-latency transactions
                16 => 5,                               // CS2: interactive shell
                32 | 40 | 44 | 46 => 6,                // CS4, CS5, VA, EF: minimum latency
                48 | 56 => 7,                          // CS6, CS7: network control
                _ => 2,
            },
        }
    }

    /// Tin order for statistics and for fwmark/priority tin selection (`tin_order`).
    pub fn order(self) -> &'static [usize] {
        match self {
            TinMode::Diffserv3 => &[1, 0, 2],
            TinMode::Diffserv4 => &[1, 0, 2, 3],
            TinMode::Besteffort => &[0],
            TinMode::Diffserv8 | TinMode::Precedence => &[0, 1, 2, 3, 4, 5, 6, 7],
        }
    }
}

/// Flow isolation modes, numbered as `TCA_CAKE_FLOW_MODE` carries them: bit 0 source host,
/// bit 1 destination host, bit 2 flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowMode {
    /// One queue for everything.
    Flowblind = 0,
    /// One queue per source host.
    Srchost = 1,
    /// One queue per destination host.
    Dsthost = 2,
    /// One queue per host pair.
    Hosts = 3,
    /// One queue per flow.
    Flows = 4,
    /// Flows, fair among source hosts.
    DualSrchost = 5,
    /// Flows, fair among destination hosts.
    DualDsthost = 6,
    /// Flows, fair among source and destination hosts.
    #[default]
    TripleIsolate = 7,
}

impl FlowMode {
    /// Every mode, by number.
    pub const ALL: [FlowMode; 8] = [
        FlowMode::Flowblind,
        FlowMode::Srchost,
        FlowMode::Dsthost,
        FlowMode::Hosts,
        FlowMode::Flows,
        FlowMode::DualSrchost,
        FlowMode::DualDsthost,
        FlowMode::TripleIsolate,
    ];

    /// The keyword tc prints.
    pub fn as_str(self) -> &'static str {
        [
            "flowblind",
            "srchost",
            "dsthost",
            "hosts",
            "flows",
            "dual-srchost",
            "dual-dsthost",
            "triple-isolate",
        ][self as usize]
    }

    /// The mode numbered `v` (the kernel keeps the low six bits), if any.
    pub fn from_u32(v: u32) -> Option<FlowMode> {
        FlowMode::ALL.get(v as usize).copied()
    }

    /// Source hosts share fairly (`cake_dsrc`).
    pub fn dual_src(self) -> bool {
        self as u8 & 5 == 5
    }

    /// Destination hosts share fairly (`cake_ddst`).
    pub fn dual_dst(self) -> bool {
        self as u8 & 6 == 6
    }
}

/// Link-layer cell framing (`TCA_CAKE_ATM`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AtmMode {
    /// No cell framing.
    #[default]
    Noatm = 0,
    /// ATM: 48-byte payloads in 53-byte cells.
    Atm = 1,
    /// PTM: one byte per 64 (64b/65b coding).
    Ptm = 2,
}

impl AtmMode {
    /// The mode numbered `v`, if any.
    pub fn from_u32(v: u32) -> Option<AtmMode> {
        [AtmMode::Noatm, AtmMode::Atm, AtmMode::Ptm].get(v as usize).copied()
    }
}

/// ACK filtering (`TCA_CAKE_ACK_FILTER`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckFilter {
    /// Off.
    #[default]
    None = 0,
    /// Drop redundant pure ACKs.
    Filter = 1,
    /// Also drop a single redundant ACK right behind the new one.
    Aggressive = 2,
}

impl AckFilter {
    /// The mode numbered `v`, if any.
    pub fn from_u32(v: u32) -> Option<AckFilter> {
        [AckFilter::None, AckFilter::Filter, AckFilter::Aggressive].get(v as usize).copied()
    }
}

/// CAKE's state as the kernel keeps it after `cake_change` (defaults from `cake_init`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CakeConfig {
    /// Shaped rate, bytes/s (0: unlimited).
    pub rate: u64,
    /// Diffserv mode.
    pub tin_mode: TinMode,
    /// Isolation mode.
    pub flow_mode: FlowMode,
    /// Hash hosts on their pre-NAT addresses.
    pub nat: bool,
    /// Clear the DSCP after tin selection.
    pub wash: bool,
    /// Ingress mode: dropped packets count against the shaper.
    pub ingress: bool,
    /// Estimate the rate from arrivals.
    pub autorate: bool,
    /// ACK filter.
    pub ack_filter: AckFilter,
    /// Cell framing.
    pub atm: AtmMode,
    /// Bytes added to each packet (may be negative).
    pub overhead: i32,
    /// `CAKE_FLAG_OVERHEAD`: the overhead replaces the kernel's own header length (the network
    /// offset is removed first). Clear in `raw` mode.
    pub overhead_flag: bool,
    /// Smallest packet size charged.
    pub mpu: u32,
    /// Round-trip time the AQM is tuned for, µs.
    pub interval_us: u32,
    /// AQM target delay, µs.
    pub target_us: u32,
    /// Configured memory limit, bytes (0: derived).
    pub memlimit: u32,
    /// Segment GSO packets on enqueue.
    pub split_gso: bool,
    /// Mask applied to the firewall mark to pick a tin (0: off).
    pub fwmark: u32,
    /// The device's `psched_mtu` (MTU plus link-layer header).
    pub mtu: u32,
}

impl Default for CakeConfig {
    fn default() -> Self {
        CakeConfig {
            rate: 0,
            tin_mode: TinMode::Diffserv3,
            flow_mode: FlowMode::TripleIsolate,
            nat: false,
            wash: false,
            ingress: false,
            autorate: false,
            ack_filter: AckFilter::None,
            atm: AtmMode::Noatm,
            overhead: 0,
            overhead_flag: false,
            mpu: 0,
            interval_us: 100_000,
            target_us: 5_000,
            memlimit: 0,
            split_gso: true,
            fwmark: 0,
            mtu: 1514,
        }
    }
}

/// One tin's derived parameters (`cake_set_rate` and the mode's weights).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TinParams {
    /// Bandwidth threshold, bytes/s (0: unlimited).
    pub rate: u64,
    /// ns per byte, scaled by `2^rate_shft`.
    pub rate_ns: u64,
    /// Scale of `rate_ns`.
    pub rate_shft: u8,
    /// DRR weight among tins.
    pub tin_quantum: u16,
    /// Bytes a flow gets per round.
    pub flow_quantum: u16,
    /// COBALT target, ns.
    pub target: u64,
    /// COBALT interval, ns.
    pub interval: u64,
    /// Time to send one MTU at the tin's rate, ns.
    pub mtu_time: u64,
}

impl TinParams {
    /// `cake_set_rate`.
    fn new(rate: u64, mtu: u32, target_ns: u64, rtt_ns: u64) -> TinParams {
        const MIN_RATE: u64 = 64;
        let mut p = TinParams { rate, flow_quantum: 1514, ..TinParams::default() };
        if rate != 0 {
            p.flow_quantum = (rate >> 12).clamp(300, 1514) as u16;
            let mut shft = 34u8;
            let mut ns = (1_000_000_000u64 << shft) / rate.max(MIN_RATE);
            while ns >> 34 != 0 {
                ns >>= 1;
                shft -= 1;
            }
            p.rate_ns = ns;
            p.rate_shft = shft;
        }
        let byte_target_ns = ((mtu as u128 * p.rate_ns as u128) >> p.rate_shft) as u64;
        p.target = (byte_target_ns * 3 / 2).max(target_ns);
        p.interval = (rtt_ns + p.target - target_ns).max(p.target * 2);
        p.mtu_time = byte_target_ns;
        p
    }

    /// Time to send `len` bytes at this tin's rate, ns.
    pub fn duration(&self, len: u32) -> u64 {
        ((len as u128 * self.rate_ns as u128) >> self.rate_shft) as u64
    }
}

impl CakeConfig {
    /// Per-tin parameters for the current mode (`cake_config_*`), by internal tin index.
    pub fn tins(&self) -> Vec<TinParams> {
        let (t, i) = (self.target_us.max(1) as u64 * 1000, self.interval_us.max(1) as u64 * 1000);
        let set = |rate: u64, quantum: u16| TinParams {
            tin_quantum: quantum,
            ..TinParams::new(rate, self.mtu, t, i)
        };
        let r = self.rate;
        match self.tin_mode {
            TinMode::Besteffort => vec![set(r, 65535)],
            TinMode::Diffserv3 => vec![set(r, 1024), set(r >> 4, 64), set(r >> 2, 256)],
            TinMode::Diffserv4 => vec![set(r, 1024), set(r >> 4, 64), set(r >> 1, 512), set(r >> 2, 256)],
            TinMode::Diffserv8 | TinMode::Precedence => {
                let (mut rate, mut quantum) = (r, 256u32);
                (0..8)
                    .map(|_| {
                        let p = set(rate, quantum.max(1) as u16);
                        rate = rate.wrapping_mul(7) >> 3;
                        quantum = (quantum * 7) >> 3;
                        p
                    })
                    .collect()
            }
        }
    }

    /// The memory limit `cake_reconfigure` derives, bytes.
    pub fn buffer_limit(&self) -> u32 {
        let limit = if self.memlimit != 0 {
            self.memlimit
        } else if self.rate != 0 {
            let t = self.rate as u128 * self.interval_us as u128 / 250_000;
            u32::try_from(t).unwrap_or(u32::MAX).max(4 << 20)
        } else {
            u32::MAX
        };
        limit.min(SCH_LIMIT.saturating_mul(self.mtu).max(self.memlimit))
    }

    /// `cake_calc_overhead`: the length charged to the shaper for `len` bytes at layer 2 with
    /// `netoff` bytes of link-layer header.
    pub fn adjusted_len(&self, len: u32, netoff: u32) -> u32 {
        let len = if self.overhead_flag { len.saturating_sub(netoff) } else { len };
        let mut l = (len as i64 + self.overhead as i64).max(self.mpu as i64).max(0) as u64;
        match self.atm {
            AtmMode::Atm => l = l.div_ceil(48) * 53,
            AtmMode::Ptm => l += l.div_ceil(64),
            AtmMode::Noatm => {}
        }
        l.min(u32::MAX as u64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffserv_maps_follow_rfc_classes() {
        let ef = 46;
        assert_eq!(TinMode::Diffserv3.tin_of_dscp(ef), 2);
        assert_eq!(TinMode::Diffserv4.tin_of_dscp(ef), 3);
        assert_eq!(TinMode::Diffserv8.tin_of_dscp(ef), 6);
        assert_eq!(TinMode::Diffserv4.tin_of_dscp(8), 1); // CS1 is bulk
        assert_eq!(TinMode::Diffserv4.tin_of_dscp(34), 2); // AF41 is video
        assert_eq!(TinMode::Diffserv4.tin_of_dscp(10), 0); // AF11 is best effort
        assert_eq!(TinMode::Precedence.tin_of_dscp(46), 5);
        for m in TinMode::ALL {
            for d in 0..64 {
                assert!(m.tin_of_dscp(d) < m.tins());
            }
        }
    }

    #[test]
    fn rates_and_codel_parameters() {
        // 10 Mbit/s: 1514 bytes take 1.2112 ms; target 1.5 of that beats 5 ms? No: 1.8 ms < 5 ms.
        let c = CakeConfig { rate: 1_250_000, tin_mode: TinMode::Diffserv4, ..CakeConfig::default() };
        let t = c.tins();
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].target, 5_000_000);
        assert_eq!(t[0].interval, 100_000_000);
        assert!((t[0].mtu_time as i64 - 1_211_200).abs() < 10, "{}", t[0].mtu_time);
        assert_eq!(t[1].rate, 1_250_000 >> 4);
        // Bulk tin at 625 kbit/s: one MTU takes 19.4 ms, so the target stretches to 1.5 of it.
        assert!(t[1].target > 29_000_000 && t[1].target < 29_100_000, "{}", t[1].target);
        assert_eq!(t[1].interval, 100_000_000 + t[1].target - 5_000_000);
        assert_eq!(t[0].flow_quantum, 305); // 1250000 >> 12
        assert_eq!(t.iter().map(|p| p.tin_quantum).collect::<Vec<_>>(), [1024, 64, 512, 256]);
        // Memory: 4 x BDP at 100 ms is 500 kB, under the 4 MiB floor.
        assert_eq!(c.buffer_limit(), 4 << 20);
        assert_eq!(CakeConfig::default().buffer_limit(), 10240 * 1514);
        let big = CakeConfig { rate: 125_000_000, ..CakeConfig::default() };
        // 4 x BDP is 50 MB; sch->limit x MTU (15.5 MB) caps it.
        assert_eq!(big.buffer_limit(), 10240 * 1514);
    }

    #[test]
    fn overhead_compensation() {
        let atm =
            CakeConfig { atm: AtmMode::Atm, overhead: 48, overhead_flag: true, ..CakeConfig::default() };
        // 1514 - 14 + 48 = 1548 bytes: 33 cells.
        assert_eq!(atm.adjusted_len(1514, 14), 33 * 53);
        let ptm =
            CakeConfig { atm: AtmMode::Ptm, overhead: 30, overhead_flag: true, ..CakeConfig::default() };
        assert_eq!(ptm.adjusted_len(1514, 14), 1530 + 24);
        let eth = CakeConfig { overhead: 38, overhead_flag: true, mpu: 84, ..CakeConfig::default() };
        assert_eq!(eth.adjusted_len(60, 14), 84);
        assert_eq!(CakeConfig::default().adjusted_len(1514, 14), 1514);
    }
}

//! The spin decision of a commit wait (seed 000). MySQL 8.0 divides the
//! process's CPU usage by the CPUs of the affinity mask; under a CFS quota of
//! 1 CPU on 6 it believed it was idle and spun, burning 21% of its CPU in
//! `pause`. Here the CPU count is the quota when `cpu_quota_aware` is on, and
//! recent throttling forbids spinning outright.

use crate::config::SpinConfig;
use millrace_sys::cpu::CpuSnapshot;

/// Why a wait did or did not spin; the first reason that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpinVerdict {
    Spin,
    /// Usage below `cpu_abs_lwm_pct`: CPUs are idle, blocking is free.
    LowLoad,
    /// Usage per available CPU at or above `cpu_pct_hwm`.
    NoHeadroom,
    /// The cgroup throttled us since the last refresh (aware only).
    Throttled,
    /// Flushes take longer than a spin could usefully last.
    SlowFlush,
}

/// The CPUs the process may use, as the spin decision counts them.
pub fn available_cpus(cpu: &CpuSnapshot, aware: bool) -> f64 {
    let affinity = cpu.affinity_cpus.max(1) as f64;
    match (aware, cpu.quota_cpus) {
        (true, Some(q)) if q > 0.0 => q.min(affinity),
        _ => affinity,
    }
}

pub fn decide(cpu: &CpuSnapshot, cfg: &SpinConfig, flush_avg_us: u64) -> SpinVerdict {
    if flush_avg_us > cfg.flush_hwm_us {
        return SpinVerdict::SlowFlush;
    }
    if cfg.cpu_quota_aware && cpu.throttled_recently {
        return SpinVerdict::Throttled;
    }
    let usage_pct = cpu.usage_cpus * 100.0;
    if usage_pct < cfg.cpu_abs_lwm_pct {
        return SpinVerdict::LowLoad;
    }
    if usage_pct / available_cpus(cpu, cfg.cpu_quota_aware) >= cfg.cpu_pct_hwm {
        return SpinVerdict::NoHeadroom;
    }
    SpinVerdict::Spin
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_sys::cpu::CgroupVersion;

    fn snap(affinity: u32, quota: Option<f64>, usage: f64, throttled: bool) -> CpuSnapshot {
        let effective = match quota {
            Some(q) => (q.ceil() as u32).clamp(1, affinity),
            None => affinity,
        };
        CpuSnapshot {
            affinity_cpus: affinity,
            quota_cpus: quota,
            effective_cpus: effective,
            cgroup_version: CgroupVersion::V1,
            nr_throttled: 0,
            throttled_recently: throttled,
            usage_cpus: usage,
        }
    }

    fn cfg(aware: bool) -> SpinConfig {
        SpinConfig {
            cpu_quota_aware: aware,
            ..SpinConfig::default()
        }
    }

    /// Seed 000: 6 CPUs in the mask, a 1-CPU quota, the process at 98.5%.
    #[test]
    fn seed_000_unaware_spins_aware_does_not() {
        let s = snap(6, Some(1.0), 0.985, false);
        assert_eq!(decide(&s, &cfg(false), 100), SpinVerdict::Spin);
        assert_eq!(decide(&s, &cfg(true), 100), SpinVerdict::NoHeadroom);
    }

    /// This machine's reproduction: 2 CPUs, a 0.9-CPU quota, usage at the quota.
    #[test]
    fn two_cpus_quota_0_9() {
        let s = snap(2, Some(0.9), 0.9, false);
        assert_eq!(decide(&s, &cfg(false), 150), SpinVerdict::Spin);
        assert_eq!(decide(&s, &cfg(true), 150), SpinVerdict::NoHeadroom);
    }

    #[test]
    fn headroom_without_quota_spins_in_both_modes() {
        let s = snap(8, None, 1.5, false);
        assert_eq!(decide(&s, &cfg(false), 100), SpinVerdict::Spin);
        assert_eq!(decide(&s, &cfg(true), 100), SpinVerdict::Spin);
        // A generous quota leaves headroom too.
        let s = snap(8, Some(6.0), 1.5, false);
        assert_eq!(decide(&s, &cfg(true), 100), SpinVerdict::Spin);
    }

    #[test]
    fn low_load_busy_cpus_throttling_and_slow_flushes_block() {
        assert_eq!(
            decide(&snap(8, None, 0.2, false), &cfg(true), 100),
            SpinVerdict::LowLoad
        );
        assert_eq!(
            decide(&snap(2, None, 1.9, false), &cfg(true), 100),
            SpinVerdict::NoHeadroom
        );
        let throttled = snap(8, Some(4.0), 1.5, true);
        assert_eq!(decide(&throttled, &cfg(true), 100), SpinVerdict::Throttled);
        assert_eq!(decide(&throttled, &cfg(false), 100), SpinVerdict::Spin);
        assert_eq!(
            decide(&snap(8, None, 1.5, false), &cfg(true), 5_000),
            SpinVerdict::SlowFlush
        );
    }

    #[test]
    fn available_cpus_never_exceeds_affinity() {
        assert_eq!(available_cpus(&snap(2, Some(8.0), 1.0, false), true), 2.0);
        assert_eq!(available_cpus(&snap(2, Some(0.5), 1.0, false), true), 0.5);
        assert_eq!(available_cpus(&snap(2, Some(0.5), 1.0, false), false), 2.0);
    }
}

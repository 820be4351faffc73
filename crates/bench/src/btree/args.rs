//! The flags of `bench btree` and the operation mix (`--mix`).

use crate::output::RunOutput;
use crate::store::StoreArgs;
use clap::Args;
use millrace_sys::rng::SplitMix64;
use std::fmt;
use std::str::FromStr;

#[derive(Args, Debug)]
pub struct BtreeArgs {
    /// Rows loaded before the run (ids 1..=rows, k random in 1..=rows).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) rows: u64,
    /// Threads running the operation mix.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) threads: u32,
    /// Length of the run in seconds, the 0.5 s warm-up included (the baseline
    /// runs as long again).
    #[arg(long, default_value_t = 10.0)]
    pub(super) seconds: f64,
    /// Size of the buffer pool, MiB.
    #[arg(long, default_value_t = 64)]
    pub(super) buffer_pool_mb: u64,
    /// Page size in bytes: 4096, 8192, 16384 or 32768.
    #[arg(long, default_value_t = 16384)]
    pub(super) page_size: usize,
    /// flush_log_at_trx_commit for the run: 0 waits for nothing, 1 for the
    /// flush, 2 for the write. The load always runs at 0.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub(super) level: u8,
    #[command(flatten)]
    pub(super) store: StoreArgs,
    /// Relative weights of the operations; one not named has weight 0.
    #[arg(long, default_value = "update_index=1,insert=1,point_select=1", value_parser = parse_mix)]
    pub(super) mix: Mix,
    /// Skip the BTreeMap baseline.
    #[arg(long)]
    pub(super) no_baseline: bool,
    #[command(flatten)]
    pub(super) out: RunOutput,
}

pub(super) fn parse_mix(s: &str) -> Result<Mix, String> {
    s.parse()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    UpdateIndex = 0,
    Insert = 1,
    PointSelect = 2,
}

impl Op {
    pub(super) const ALL: [Op; 3] = [Op::UpdateIndex, Op::Insert, Op::PointSelect];

    pub(super) fn name(self) -> &'static str {
        match self {
            Op::UpdateIndex => "update_index",
            Op::Insert => "insert",
            Op::PointSelect => "point_select",
        }
    }
}

/// Relative weights of the operations, in the order of `Op::ALL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    pub(super) weights: [u32; 3],
}

impl Mix {
    pub(super) fn total(&self) -> u64 {
        self.weights.iter().map(|&w| u64::from(w)).sum()
    }

    pub(super) fn pick(&self, rng: &mut SplitMix64) -> Op {
        let mut x = rng.below(self.total());
        for (op, &w) in Op::ALL.iter().zip(&self.weights) {
            if x < u64::from(w) {
                return *op;
            }
            x -= u64::from(w);
        }
        unreachable!("x is below the sum of the weights")
    }
}

impl FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut weights = [None; 3];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("mix entry {part:?} is not name=weight"))?;
            let op = Op::ALL
                .iter()
                .find(|op| op.name() == name.trim())
                .ok_or_else(|| {
                    format!("mix: unknown operation {name:?} (update_index, insert, point_select)")
                })?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|e| format!("mix: weight of {name}: {e}"))?;
            if weights[*op as usize].replace(weight).is_some() {
                return Err(format!("mix: {name} is given twice"));
            }
        }
        let mix = Mix {
            weights: weights.map(|w| w.unwrap_or(0)),
        };
        if mix.total() == 0 {
            return Err("mix: at least one weight must be positive".into());
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = Op::ALL
            .iter()
            .zip(&self.weights)
            .map(|(op, w)| format!("{}={w}", op.name()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_parses_and_prints() {
        let mix: Mix = "update_index=2, point_select=1".parse().unwrap();
        assert_eq!(mix.weights, [2, 0, 1]);
        assert_eq!(mix.to_string(), "update_index=2,insert=0,point_select=1");
        assert!("insert=0".parse::<Mix>().is_err());
        assert!("insert=1,insert=2".parse::<Mix>().is_err());
        assert!("delete=1".parse::<Mix>().is_err());
        assert!("insert".parse::<Mix>().is_err());
    }

    #[test]
    fn mix_picks_only_weighted_operations() {
        let mix: Mix = "insert=1,point_select=3".parse().unwrap();
        let mut rng = SplitMix64::new(1);
        let mut seen = [0u64; 3];
        for _ in 0..4000 {
            seen[mix.pick(&mut rng) as usize] += 1;
        }
        assert_eq!(seen[Op::UpdateIndex as usize], 0);
        assert!(seen[Op::PointSelect as usize] > 2 * seen[Op::Insert as usize]);
    }
}

//! The integrity check of one index: every page reachable from the root is
//! read (the buffer pool verifies its checksum), validated as a node (record
//! bounds, key order, free-space accounting), checked to lie within the key
//! range its parent gives it and one level below its parent, and the
//! sibling links of every level are checked to chain the level's pages in
//! key order, both ways.

use crate::node;
use crate::tree::{Error, Index, Result};
use millrace_buf::{page_type, LatchMode, PageId, PageStore};
use std::collections::HashSet;

/// A page to visit and the key range [low, high) its parent gives it.
type Visit = (u32, Option<Vec<u8>>, Option<Vec<u8>>);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub pages: u64,
    pub leaf_pages: u64,
    pub records: u64,
    pub deleted_records: u64,
    pub levels: u16,
    /// Bytes used by records (with slots) over bytes of all pages.
    pub fill_pct: u64,
}

fn corrupt(msg: String) -> Error {
    Error::Corrupt(msg)
}

impl Index {
    /// Checks the whole index. Run it while no structure change can happen
    /// (it takes the index latch X for the duration).
    pub fn check(&self, store: &PageStore) -> Result<CheckReport> {
        let _g = {
            self.lock_for_check();
            CheckGuard(self)
        };
        let def = self.def();
        let ps = store.pool().page_size();
        let mut report = CheckReport::default();
        let mut seen = HashSet::new();
        // One level at a time: (page, low bound, high bound), left to right.
        let mut level_pages: Vec<Visit> = vec![(def.root, None, None)];
        let mut expected_level: Option<u16> = None;
        let mut used = 0u64;
        while !level_pages.is_empty() {
            let mut next_level = Vec::new();
            let mut prev: Option<u32> = None;
            for (i, (no, low, high)) in level_pages.iter().enumerate() {
                if !seen.insert(*no) {
                    return Err(corrupt(format!("page {no} is reached twice")));
                }
                let mut mtr = store.mtr()?;
                let r = mtr.get(PageId::new(def.space, *no), LatchMode::Shared)?;
                let page = mtr.page(r);
                if millrace_buf::page::page_type_of(page) != page_type::INDEX {
                    return Err(corrupt(format!("page {no} is not an index page")));
                }
                node::validate(page).map_err(|e| corrupt(format!("page {no}: {e}")))?;
                let h = node::header(page);
                if h.index_id != def.id {
                    return Err(corrupt(format!(
                        "page {no} belongs to index {}",
                        h.index_id
                    )));
                }
                match expected_level {
                    None => {
                        expected_level = Some(h.level);
                        report.levels = h.level + 1;
                    }
                    Some(l) if l != h.level => {
                        return Err(corrupt(format!(
                            "page {no} is at level {}, expected {l}",
                            h.level
                        )));
                    }
                    _ => {}
                }
                if h.left != prev.unwrap_or(node::NONE) {
                    return Err(corrupt(format!(
                        "page {no}: left link {} should be {:?}",
                        h.left, prev
                    )));
                }
                let right_expected = level_pages.get(i + 1).map_or(node::NONE, |x| x.0);
                if h.right != right_expected {
                    return Err(corrupt(format!(
                        "page {no}: right link {} should be {right_expected}",
                        h.right
                    )));
                }
                let n = h.n_recs as usize;
                if n == 0 && *no != def.root {
                    return Err(corrupt(format!("non-root page {no} is empty")));
                }
                // Keys within the parent's bounds (slot 0 of an internal
                // page is minus infinity and has no key to check).
                for s in 0..n {
                    if h.level > 0 && s == 0 {
                        continue;
                    }
                    let k = node::rec(page, s).key;
                    if low.as_deref().is_some_and(|l| k < l)
                        || high.as_deref().is_some_and(|hi| k >= hi)
                    {
                        return Err(corrupt(format!(
                            "page {no} slot {s}: key outside its parent's range"
                        )));
                    }
                }
                used += node::used_bytes(page) as u64;
                report.pages += 1;
                if h.level == 0 {
                    report.leaf_pages += 1;
                    report.records += n as u64;
                    report.deleted_records +=
                        (0..n).filter(|&s| node::rec(page, s).deleted).count() as u64;
                } else {
                    for s in 0..n {
                        let lo = if s == 0 {
                            low.clone()
                        } else {
                            Some(node::rec(page, s).key.to_vec())
                        };
                        let hi = if s + 1 < n {
                            Some(node::rec(page, s + 1).key.to_vec())
                        } else {
                            high.clone()
                        };
                        next_level.push((node::child(page, s), lo, hi));
                    }
                }
                prev = Some(*no);
            }
            expected_level = expected_level.and_then(|l| l.checked_sub(1));
            if expected_level.is_none() && !next_level.is_empty() {
                return Err(corrupt("a leaf level has children".into()));
            }
            level_pages = next_level;
        }
        report.fill_pct = used * 100 / (report.pages * ps as u64).max(1);
        Ok(report)
    }
}

struct CheckGuard<'a>(&'a Index);
impl Drop for CheckGuard<'_> {
    fn drop(&mut self) {
        self.0.unlock_for_check();
    }
}

/// What `check_store` found in one tablespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceReport {
    pub space: u32,
    /// Pages read and checksum-verified (all of them, index or not).
    pub pages: u32,
    pub free_pages: u32,
    /// (index id, root page, what the index check found).
    pub indexes: Vec<(u64, u32, CheckReport)>,
}

/// Checks a whole store: every page of every tablespace is read (which
/// verifies its checksum and ids), and every registered index is checked.
/// Returns the first problem as an error.
pub fn check_store(store: &PageStore) -> Result<Vec<SpaceReport>> {
    // The spaces whose files exist, not every id below the counter: a
    // damaged counter (or size, below) must not make the check run for ever.
    // A file at or past the counter is left from a crash before its space's
    // creation was logged; it holds nothing yet.
    let (limit, spaces) = {
        let mut mtr = store.mtr()?;
        let limit = millrace_buf::space::space_id_limit(&mut mtr)?;
        (limit, millrace_buf::space::existing_spaces(&mtr)?)
    };
    let page_size = store.pool().page_size() as u64;
    let mut out = Vec::new();
    for space_id in spaces.into_iter().filter(|&id| id < limit) {
        let (size, free, indexes) = {
            let mut mtr = store.mtr()?;
            let (size, free) = millrace_buf::space::space_size(&mut mtr, space_id)?;
            (
                size,
                free,
                millrace_buf::space::indexes(&mut mtr, space_id)?,
            )
        };
        // Pages past the file's end read as fresh zeros: nothing to verify.
        let file_pages = store.space_file_bytes(space_id)? / page_size;
        for page_no in 0..(size as u64).min(file_pages) as u32 {
            let mut mtr = store.mtr()?;
            mtr.get(PageId::new(space_id, page_no), LatchMode::Shared)?;
        }
        let mut reports = Vec::new();
        for (id, root) in indexes {
            let sys = {
                let mut mtr = store.mtr()?;
                let r = mtr.get_checked(
                    PageId::new(space_id, root),
                    LatchMode::Shared,
                    node::validate,
                )?;
                node::header(mtr.page(r)).sys_fields
            };
            let idx = Index::open(crate::tree::IndexDef {
                space: space_id,
                root,
                id,
                sys_fields: sys,
            });
            let rep = idx
                .check(store)
                .map_err(|e| corrupt(format!("space {space_id} index {id}: {e}")))?;
            reports.push((id, root, rep));
        }
        out.push(SpaceReport {
            space: space_id,
            pages: size,
            free_pages: free,
            indexes: reports,
        });
    }
    Ok(out)
}

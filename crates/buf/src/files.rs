//! Tablespace files and the doublewrite file. A tablespace is one file of
//! pages; its name follows from its id, so recovery finds every file a redo
//! record names without a directory: `spaces/<id>.mrs`.

use crate::error::Error;
use crate::page::{self, PageId};
use millrace_io::{AlignedBuf, Storage, StorageFile};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The directory of the tablespace files.
const SPACES_DIR: &str = "spaces";

pub fn space_file_name(space: u32) -> String {
    format!("{SPACES_DIR}/{space:010}.mrs")
}

pub const DOUBLEWRITE_FILE: &str = "doublewrite.mrd";

pub struct SpaceFiles {
    storage: Arc<dyn Storage>,
    page_size: usize,
    open: Mutex<HashMap<u32, Arc<dyn StorageFile>>>,
}

impl SpaceFiles {
    pub fn new(storage: Arc<dyn Storage>, page_size: usize) -> Self {
        Self {
            storage,
            page_size,
            open: Mutex::new(HashMap::new()),
        }
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Ids of the spaces whose files exist, ascending.
    pub fn space_ids(&self) -> Result<Vec<u32>, Error> {
        let names = self
            .storage
            .list(SPACES_DIR)
            .map_err(|e| Error::Io(format!("listing {SPACES_DIR}: {e}")))?;
        let mut ids: Vec<u32> = names
            .iter()
            .filter_map(|n| {
                let id: u32 = n.strip_suffix(".mrs")?.parse().ok()?;
                // Only the canonical spelling names a space's file.
                (space_file_name(id) == format!("{SPACES_DIR}/{n}")).then_some(id)
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    pub fn exists(&self, space: u32) -> bool {
        self.open.lock().expect("poisoned").contains_key(&space)
            || self.storage.exists(&space_file_name(space))
    }

    /// The space's file; `create` makes it if missing (durably named).
    pub fn file(&self, space: u32, create: bool) -> Result<Arc<dyn StorageFile>, Error> {
        let mut open = self.open.lock().expect("poisoned");
        if let Some(f) = open.get(&space) {
            return Ok(f.clone());
        }
        let name = space_file_name(space);
        if !create && !self.storage.exists(&name) {
            return Err(Error::Corrupt(format!(
                "tablespace {space} ({name}) is missing"
            )));
        }
        let f = self
            .storage
            .open(&name, create)
            .map_err(|e| Error::Io(format!("opening {name}: {e}")))?;
        open.insert(space, f.clone());
        Ok(f)
    }

    /// Reads a page; a page past the end of the file is fresh (zeros).
    pub fn read_page(&self, id: PageId, buf: &mut [u8]) -> Result<(), Error> {
        let f = self.file(id.space, false)?;
        match f.read_exact_at(buf, id.page as u64 * self.page_size as u64) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                buf.fill(0);
                Ok(())
            }
            Err(e) => Err(Error::Io(format!("reading page {id}: {e}"))),
        }
    }

    pub fn write_page(&self, id: PageId, buf: &[u8]) -> Result<(), Error> {
        let f = self.file(id.space, false)?;
        f.write_all_at(buf, id.page as u64 * self.page_size as u64)
            .map_err(|e| Error::Io(format!("writing page {id}: {e}")))
    }

    pub fn sync(&self, space: u32) -> Result<(), Error> {
        self.file(space, false)?
            .sync_data()
            .map_err(|e| Error::Io(format!("flushing tablespace {space}: {e}")))
    }
}

/// The doublewrite area: a batch of page copies is written here and made
/// durable before any of them is written in place, so a page torn by a
/// crash mid-write is restored from its copy before redo is applied.
pub struct Doublewrite {
    file: Arc<dyn StorageFile>,
    page_size: usize,
    slots: usize,
}

impl Doublewrite {
    pub fn open(storage: &dyn Storage, page_size: usize, slots: usize) -> Result<Self, Error> {
        let file = storage
            .open(DOUBLEWRITE_FILE, true)
            .map_err(|e| Error::Io(format!("opening the doublewrite file: {e}")))?;
        Ok(Self {
            file,
            page_size,
            slots,
        })
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Writes the sealed page images (at most `slots`) and syncs.
    pub fn write(&self, images: &[u8]) -> Result<(), Error> {
        debug_assert!(images.len() <= self.slots * self.page_size);
        debug_assert_eq!(images.len() % self.page_size, 0);
        self.file
            .write_all_at(images, 0)
            .and_then(|_| self.file.sync_data())
            .map_err(|e| Error::Io(format!("writing the doublewrite area: {e}")))
    }

    /// Restores every page whose in-place copy is torn from a valid copy in
    /// the doublewrite area. Returns how many were restored.
    pub fn restore(&self, files: &SpaceFiles) -> Result<usize, Error> {
        let len = self
            .file
            .len()
            .map_err(|e| Error::Io(format!("doublewrite: {e}")))? as usize;
        let n = (len / self.page_size).min(self.slots);
        let mut copy = AlignedBuf::zeroed(self.page_size, self.page_size.min(4096));
        let mut real = AlignedBuf::zeroed(self.page_size, self.page_size.min(4096));
        let mut restored = 0;
        for slot in 0..n {
            self.file
                .read_exact_at(&mut copy, (slot * self.page_size) as u64)
                .map_err(|e| Error::Io(format!("doublewrite: {e}")))?;
            if copy.iter().all(|&b| b == 0) {
                continue;
            }
            let id = PageId::new(
                page::u32_at(&copy, page::OFF_SPACE),
                page::u32_at(&copy, page::OFF_PAGE_NO),
            );
            // A torn copy means the batch never reached the in-place writes.
            if page::verify(&copy, id).is_err() || !files.exists(id.space) {
                continue;
            }
            files.read_page(id, &mut real)?;
            if page::verify(&real, id).is_err() {
                tracing::warn!(page = %id, "restoring a torn page from the doublewrite area");
                files.write_page(id, &copy)?;
                files.sync(id.space)?;
                restored += 1;
            }
        }
        Ok(restored)
    }
}

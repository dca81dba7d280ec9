//! One thread's `wgmma` products: those issued and not yet committed, the committed groups not yet
//! retired (oldest first), and the accumulator sets they write. A set is one accumulator array
//! that products chain on; while any of its products is in flight the kernel holds markers
//! ([`super::accumulators`]) and the true values stay here, updated as the products retire.

use std::collections::{HashMap, VecDeque};

use super::accumulators::MAX_SETS;
use crate::sim::wgmma::product::Mma;

/// One issued product and the set it writes.
pub(crate) struct Product {
    pub(crate) mma: Mma,
    pub(crate) set: u32,
}

/// The true values of one accumulator set and its products in flight.
struct Set {
    values: Vec<f32>,
    in_flight: u32,
}

/// One thread's products (see the module documentation).
#[derive(Default)]
pub(crate) struct ThreadProducts {
    open: Vec<Product>,
    groups: VecDeque<Vec<Product>>,
    /// Groups committed since the launch began.
    pub(crate) committed: u32,
    /// Groups retired since the launch began.
    pub(crate) retired: u32,
    sets: HashMap<u32, Set>,
    /// Whether a `wgmma.fence` came since the thread's accumulators were last handed back.
    pub(crate) fenced: bool,
}

impl ThreadProducts {
    /// A new set holding `values`; `None` if [`MAX_SETS`] are in flight.
    pub(crate) fn new_set(&mut self, values: &[f32]) -> Option<u32> {
        let set = (0..MAX_SETS).find(|s| !self.sets.contains_key(s))?;
        self.sets.insert(
            set,
            Set {
                values: values.to_vec(),
                in_flight: 0,
            },
        );
        Some(set)
    }

    /// Whether `set` is one of this thread's sets.
    pub(crate) fn has_set(&self, set: u32) -> bool {
        self.sets.contains_key(&set)
    }

    /// Issues a product (uncommitted until [`ThreadProducts::commit`]).
    pub(crate) fn issue(&mut self, product: Product) {
        if let Some(s) = self.sets.get_mut(&product.set) {
            s.in_flight += 1;
        }
        self.open.push(product);
    }

    /// Whether products were issued and not committed.
    pub(crate) fn uncommitted(&self) -> usize {
        self.open.len()
    }

    /// Committed groups not yet retired.
    pub(crate) fn in_flight(&self) -> usize {
        self.groups.len()
    }

    /// `commit_group`: the open products become a group (possibly empty).
    pub(crate) fn commit(&mut self) {
        self.groups.push_back(std::mem::take(&mut self.open));
        self.committed += 1;
    }

    /// `wait_group keep`: takes the products of the oldest groups until at most `keep` remain.
    pub(crate) fn retire(&mut self, keep: usize) -> Vec<Product> {
        let mut done = Vec::new();
        while self.groups.len() > keep {
            done.extend(self.groups.pop_front().into_iter().flatten());
            self.retired += 1;
        }
        done
    }

    /// Takes `set`'s true values out, to apply a product to them.
    pub(crate) fn take_values(&mut self, set: u32) -> Vec<f32> {
        self.sets
            .get_mut(&set)
            .map(|s| std::mem::take(&mut s.values))
            .unwrap_or_default()
    }

    /// Puts `set`'s values back after one of its products was applied to them.
    pub(crate) fn applied(&mut self, set: u32, values: Vec<f32>) {
        if let Some(s) = self.sets.get_mut(&set) {
            s.values = values;
            s.in_flight = s.in_flight.saturating_sub(1);
        }
    }

    /// `set`'s values, and the set forgotten, if none of its products is in flight.
    pub(crate) fn settle(&mut self, set: u32) -> Option<Vec<f32>> {
        match self.sets.get(&set) {
            Some(s) if s.in_flight == 0 => self.sets.remove(&set).map(|s| s.values),
            _ => None,
        }
    }
}

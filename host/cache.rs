//! Per-handle caches: one slot per type, so that each module keeps its own cache type in its own
//! files (pinned memory's staging buffers, the tensor maps of `crate::tensor_map`, softmax's
//! grid-row workspace) and a new cache touches only its module.
//!
//! A [`Caches`] lives in each stream handle of a device ([`crate::Gpu::stream`] makes a fresh,
//! empty one): work queued on one stream never waits on another stream's cache, and the
//! launches that share a cached device buffer all run on the one stream, one after another.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// One slot per cache type, each made (with `Default`) the first time it is asked for.
#[derive(Default)]
pub(crate) struct Caches {
    slots: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Caches {
    /// The slot of cache type `T`, made empty (`T::default()`) on first use. Lock it for as long
    /// as the cached value is used: the handle's other callers of the same family wait meanwhile.
    pub(crate) fn get<T: Default + Send + 'static>(&self) -> Arc<Mutex<T>> {
        // A panic while the map was locked left it whole: a slot is inserted in one step.
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = slots
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(Mutex::new(T::default())));
        match slot.clone().downcast::<Mutex<T>>() {
            Ok(cache) => cache,
            // Unreachable (the slot of `T`'s id holds a `Mutex<T>`); a fresh slot is still right.
            Err(_) => {
                let cache = Arc::new(Mutex::new(T::default()));
                *slot = cache.clone();
                cache
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counter(u32);

    #[derive(Default)]
    struct Other(u32);

    /// Each type gets its own slot, kept between calls.
    #[test]
    fn one_slot_per_type() {
        let caches = Caches::default();
        caches.get::<Counter>().lock().unwrap().0 += 2;
        caches.get::<Counter>().lock().unwrap().0 += 1;
        caches.get::<Other>().lock().unwrap().0 += 10;
        assert_eq!(caches.get::<Counter>().lock().unwrap().0, 3);
        assert_eq!(caches.get::<Other>().lock().unwrap().0, 10);
    }
}

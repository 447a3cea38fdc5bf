//! The process's renderers, by name: one `ProducerFactory` each, shared by every session that
//! uses it (as mediasoup's Worker holds the routers of a process). A session names its renderer
//! (`renderer(name)`) and faces are prepared for a named renderer, so something that must be
//! one per process (a GPU batcher serving every session's frames, a renderer that draws in the
//! viewer's browser) has a place to live, and the render loop still names no type of any of them.
//!
//! "cpu" (the mesh-warp renderer, `cpu::CpuFactory`) is always there. Another renderer is added
//! at start-up with `register(name, factory)` (say, a neural renderer once its weights are
//! loaded); registering a name again replaces it for sessions started afterwards (running ones
//! keep the factory they started with).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use super::cpu::CpuFactory;
use super::{ProducerError, ProducerFactory};

/// The renderer a session gets when it names none.
pub const DEFAULT_RENDERER: &str = "cpu";

fn registry() -> &'static RwLock<BTreeMap<String, Arc<dyn ProducerFactory>>> {
    static REGISTRY: OnceLock<RwLock<BTreeMap<String, Arc<dyn ProducerFactory>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut renderers: BTreeMap<String, Arc<dyn ProducerFactory>> = BTreeMap::new();
        renderers.insert(DEFAULT_RENDERER.to_string(), Arc::new(CpuFactory));
        RwLock::new(renderers)
    })
}

/// The renderer named `name`; `Unsupported` naming the ones there are when there is none.
pub fn renderer(name: &str) -> Result<Arc<dyn ProducerFactory>, ProducerError> {
    let renderers = registry().read().unwrap_or_else(|e| e.into_inner());
    renderers.get(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = renderers.keys().map(String::as_str).collect();
        ProducerError::Unsupported(format!(
            "no renderer named '{name}' (this process has: {})",
            known.join(", ")
        ))
    })
}

/// Adds (or replaces) the renderer `name` for the sessions started from now on.
pub fn register(name: &str, factory: Arc<dyn ProducerFactory>) {
    let mut renderers = registry().write().unwrap_or_else(|e| e.into_inner());
    renderers.insert(name.to_string(), factory);
}

/// The names of the renderers this process has, sorted.
pub fn names() -> Vec<String> {
    let renderers = registry().read().unwrap_or_else(|e| e.into_inner());
    renderers.keys().cloned().collect()
}

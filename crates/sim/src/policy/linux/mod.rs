//! The baseline: no coloring. Every page may go anywhere; the allocator decides.
use super::{Placement, Policy, ProcessInfo};
use crate::memory::ColorSet;

#[derive(Debug, Clone)]
pub struct Linux {
    all: ColorSet,
}

impl Linux {
    pub fn new(colors: u64) -> Self {
        Linux {
            all: ColorSet::all(colors),
        }
    }
}

impl Policy for Linux {
    fn name(&self) -> &'static str {
        "linux"
    }
    fn process_created(&mut self, _p: &ProcessInfo) -> Placement {
        Placement::default()
    }
    fn allowed_colors(&mut self, _pid: usize, _vpn: u64) -> &ColorSet {
        &self.all
    }
}

//! Internal faults: built where an error happens, given a node path while unwinding,
//! and turned into an [`InterpError`] at the end.

use super::error::{InterpError, Invocation, MemorySpace, RaceKind, Site};
use super::exec::Ctx;
use super::track::Conflict;
use crate::eval::EvalError;
use crate::kernel::*;

/// One segment of a node path, pushed innermost first while an error unwinds.
#[derive(Clone, Copy, Debug)]
pub(super) enum Seg {
    Name(&'static str),
    Indexed(&'static str, usize),
}

#[derive(Debug)]
pub(super) enum FaultKind {
    Eval {
        inv: u32,
        source: EvalError,
    },
    OutOfBounds {
        inv: u32,
        mem: Memory,
        index: u64,
        lanes: u8,
        len: u64,
    },
    Unaligned {
        inv: u32,
        mem: Memory,
        index: u64,
        lanes: u8,
    },
    Uninit {
        inv: u32,
        mem: Memory,
        index: u64,
    },
    Race {
        /// The invocation whose access found the conflict.
        inv: u32,
        mem: Memory,
        index: u64,
        kind: RaceKind,
        /// Epoch and local index of the earlier access.
        first_epoch: u64,
        first_local: u32,
    },
    Divergent {
        arrived: usize,
        missing: u32,
    },
    UnsetLocal {
        inv: u32,
        local: LocalId,
    },
    DivergentFragment {
        arrived: usize,
    },
    FragmentOperandDiffers {
        inv: u32,
        operand: &'static str,
        expected: String,
        found: String,
    },
    UnsetFragment {
        inv: u32,
        fragment: crate::fragment::FragmentId,
    },
    MisalignedFragment {
        inv: u32,
        fragment: crate::fragment::FragmentId,
        index: u32,
        stride: u32,
    },
    FragmentSourceChanged {
        inv: u32,
        fragment: crate::fragment::FragmentId,
    },
    AsyncCopy {
        inv: u32,
        shared: SharedId,
        index: u64,
        what: String,
    },
    SharedReuse {
        inv: u32,
        shared: SharedId,
        previous: SharedId,
    },
    Malformed {
        inv: u32,
        what: String,
    },
}

#[derive(Debug)]
pub(super) struct Fault {
    pub(super) kind: FaultKind,
    pub(super) segs: Vec<Seg>,
}

pub(super) type Res<T> = Result<T, Box<Fault>>;

pub(super) fn fault(kind: FaultKind) -> Box<Fault> {
    Box::new(Fault {
        kind,
        segs: Vec::new(),
    })
}

pub(super) fn malformed(inv: u32, what: impl Into<String>) -> Box<Fault> {
    fault(FaultKind::Malformed {
        inv,
        what: what.into(),
    })
}

pub(super) trait At {
    fn at(self, seg: Seg) -> Self;
}

impl<T> At for Res<T> {
    #[inline]
    fn at(self, seg: Seg) -> Self {
        self.map_err(|mut f| {
            f.segs.push(seg);
            f
        })
    }
}

use Seg::{Indexed, Name};

/// The path segment a statement adds (as in the validator).
pub(super) fn stmt_seg(s: &Stmt) -> Option<Seg> {
    Some(Name(match s {
        Stmt::Let { .. } => "let",
        Stmt::Assign { .. } => "assign",
        Stmt::Store { .. } => "store",
        Stmt::If { .. } => "if",
        Stmt::For { .. } => "for",
        Stmt::Fragment(op) => op.name(),
        Stmt::AsyncCopy(op) => op.name(),
        Stmt::Return | Stmt::Barrier => return None,
    }))
}

/// The path segment an expression node adds (as in the validator).
pub(super) fn expr_seg(e: &Expr) -> Option<Seg> {
    Some(Name(match e {
        Expr::Lit(_) | Expr::Local(_) | Expr::Param(_) | Expr::Builtin { .. } => return None,
        Expr::Load { .. } => "load",
        Expr::Unary { .. } => "unary",
        Expr::Binary { .. } => "binary",
        Expr::Cmp { .. } => "cmp",
        Expr::Math { func, .. } => func.name(),
        Expr::Select { .. } => "select",
        Expr::Cast { .. } => "cast",
        Expr::Bitcast { .. } => "bitcast",
        Expr::Vector(_) => "vector",
        Expr::Splat { .. } => "splat",
        Expr::Extract { .. } => "extract",
    }))
}

impl Ctx<'_, '_> {
    pub(super) fn local_id(&self, inv: u32) -> [u32; 3] {
        self.local_ids.get(inv as usize).copied().unwrap_or([0; 3])
    }

    /// The workgroup id that ran `epoch`.
    fn workgroup_of_epoch(&self, epoch: u64) -> [u32; 3] {
        let linear = self
            .wg_starts
            .partition_point(|&s| s <= epoch)
            .saturating_sub(1) as u64;
        let (gx, gy) = (self.grid[0].max(1) as u64, self.grid[1].max(1) as u64);
        [
            (linear % gx) as u32,
            ((linear / gx) % gy) as u32,
            (linear / (gx * gy)) as u32,
        ]
    }

    fn space_and_name(&self, mem: Memory) -> (MemorySpace, String) {
        let space = match mem {
            Memory::Buffer(_) => MemorySpace::Buffer,
            Memory::Shared(_) => MemorySpace::Shared,
        };
        (space, self.kernel.memory_name(mem))
    }

    pub(super) fn to_error(&self, fault: Fault) -> InterpError {
        let mut path = String::from("kernel");
        for seg in fault.segs.iter().rev() {
            match seg {
                Name(n) => {
                    path.push('.');
                    path.push_str(n);
                }
                Indexed(n, i) => {
                    path.push('.');
                    path.push_str(n);
                    path.push_str(&format!("[{i}]"));
                }
            }
        }
        let site = |inv: Option<u32>| Site {
            kernel: self.kernel.name.clone(),
            path: path.clone(),
            workgroup: self.wg_id,
            invocation: inv.map(|i| self.local_id(i)),
        };
        match fault.kind {
            FaultKind::Eval { inv, source } => InterpError::Eval {
                site: site(Some(inv)),
                source,
            },
            FaultKind::OutOfBounds {
                inv,
                mem,
                index,
                lanes,
                len,
            } => {
                let (space, memory) = self.space_and_name(mem);
                InterpError::OutOfBounds {
                    site: site(Some(inv)),
                    space,
                    memory,
                    index,
                    lanes,
                    len,
                }
            }
            FaultKind::Unaligned {
                inv,
                mem,
                index,
                lanes,
            } => {
                let (space, memory) = self.space_and_name(mem);
                InterpError::UnalignedAccess {
                    site: site(Some(inv)),
                    space,
                    memory,
                    index,
                    lanes,
                }
            }
            FaultKind::Uninit { inv, mem, index } => InterpError::UninitializedSharedRead {
                site: site(Some(inv)),
                memory: self.kernel.memory_name(mem),
                index,
            },
            FaultKind::Race {
                inv,
                mem,
                index,
                kind,
                first_epoch,
                first_local,
            } => {
                let (space, memory) = self.space_and_name(mem);
                InterpError::Race {
                    site: site(Some(inv)),
                    space,
                    memory,
                    index,
                    kind,
                    first: Invocation {
                        workgroup: self.workgroup_of_epoch(first_epoch),
                        local: self.local_id(super::track::invocation_of(first_local)),
                    },
                }
            }
            FaultKind::Divergent { arrived, missing } => InterpError::DivergentBarrier {
                site: site(None),
                arrived,
                returned: self.returned_count,
                total: self.n_inv,
                missing: self.local_id(missing),
            },
            FaultKind::UnsetLocal { inv, local } => InterpError::UnsetLocal {
                site: site(Some(inv)),
                local: self.kernel.local_name(local),
            },
            FaultKind::DivergentFragment { arrived } => InterpError::DivergentFragment {
                site: site(None),
                arrived,
                total: self.n_inv,
            },
            FaultKind::FragmentOperandDiffers {
                inv,
                operand,
                expected,
                found,
            } => InterpError::FragmentOperandDiffers {
                site: site(Some(inv)),
                operand,
                expected,
                found,
            },
            FaultKind::UnsetFragment { inv, fragment } => InterpError::UnsetFragment {
                site: site(Some(inv)),
                fragment: self.kernel.fragment_name(fragment),
            },
            FaultKind::MisalignedFragment {
                inv,
                fragment,
                index,
                stride,
            } => InterpError::MisalignedFragment {
                site: site(Some(inv)),
                fragment: self.kernel.fragment_name(fragment),
                index,
                stride,
            },
            FaultKind::FragmentSourceChanged { inv, fragment } => {
                InterpError::FragmentSourceChanged {
                    site: site(Some(inv)),
                    fragment: self.kernel.fragment_name(fragment),
                }
            }
            FaultKind::AsyncCopy {
                inv,
                shared,
                index,
                what,
            } => InterpError::AsyncCopy {
                site: site(Some(inv)),
                memory: self.kernel.memory_name(Memory::Shared(shared)),
                index,
                what,
            },
            FaultKind::SharedReuse {
                inv,
                shared,
                previous,
            } => InterpError::SharedReuse {
                site: site(Some(inv)),
                memory: self.kernel.memory_name(Memory::Shared(shared)),
                previous: self.kernel.memory_name(Memory::Shared(previous)),
            },
            FaultKind::Malformed { inv, what } => InterpError::Malformed {
                site: site(Some(inv)),
                what,
            },
        }
    }
}

pub(super) fn race(
    mem: Memory,
    index: usize,
    (kind, first_epoch, first_local): Conflict,
    inv: u32,
) -> Box<Fault> {
    fault(FaultKind::Race {
        mem,
        index: index as u64,
        kind,
        first_epoch,
        first_local,
        inv,
    })
}

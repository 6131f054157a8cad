//! Asynchronous copies ([`kernelc_ir::async_copy`]) as `cp.async` (sm_80 and later):
//! a 16-byte copy is `cp.async.cg` (cached in L2 only: the tile is read from shared
//! memory, not again from L1), a 4- or 8-byte one `cp.async.ca`; each takes the
//! number of source bytes to read (the rest is zero-filled), 0 where the copy's
//! condition is false, with the source pointer then at the buffer's start (nothing
//! is read). Bounds are checked as for any access (a failed check raises the fault
//! and skips the copy): the destination always, the source where the condition
//! holds.

use super::value::int;
use super::{Flavor, Lower, OrInternal};
use crate::CodegenError;
use inkwell::values::IntValue;
use kernelc_ir::async_copy::CopyStart;
use kernelc_ir::AsyncCopyOp;

impl<'ctx> Lower<'_, 'ctx> {
    pub(super) fn async_copy(&mut self, op: &AsyncCopyOp) -> Result<(), CodegenError> {
        if self.flavor == Flavor::Cpu {
            return Err(CodegenError::unexpanded_async_copies(
                crate::cpu::llvm::TARGET,
            ));
        }
        match op {
            AsyncCopyOp::Start(c) => self.copy_start(c),
            AsyncCopyOp::Commit => {
                self.call_intrinsic_void("llvm.nvvm.cp.async.commit.group", &[], &[])
            }
            AsyncCopyOp::Wait { pending } => {
                let n = self.ctx.i32_type().const_int(*pending as u64, false);
                self.call_intrinsic_void("llvm.nvvm.cp.async.wait.group", &[], &[n.into()])
            }
        }
    }

    fn copy_start(&mut self, c: &CopyStart) -> Result<(), CodegenError> {
        let (dst, src) = c.memories();
        let (dst_index, src_index, len, valid) = (&c.dst_index, &c.src_index, c.len, &c.valid);
        let di = int(self.expr(dst_index)?.first()?)?;
        let si = int(self.expr(src_index)?.first()?)?;
        let valid = int(self.expr(valid)?.first()?)?;
        let to = self.memory_of(dst)?;
        let from = self.memory_of(src)?;
        let proven_dst = self.ranges.access(dst_index, len, to.len);
        let proven_src = self.ranges.access(src_index, len, from.len);
        let (dst_ok, dst_in) = self.access_ok(di, len, to.len, proven_dst)?;
        let (src_ok, src_in) = self.access_ok(si, len, from.len, proven_src)?;
        let b = &self.b;
        let unread = b.build_not(valid, "").or_internal()?;
        let src_ok = b.build_or(unread, src_ok, "").or_internal()?;
        let src_in = b.build_or(unread, src_in, "").or_internal()?;
        let ok = b.build_and(dst_ok, src_ok, "copy_ok").or_internal()?;
        let in_bounds = b.build_and(dst_in, src_in, "").or_internal()?;
        self.branch_on_checks("copy", (ok, in_bounds), |l| {
            let bytes = len as u32 * to.elem.size_bytes();
            let i32t = l.ctx.i32_type();
            let zero = i32t.const_zero();
            let read_at = l.select_int(valid, si, zero)?;
            let dst_ptr = l.element_ptr(&to, di)?;
            let src_ptr = l.element_ptr(&from, read_at)?;
            let read_bytes = l.select_int(valid, i32t.const_int(bytes as u64, false), zero)?;
            let name = match bytes {
                16 => "llvm.nvvm.cp.async.cg.shared.global.16.s".to_string(),
                _ => format!("llvm.nvvm.cp.async.ca.shared.global.{bytes}.s"),
            };
            l.call_intrinsic_void(
                &name,
                &[],
                &[dst_ptr.into(), src_ptr.into(), read_bytes.into()],
            )
        })?;
        Ok(())
    }

    fn select_int(
        &self,
        cond: IntValue<'ctx>,
        then: IntValue<'ctx>,
        otherwise: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>, CodegenError> {
        let v = self
            .b
            .build_select(cond, then, otherwise, "")
            .or_internal()?;
        int(v)
    }
}

//! Unit tests of the SPIR-V emitter's building blocks (the module-level checks with
//! `spirv-val` and naga are in `codegen/tests/spirv.rs`).

use super::{disassemble, emit};
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

#[test]
fn module_header_is_spirv_1_3() {
    let mut k = KernelBuilder::new("header", [1, 1, 1]);
    let a = k.buffer("a", ScalarType::F32, 4, Access::ReadWrite);
    let kernel = k.build(|f| f.store(a, 0u32, a.at(1u32))).unwrap();
    let words = emit(&kernel).unwrap();
    assert_eq!(words[0], 0x0723_0203, "magic");
    assert_eq!(words[1], 0x0001_0300, "version 1.3");
    let text = disassemble(&words);
    assert!(text.contains("OpMemoryModel Logical GLSL450"), "{text}");
    assert!(text.contains("GLSL.std.450"), "{text}");
}

#[test]
fn garbage_does_not_disassemble() {
    assert!(disassemble(&[1, 2, 3]).starts_with("; not a SPIR-V module"));
}

#[test]
fn constants_are_shared() {
    let mut k = KernelBuilder::new("consts", [1, 1, 1]);
    let a = k.buffer("a", ScalarType::U32, 8, Access::ReadWrite);
    let kernel = k
        .build(|f| {
            f.store(a, 0u32, a.at(1u32) + 7u32);
            f.store(a, 2u32, a.at(3u32) + 7u32);
        })
        .unwrap();
    let text = disassemble(&emit(&kernel).unwrap());
    let sevens = text
        .lines()
        .filter(|l| l.contains("OpConstant") && l.trim_end().ends_with(" 7"))
        .count();
    assert_eq!(sevens, 1, "{text}");
}

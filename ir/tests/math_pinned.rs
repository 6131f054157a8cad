//! Pins the exact IR `expand_math` emits for every expanded function, f32 and f64,
//! scalar and vec4: a change to the algorithms' output (intended or not) changes these
//! hashes. Update the table only for an intended change of the emitted IR (the test
//! failure shows the first new line).

use kernelc_ir::builder::*;
use kernelc_ir::passes::{expand_math, MathExpansion};
use kernelc_ir::ScalarType::{self, F32, F64};
use kernelc_ir::{stable_hash, Access, Expr, Kernel, MathFn};

fn kernel(func: MathFn, ty: ScalarType, lanes: u8) -> Kernel {
    let n = 64u32;
    let mut k = KernelBuilder::new("pin", [64, 1, 1]);
    let a = k.buffer("a", ty, n as u64, Access::Read);
    let b = k.buffer("b", ty, n as u64, Access::Read);
    let out = k.buffer("out", ty, n as u64, Access::Write);
    k.build(|body| {
        let i = body.let_("i", global_id(0) * lanes as u32);
        let x = body.let_("x", a.load(i.clone(), lanes));
        let y = body.let_("y", b.load(i.clone(), lanes));
        let args = if func == MathFn::Pow {
            vec![x.0, y.0]
        } else {
            vec![x.0]
        };
        body.store(out, i.clone(), E(Expr::Math { func, args }));
    })
    .expect("pin kernel must validate")
}

fn hashes() -> Vec<String> {
    let opts = MathExpansion::all_transcendental_with_f64();
    let mut v = Vec::new();
    for func in MathExpansion::SUPPORTED {
        for ty in [F32, F64] {
            for lanes in [1u8, 4] {
                let h = stable_hash(&expand_math(&kernel(func, ty, lanes), &opts));
                v.push(format!("{} {:?} x{} {}", func.name(), ty, lanes, h));
            }
        }
    }
    v
}

const PINNED: [&str; 36] = [
    "exp F32 x1 0e5d5a1abd9c934053915cdda91c53a2627a10028f0893ea41df0a5f8ae21ff4",
    "exp F32 x4 98f0fc78ea44f6e807fdee9fbe61775547dcb3a7f992f331d0f469d29d627c3e",
    "exp F64 x1 3d14d37d608724f7ca11b04f3a32b44ad20cbdbe2636c0747b0d5e210c734ccc",
    "exp F64 x4 9b74970e63be9f9c6e0e3a7c4c9ac0199cee7ec97ae1b8e6f262b68b548179df",
    "exp2 F32 x1 ef41299ad247dbb4c6ea47aca231f0b8c9a4ea5bb994a5d0bf4988a77be0ae77",
    "exp2 F32 x4 25b328db468955bbdfcb3859f58c6d32f378edd87ec5b6a7e31ad138c2ca10e6",
    "exp2 F64 x1 0a97a0e22ac3d7e5a6a9adf48d8840134489cf486292792b1bcaf3bd7edfa2fa",
    "exp2 F64 x4 aa972e97d9f73a55c0ca3729639b7fe9d4d37e80c582d45f75570b839605807d",
    "log F32 x1 5b01b1e15cadb73b632980f342445059aea8e47818dfd0639c3a507f22cd85d3",
    "log F32 x4 44eade0f102fc7a1010ca9793350cd5569fcc223804a721788890abb90858494",
    "log F64 x1 2e94249a6404662e65396e2b82b870ec5355d6b0f9ed8bb391727c4762e2d6de",
    "log F64 x4 ae83dbfbe805a94b1b9e1cc9c86ad095a8f2c66537ef24fdb05fc7183c8b891d",
    "log2 F32 x1 99fda29da9b8d40779026c5b8305ad0d82dfaf6e258e73aac065cb20cb5f8832",
    "log2 F32 x4 6ed4c302daac9b06cc6963064957064c368f43828cbd1b6ecbcee2a4d524d126",
    "log2 F64 x1 040046611005793065ab3abcec9a50922993e1d4714958f4ed9223d2f1ec770e",
    "log2 F64 x4 dafa9903ec8a592ab183d05114314f39ed7c7d18d761874d6607b8f8d5518bea",
    "tanh F32 x1 4a423e224890abd5cd5961b2ba1095ef2a170745f4806784a1ccc815ba56e53b",
    "tanh F32 x4 3b7fde154afca79291bd14ef4576ba21ca0b69d7950127f44fc1d35e2cf9c652",
    "tanh F64 x1 ea6f8ea36e18803b2b989d57c1e452d8f85492f964ab32a43f1ed84ea4fe9f5a",
    "tanh F64 x4 8eda32ce1bbac5741517b7a8d78c27d016d164938c2a3d87243fa059d06a12c5",
    "erf F32 x1 3444e6b5484214d014202cea9cca7f3c8d6450e68aeb4946ecec53688895e560",
    "erf F32 x4 ab9d3d8f38f2e8cd7af9ae03e6b01772cb43fce7d202ba22782f83bb4d44f5ea",
    "erf F64 x1 e9d2169de90ee25eacf649620fd957d10914b4ef9413dae8bae2e0b7317c5a02",
    "erf F64 x4 6e7d64026e8bbc92f6c840194433296b2491829a715d6e87ca4c48fb0b63ca73",
    "sin F32 x1 2a6dbf3b31f061b369ecc5b1767c8ec998c638d3977ca57edd16f522a3175e49",
    "sin F32 x4 aba225fc7996370067fd17a28aa545eeba652fa580cd767fa83047c0670543e2",
    "sin F64 x1 50afde159cb9c663cf058a9b79ca72e91400483a4ec75e148177aa1d100bdedc",
    "sin F64 x4 9b36ff88122fb3a79670cf189380bea4899c5911396e3228b0d5fff55d168ef5",
    "cos F32 x1 dd7a2e36f6bde86d6d5bc333106d8d53e642c6f82eb70f1a1e38de0644504283",
    "cos F32 x4 38c9dd5dda7ad24d0ad524b65a4cc7543f534f81ffd4f6582e71ad3095abf6ab",
    "cos F64 x1 01801b8bcf0e5238a3e1943479a8465e7bfa5fe7a43bdeae07e7bc6e37871e8c",
    "cos F64 x4 ab2440b7b8338a8b6c18931d642776d6304b2fec0c3b56f490b05ed98afbc1cb",
    "pow F32 x1 99f192525c7b02364c6685e8ee0f7d0bc80a23637cf31b17e58e8f48e14ea2b4",
    "pow F32 x4 6ac1c1056f7e1f685f669540054b7cf8fa84153f056f3ecc8418550ef384c946",
    "pow F64 x1 756f6959f3ff028470392282d4db94df81853bebeb3f7a36152327ec74b26d1b",
    "pow F64 x4 9da3169cf1560901e033274cffdd4c9204247cb267c18cddab140a03acbdc79f",
];

#[test]
fn expanded_ir_is_pinned() {
    let got = hashes();
    for (got, want) in got.iter().zip(PINNED) {
        assert_eq!(got, want, "emitted IR changed");
    }
    assert_eq!(got.len(), PINNED.len());
}
